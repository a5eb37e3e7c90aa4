"""Live objects for /validate (webhook.cluster.livesamples) against the fake API server, and what the
HTTP /validate passes to the validation when a cluster is there: the CRD schemas,
``crd_required`` and the live objects, within the validation budget."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fakeapi import (
    CRDS,
    TRAINER,
    TRAINERS,
    FakeAPI,
    install_crds,
    karta,
    stored,
    trainer,
    trainer_crd,
)
from helpers import ENGINE

from webhook.admission import handlers
from webhook.admission.review import Response
from webhook.admission.state import State
from webhook.base.gvk import GVK
from webhook.base.limits import LIVE_SAMPLES_TIMEOUT, MAX_LIVE_SAMPLES, VALIDATE_BUDGET
from webhook.cluster.crdsync import CRDSync
from webhook.cluster.livesamples import LiveSampler, list_path, no_retry_client

JOBS = "/apis/batch/v1/jobs"


def serve_trainers(fake: FakeAPI, n: int) -> None:
    objects = {}
    for i in range(n):
        obj = stored(trainer(), str(200 + i))
        obj["metadata"]["name"] = f"t{i:02d}"
        objects[f"team-a/t{i:02d}"] = obj
    fake.collections[TRAINERS] = ("example.com/v1", "TrainerList", objects)


def cluster_state(fake: FakeAPI, *crds: dict[str, Any]) -> State:
    install_crds(fake, *crds)
    state = State(watch_cluster=True)
    state.set_cluster([])
    CRDSync(state, fake.api()).relist()
    return state


def sampler(fake: FakeAPI, limit: int = 20) -> LiveSampler:
    return LiveSampler(no_retry_client(fake.api()), limit)


# --------------------------------------------------------------------------- the reader


def test_reads_up_to_n_objects_with_one_bounded_list(fake: FakeAPI) -> None:
    serve_trainers(fake, 30)
    state = cluster_state(fake, trainer_crd())
    samples, warnings = sampler(fake, 20)(TRAINER, state.snapshot.crds)
    assert warnings == []
    assert len(samples) == 20
    assert fake.seen("GET", TRAINERS) == 1  # one request, no paging through the rest
    ((_, query),) = [(p, q) for p, q in fake.queries if p == TRAINERS]
    assert query == {"limit": "20"}
    label, obj = samples[0]
    assert label == "cluster:team-a/t00"
    assert (obj["apiVersion"], obj["kind"]) == ("example.com/v1", "Trainer")
    assert "managedFields" not in obj["metadata"]
    assert obj["spec"]["template"]["spec"]["containers"] == [{"name": "c"}]


def test_built_in_kinds_get_their_kind_back(fake: FakeAPI) -> None:
    # The API server's list of a built-in kind has no apiVersion/kind on its items.
    job = {"metadata": {"name": "j", "namespace": "ns"}, "spec": {"template": {"spec": {}}}}
    fake.collections[JOBS] = ("batch/v1", "JobList", {"ns/j": job})
    samples, warnings = sampler(fake)(GVK("batch", "v1", "Job"), None)
    assert warnings == [] and [label for label, _ in samples] == ["cluster:ns/j"]
    assert (samples[0][1]["apiVersion"], samples[0][1]["kind"]) == ("batch/v1", "Job")
    assert list_path(GVK("", "v1", "Pod"), None) == "/api/v1/pods"


def test_the_plural_comes_from_the_crd(fake: FakeAPI) -> None:
    state = cluster_state(fake, trainer_crd(plural="trainerz"))
    assert list_path(TRAINER, state.snapshot.crds) == TRAINERS
    # a kind no CRD serves (and not built in): nothing to read, nothing asked, nothing said
    other = GVK("example.com", "v1", "Other")
    assert list_path(other, state.snapshot.crds) is None
    assert sampler(fake)(other, state.snapshot.crds) == ([], [])
    assert list_path(TRAINER, None) is None  # CRDs not known yet


def test_forbidden_is_a_warning_that_says_what_to_grant(fake: FakeAPI) -> None:
    serve_trainers(fake, 3)
    fake.forbidden.add(TRAINERS)
    state = cluster_state(fake, trainer_crd())
    samples, warnings = sampler(fake)(TRAINER, state.snapshot.crds)
    assert samples == []
    (w,) = warnings
    assert w.startswith("live objects of example.com/v1 Trainer not read: forbidden")
    assert "grant list on trainerz.example.com" in w and "--live-samples 0" in w


def test_a_slow_list_is_cut_off_without_retries(fake: FakeAPI) -> None:
    serve_trainers(fake, 3)
    state = cluster_state(fake, trainer_crd())
    fake.delays[TRAINERS] = 1.0
    samples, warnings = sampler(fake)(TRAINER, state.snapshot.crds, timeout=0.2)
    assert samples == []
    (w,) = warnings
    assert "no answer within" in w and "checked without them" in w
    assert fake.seen("GET", TRAINERS) == 1  # urllib3 would retry a timed-out read by default


def test_a_list_too_large_is_dropped(fake: FakeAPI) -> None:
    serve_trainers(fake, 5)
    state = cluster_state(fake, trainer_crd())
    small = LiveSampler(no_retry_client(fake.api()), 20, max_bytes=1000)
    samples, warnings = small(TRAINER, state.snapshot.crds)
    assert samples == []
    assert "response larger than 1000 bytes" in warnings[0]


def test_not_served_at_that_version_is_a_warning(fake: FakeAPI) -> None:
    state = cluster_state(fake, trainer_crd())  # the CRD is there, its objects' URL is not
    samples, warnings = sampler(fake)(TRAINER, state.snapshot.crds)
    assert samples == []
    assert "does not serve /apis/example.com/v1/trainerz" in warnings[0]


def test_limits() -> None:
    from kubernetes import client

    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    assert LiveSampler(api, 10_000).limit == MAX_LIVE_SAMPLES
    assert LiveSampler(api, 0)(TRAINER, None) == ([], [])
    assert LIVE_SAMPLES_TIMEOUT < VALIDATE_BUDGET
    assert (
        no_retry_client(api).rest_client.pool_manager.connection_pool_kw["retries"].total is False
    )


# --------------------------------------------------------------------------- HTTP /validate


def review(obj: dict[str, Any], operation: str = "CREATE", old: Any = None) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "run.ai", "version": "v1alpha1", "kind": "Karta"},
            "resource": {"group": "run.ai", "version": "v1alpha1", "resource": "kartas"},
            "operation": operation,
            "name": obj["metadata"]["name"],
            "object": obj,
            "oldObject": old,
            "userInfo": {"username": "me"},
        },
    }


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """handlers.validate replaced by a recorder: the cluster parameters (schemas,
    live_samples, crd_required) are the validation side's, which may not be on this branch."""
    calls: list[dict[str, Any]] = []

    def validate(req: Any, samples: Any, conflicts: Any, engine: Any, **kw: Any) -> Any:
        calls.append(kw)
        return handlers.Result(Response(uid=req.uid), "Karta", "allowed")

    monkeypatch.setattr(handlers, "validate", validate)
    return calls


def test_validate_passes_schemas_and_live_objects(
    fake: FakeAPI, recorded: list[dict[str, Any]]
) -> None:
    from webhook.server.app import create_app

    serve_trainers(fake, 3)
    state = cluster_state(fake, trainer_crd())
    state.live_samples = sampler(fake, 2)
    app = create_app(state, engine=ENGINE).test_client()
    resp = app.post("/validate", json=review(karta("trainer"))).get_json()["response"]
    assert resp["allowed"] is True
    (kw,) = recorded
    assert kw["schemas"] is state.snapshot.crds and kw["crd_required"] is True
    assert [label for label, _ in kw["live_samples"]] == [
        "cluster:team-a/t00",
        "cluster:team-a/t01",
    ]
    assert VALIDATE_BUDGET / 2 <= kw["budget"] < VALIDATE_BUDGET  # the list took some of it


def test_validate_warns_when_live_objects_cannot_be_read(
    fake: FakeAPI, recorded: list[dict[str, Any]]
) -> None:
    from webhook.server.app import create_app

    fake.forbidden.add(TRAINERS)
    state = cluster_state(fake, trainer_crd())
    state.live_samples = sampler(fake)
    app = create_app(state, engine=ENGINE).test_client()
    resp = app.post("/validate", json=review(karta("trainer"))).get_json()["response"]
    assert resp["allowed"] is True  # never a denial by itself
    (w,) = resp["warnings"]
    assert w.startswith("karta-webhook: live objects of example.com/v1 Trainer not read: forbidden")
    assert "live_samples" not in recorded[0]


def test_validate_lists_only_what_it_checks(fake: FakeAPI, recorded: list[dict[str, Any]]) -> None:
    from webhook.server.app import create_app

    serve_trainers(fake, 3)
    state = cluster_state(fake, trainer_crd())
    state.live_samples = sampler(fake)
    app = create_app(state, engine=ENGINE).test_client()
    k = karta("trainer")
    relabelled = copy.deepcopy(k)
    relabelled["metadata"]["labels"] = {"a": "b"}
    app.post("/validate", json=review(relabelled, "UPDATE", k))  # spec unchanged: not checked
    app.post("/validate", json=review(k, "DELETE"))
    assert fake.seen("GET", TRAINERS) == 0


def test_offline_validate_passes_nothing_more(recorded: list[dict[str, Any]]) -> None:
    from webhook.server.app import create_app

    app = create_app(State(), engine=ENGINE).test_client()
    app.post("/validate", json=review(karta("trainer")))
    (kw,) = recorded
    assert not {"schemas", "crd_required", "live_samples"} & set(kw)


def test_a_karta_whose_kind_has_no_crd_is_admitted_with_a_warning(fake: FakeAPI) -> None:
    from webhook.server.app import create_app

    state = cluster_state(fake)  # the cluster's CRDs are known: none serves Trainer
    state.live_samples = sampler(fake)
    app = create_app(state, engine=ENGINE).test_client()
    resp = app.post("/validate", json=review(karta("trainer"))).get_json()["response"]
    assert resp["allowed"] is True
    assert any("CRD" in w or "CustomResourceDefinition" in w for w in resp.get("warnings", []))
    assert fake.seen("GET", CRDS) == 1 and fake.seen("GET", TRAINERS) == 0


def test_a_failing_reader_is_a_warning_not_a_denial(
    fake: FakeAPI, recorded: list[dict[str, Any]]
) -> None:
    from webhook.server.app import create_app

    def broken(gvk: GVK, crds: Any, timeout: float) -> Any:
        raise RuntimeError("boom")

    state = cluster_state(fake, trainer_crd())
    state.live_samples = broken
    app = create_app(state, engine=ENGINE).test_client()
    resp = app.post("/validate", json=review(karta("trainer"))).get_json()["response"]
    assert resp["allowed"] is True
    assert resp["warnings"] == [
        "karta-webhook: live objects of example.com/v1 Trainer not read (RuntimeError: boom)"
    ]
