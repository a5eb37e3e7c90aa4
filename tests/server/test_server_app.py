"""The webhook Flask app through its test client: routes, status codes, metrics, logs, reload.

The real server (gunicorn, TLS, certificate reload, idle connections) is driven in
``tests/e2e/test_server.py``; here everything runs in one process with the default registry.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from helpers import (
    JOBSET,
    JOBSET_KARTA,
    POLICY,
    assert_denied_with_field_paths,
    broken_karta,
    load,
    patch_of,
    review,
)
from prometheus_client import REGISTRY

from webhook.admission import handlers
from webhook.admission.state import FileReloader, State
from webhook.base import limits
from webhook.server import app as server
from webhook.server import logs, metrics


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(POLICY)
    return p


@pytest.fixture
def state(policy_file: Path) -> State:
    return State([], policy_file)


@pytest.fixture
def client(state: State):
    return server.create_app(state).test_client()


def post(client, path: str, body: Any, **kw):
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    return client.post(path, data=data, content_type=kw.pop("content_type", "application/json"))


def answer(resp) -> dict[str, Any]:
    assert resp.status_code == 200, resp.get_data(as_text=True)
    out = resp.get_json(force=True)
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    return out["response"]


def metric(name: str, **labels: str) -> float:
    metrics.flush()  # what requests counted is queued until written (as /metrics does)
    return REGISTRY.get_sample_value(name, labels) or 0.0


# --------------------------------------------------------------------------------- probes


def test_healthz_and_readyz(client) -> None:
    assert client.get("/healthz").status_code == 200
    r = client.get("/readyz")
    assert r.status_code == 200
    assert r.get_json()["definitions"] >= 20 and r.get_json()["policyRules"] == 1


def test_readyz_waits_for_the_cluster(policy_file: Path) -> None:
    state = State([], policy_file, watch_cluster=True)
    c = server.create_app(state).test_client()
    assert c.get("/healthz").status_code == 200
    assert c.get("/readyz").status_code == 503
    state.set_cluster([])
    assert c.get("/readyz").status_code == 200


def test_unknown_route_and_method_are_plain_text(client) -> None:
    r = client.get("/nope")
    assert r.status_code == 404 and r.mimetype == "text/plain"
    r = client.get("/mutate")
    assert r.status_code == 405 and "Traceback" not in r.get_data(as_text=True)


def test_405_says_which_methods_are_allowed(client) -> None:
    r = client.get("/mutate")  # RFC 9110 15.5.6: a 405 carries Allow
    assert r.status_code == 405 and "POST" in r.headers.get("Allow", "")
    assert r.mimetype == "text/plain"


# --------------------------------------------------------------------------------- mutate


def test_mutate_patches_every_template_and_is_idempotent(client) -> None:
    obj = load(JOBSET)
    rv = review(obj)
    before = metric(
        "karta_webhook_requests_total",
        webhook="mutate",
        kind="JobSet",
        operation="CREATE",
        outcome="patched",
    )
    r = answer(post(client, "/mutate", rv))
    assert r["uid"] == rv["request"]["uid"] and r["allowed"] is True
    patched = jsonpatch.apply_patch(obj, patch_of(r))
    for rj in patched["spec"]["replicatedJobs"]:
        tpl = rj["template"]["spec"]["template"]
        assert tpl["spec"]["schedulerName"] == "kai-scheduler"
        assert tpl["metadata"]["labels"]["kai.scheduler/queue"] == "research"
        assert tpl["metadata"]["annotations"]["example.com/owner"] == "trainer"
    assert r["auditAnnotations"]["mutated-templates"] == "2"
    assert (
        metric(
            "karta_webhook_requests_total",
            webhook="mutate",
            kind="JobSet",
            operation="CREATE",
            outcome="patched",
        )
        == before + 1
    )
    # Reinvocation (or an UPDATE of the patched object) changes nothing.
    again = answer(post(client, "/mutate", review(patched, "UPDATE")))
    assert again["allowed"] is True and "patch" not in again


def test_mutate_dry_run_is_answered_the_same(client) -> None:
    rv = review(load(JOBSET))
    rv["request"]["dryRun"] = True
    assert patch_of(answer(post(client, "/mutate", rv)))


def test_mutate_stamps_karta_index_labels(client) -> None:
    r = answer(post(client, "/mutate", review(load(JOBSET_KARTA), resource="kartas")))
    patched = jsonpatch.apply_patch(load(JOBSET_KARTA), patch_of(r))
    assert patched["metadata"]["labels"] == {
        "run.ai/karta-group": "jobset.x-k8s.io",
        "run.ai/karta-version": "v1alpha2",
        "run.ai/karta-kind": "JobSet",
    }


def test_mutate_allows_delete_and_unknown_kinds(client) -> None:
    obj = load(JOBSET)
    r = answer(post(client, "/mutate", review(obj, "DELETE")))
    assert r["allowed"] is True and "patch" not in r
    other = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    before = metric(
        "karta_webhook_requests_total",
        webhook="mutate",
        kind="other",
        operation="CREATE",
        outcome="skipped",
    )
    r = answer(post(client, "/mutate", review(other, resource="widgets")))
    assert r["allowed"] is True and "patch" not in r
    # made-up kinds share one label value
    assert (
        metric(
            "karta_webhook_requests_total",
            webhook="mutate",
            kind="other",
            operation="CREATE",
            outcome="skipped",
        )
        == before + 1
    )


def test_mutate_failure_allows_with_a_warning(client, monkeypatch) -> None:
    def boom(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("kaput")

    monkeypatch.setattr(handlers, "mutate", boom)
    rv = review(load(JOBSET))
    r = answer(post(client, "/mutate", rv))
    assert r["uid"] == rv["request"]["uid"] and r["allowed"] is True
    assert "kaput" in r["warnings"][0] and "patch" not in r


def test_validate_failure_denies(client, monkeypatch) -> None:
    def boom(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("kaput")

    monkeypatch.setattr(handlers, "validate", boom)
    rv = review(load(JOBSET_KARTA), resource="kartas")
    r = answer(post(client, "/validate", rv))
    assert r["uid"] == rv["request"]["uid"] and r["allowed"] is False
    assert r["status"]["code"] == 500 and "kaput" in r["status"]["message"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"garbage", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(), "AdmissionReview"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            "no request",
        ),
        (b"", "not JSON"),
    ],
)
@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_bad_requests_are_400_with_one_line(client, path: str, body: bytes, reason: str) -> None:
    r = post(client, path, body)
    text = r.get_data(as_text=True)
    assert r.status_code == 400
    assert reason in text and text.count("\n") <= 1 and "Traceback" not in text


def test_content_type_is_not_required(client) -> None:
    r = post(client, "/mutate", review(load(JOBSET)), content_type="text/plain")
    assert patch_of(answer(r))


def test_body_over_the_cap_is_413(client) -> None:
    big = b" " * (limits.MAX_BODY + 1)
    r = post(client, "/mutate", big)
    assert r.status_code == 413 and "larger than" in r.get_data(as_text=True)


def test_body_over_the_cap_is_413_even_when_the_client_goes_away(client) -> None:
    class Reset(io.RawIOBase):  # the client hangs up while its oversized body is drained
        def readinto(self, b: Any) -> int:
            raise ConnectionResetError("connection reset by peer")

    r = client.post(
        "/mutate",
        content_type="application/json",
        environ_overrides={"wsgi.input": Reset(), "CONTENT_LENGTH": str(limits.MAX_BODY + 1)},
    )
    assert r.status_code == 413 and "larger than" in r.get_data(as_text=True)


def test_admission_log_line_is_json_with_fields(client, caplog) -> None:
    rv = review(load(JOBSET))
    with caplog.at_level(logging.INFO, logger="karta_webhook.admission"):
        post(client, "/mutate", rv)
    recs = [
        r for r in caplog.records if getattr(r, "fields", {}).get("uid") == rv["request"]["uid"]
    ]
    assert len(recs) == 1
    line = json.loads(logs.JsonFormatter().format(recs[0]))
    for key in ("ts", "uid", "webhook", "kind", "namespace", "name", "operation", "outcome"):
        assert key in line
    assert line["ops"] > 0 and line["ms"] >= 0 and line["namespace"] == "research"
    assert "\n" not in logs.JsonFormatter().format(recs[0])


# --------------------------------------------------------------------------------- validate


def test_validate_allows_a_catalog_karta(client) -> None:
    r = answer(post(client, "/validate", review(load(JOBSET_KARTA), resource="kartas")))
    assert r["allowed"] is True, r


def test_validate_past_its_waiters_is_busy_at_once_and_mutate_goes_on(state: State) -> None:
    """Kartas never hold the request threads /mutate needs: with the validation slot taken
    and its one waiter waiting, a further /validate is answered 429 at once (not after the
    wait), and /mutate is answered as ever."""
    app = server.create_app(state)
    hooks = app.extensions["karta"]
    client = app.test_client()
    assert hooks.validations.acquire(blocking=False)  # a check running
    assert hooks.validate_waiters.acquire(blocking=False)  # one more waiting for it
    try:
        t0 = time.monotonic()
        r = answer(post(client, "/validate", review(load(JOBSET_KARTA), resource="kartas")))
        waited = time.monotonic() - t0
        assert r["allowed"] is False and r["status"]["code"] == 429, r
        assert waited < 0.5  # the waiting path waits a second; this one must not
        assert patch_of(answer(post(client, "/mutate", review(load(JOBSET)))))
    finally:
        hooks.validate_waiters.release()
        hooks.validations.release()
    r = answer(post(client, "/validate", review(load(JOBSET_KARTA), resource="kartas")))
    assert r["allowed"] is True, r


def test_validate_denies_with_every_field_error(client) -> None:
    before = metric(
        "karta_webhook_requests_total",
        webhook="validate",
        kind="Karta",
        operation="CREATE",
        outcome="denied",
    )
    r = answer(post(client, "/validate", review(broken_karta(), resource="kartas")))
    assert_denied_with_field_paths(r)
    assert (
        metric(
            "karta_webhook_requests_total",
            webhook="validate",
            kind="Karta",
            operation="CREATE",
            outcome="denied",
        )
        == before + 1
    )


def test_validate_allows_delete_and_other_kinds(client) -> None:
    r = answer(post(client, "/validate", review(broken_karta(), "DELETE", resource="kartas")))
    assert r["allowed"] is True
    r = answer(post(client, "/validate", review(load(JOBSET))))
    assert r["allowed"] is True


def test_validate_does_not_judge_unchanged_or_leaving_kartas(client) -> None:
    k = broken_karta()
    same = review(k, "UPDATE", resource="kartas")  # labels changed, spec did not
    same["request"]["oldObject"] = {**k, "metadata": {"name": "broken", "labels": {"a": "b"}}}
    assert answer(post(client, "/validate", same))["allowed"] is True
    leaving = copy.deepcopy(k)
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    rv = review(leaving, "UPDATE", resource="kartas")
    rv["request"]["oldObject"] = load(JOBSET_KARTA)
    assert answer(post(client, "/validate", rv))["allowed"] is True
    changed = review(k, "UPDATE", resource="kartas")
    changed["request"]["oldObject"] = load(JOBSET_KARTA)  # the spec changed: judged
    assert answer(post(client, "/validate", changed))["allowed"] is False


def test_validate_uses_given_samples(state: State, tmp_path: Path) -> None:
    from webhook.karta.samples import SampleIndex

    app = server.create_app(state, samples=SampleIndex.load([tmp_path]))  # no samples at all
    k = broken_karta()
    k["spec"]["structureDefinition"]["childComponents"].pop()  # only the misspelt path left
    r = answer(post(app.test_client(), "/validate", review(k, resource="kartas")))
    assert r["allowed"] is True  # a path can only be found misspelt on a sample


# --------------------------------------------------------------------------------- metrics, reload


def test_metrics_exposition(client) -> None:
    post(client, "/mutate", review(load(JOBSET)))
    text = client.get("/metrics").get_data(as_text=True)
    assert "karta_webhook_requests_total{" in text
    assert "karta_webhook_request_duration_seconds_bucket{" in text
    assert 'karta_webhook_patch_operations_total{kind="JobSet"}' in text
    assert "karta_webhook_definitions_loaded " in text


def test_cpu_per_admission_is_exposed(client) -> None:
    """/metrics has what the CPU per admission is derived from: the request threads' CPU
    seconds by webhook, and the serving process's CPU seconds, beside the request count."""
    body = review(load(JOBSET))
    requests = "karta_webhook_requests_total"
    n0 = metric(requests, webhook="mutate", kind="JobSet", operation="CREATE", outcome="patched")
    before = time.process_time()
    handled0 = metric("karta_webhook_request_cpu_seconds_total", webhook="mutate")
    served0 = metric("karta_webhook_server_cpu_seconds_total")
    for _ in range(20):
        assert answer(post(client, "/mutate", body))["patchType"] == "JSONPatch"
    n1 = metric(requests, webhook="mutate", kind="JobSet", operation="CREATE", outcome="patched")
    handled = metric("karta_webhook_request_cpu_seconds_total", webhook="mutate") - handled0
    served = metric("karta_webhook_server_cpu_seconds_total") - served0
    after = time.process_time()
    assert n1 - n0 == 20
    # the handling is part of what the process spent, which is all it spent in between
    assert 0 < handled <= served <= after - before
    text = client.get("/metrics").get_data(as_text=True)
    assert 'karta_webhook_request_cpu_seconds_total{webhook="mutate"}' in text
    assert "karta_webhook_server_cpu_seconds_total " in text


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_policy_change_is_picked_up_and_a_bad_one_ignored(
    state: State, policy_file: Path, caplog
) -> None:
    clock = Clock()
    client = server.create_app(state, reloader=FileReloader(state, clock=clock)).test_client()
    obj = load(JOBSET)

    def scheduler() -> set[str]:
        clock.now += 10  # the throttle interval has passed
        ops = patch_of(answer(post(client, "/mutate", review(obj))))
        return {op["value"] for op in ops if op["path"].endswith("/schedulerName")}

    assert scheduler() == {"kai-scheduler"}
    policy_file.write_text(POLICY.replace("kai-scheduler", "other-scheduler") + "\n")
    os.utime(policy_file, ns=(1, 1))  # a different mtime even on a coarse clock
    assert scheduler() == {"other-scheduler"}
    with caplog.at_level(logging.ERROR, logger="karta_webhook"):
        policy_file.write_text("rules: [{name: x, bogus: 1}]\n")
        os.utime(policy_file, ns=(2, 2))  # written a while ago (settled)
        assert scheduler() == {"other-scheduler"}  # the last good policy stays
    assert any("reload failed" in r.getMessage() for r in caplog.records)


def test_a_policy_is_read_only_once_it_has_stopped_changing(
    state: State, policy_file: Path, caplog
) -> None:
    """An editor truncates, then writes: the empty file of the moment in between is never
    served (it would mean no rules), nor is it an error; the file is read once it has not
    changed for SETTLE_SECONDS. An empty file that stays is an error, the last good policy
    serving on."""
    clock = Clock()
    client = server.create_app(state, reloader=FileReloader(state, clock=clock)).test_client()
    obj = load(JOBSET)

    def scheduler() -> set[str]:
        clock.now += 10
        ops = patch_of(answer(post(client, "/mutate", review(obj))))
        return {op["value"] for op in ops if op["path"].endswith("/schedulerName")}

    assert scheduler() == {"kai-scheduler"}
    with caplog.at_level(logging.ERROR, logger="karta_webhook"):
        policy_file.write_text("")  # truncated just now
        assert scheduler() == {"kai-scheduler"}
        assert not any("reload failed" in r.getMessage() for r in caplog.records)
        os.utime(policy_file, ns=(3, 3))  # and left empty: settled
        assert scheduler() == {"kai-scheduler"}
        assert any("policy is empty" in str(r.__dict__) for r in caplog.records)
    policy_file.write_text(POLICY.replace("kai-scheduler", "third-scheduler"))
    assert scheduler() == {"kai-scheduler"}  # just written: not yet
    os.utime(policy_file, ns=(4, 4))
    assert scheduler() == {"third-scheduler"}


def test_a_failed_reload_shows_in_the_reload_gauges(state: State, policy_file: Path) -> None:
    """Per source, 1 while its last load succeeded, 0 once a change failed to load (the last
    good version still serving), and when: what an alert and the dashboard read."""
    clock = Clock()
    client = server.create_app(state, reloader=FileReloader(state, clock=clock)).test_client()
    success, when = (
        "karta_webhook_config_last_reload_successful",
        ("karta_webhook_config_last_reload_timestamp_seconds"),
    )
    assert metric(success, source="policy") == 1 and metric(success, source="catalog") == 1
    started = metric(when, source="policy")
    assert started > 0
    policy_file.write_text("rules: [{name: x, bogus: 1}]\n")
    os.utime(policy_file, ns=(1, 1))
    clock.now += 10
    client.get("/healthz")
    assert metric(success, source="policy") == 0
    assert metric(success, source="catalog") == 1  # untouched
    assert metric(when, source="policy") >= started
    policy_file.write_text(POLICY)
    os.utime(policy_file, ns=(2, 2))
    clock.now += 10
    client.get("/healthz")
    assert metric(success, source="policy") == 1


def test_readyz_lists_stale_sources_and_stays_ready(state: State, policy_file: Path) -> None:
    """A source whose last reload failed is named by /readyz, which stays 200: the last good
    version serves (as Prometheus does). A source beside the files (the serving certificate)
    reports through the reloader, and shows in the gauges as well."""
    clock = Clock()
    reloader = FileReloader(state, clock=clock)
    cert_ok = [True]
    reloader.sources["certificates"] = lambda: (cert_ok[0], 42.0)
    client = server.create_app(state, reloader=reloader).test_client()

    def readyz() -> tuple[int, list[str]]:
        clock.now += 10
        r = client.get("/readyz")
        return r.status_code, r.get_json()["staleSources"]

    assert readyz() == (200, [])
    policy_file.write_text("rules: [{name: x, bogus: 1}]\n")
    os.utime(policy_file, ns=(1, 1))
    cert_ok[0] = False
    assert readyz() == (200, ["certificates", "policy"])
    success = "karta_webhook_config_last_reload_successful"
    assert metric(success, source="certificates") == 0
    assert metric("karta_webhook_config_last_reload_timestamp_seconds", source="certificates") == 42
    policy_file.write_text(POLICY)
    os.utime(policy_file, ns=(2, 2))
    cert_ok[0] = True
    assert readyz() == (200, [])
    assert metric(success, source="certificates") == 1


def test_a_source_that_raises_is_stale_not_a_crash(state: State) -> None:
    clock = Clock()
    reloader = FileReloader(state, clock=clock)

    def broken() -> tuple[bool, float]:
        raise RuntimeError("boom")

    reloader.sources["certificates"] = broken
    client = server.create_app(state, reloader=reloader).test_client()
    clock.now += 10
    r = client.get("/readyz")
    assert r.status_code == 200 and r.get_json()["staleSources"] == ["certificates"]


def test_reload_is_throttled(state: State, policy_file: Path) -> None:
    clock = Clock()
    client = server.create_app(state, reloader=FileReloader(state, clock=clock)).test_client()
    calls = []
    state.reload_files = lambda: calls.append(1) or []  # type: ignore[method-assign]
    clock.now += 10
    for _ in range(5):
        client.get("/healthz")
    assert len(calls) == 1
    clock.now += 10
    client.get("/healthz")
    assert len(calls) == 2


def test_definitions_gauge_follows_the_snapshot(state: State) -> None:
    server.create_app(state)
    n = len(state.snapshot.registry)
    assert metric("karta_webhook_definitions_loaded") == n
    state.set_cluster([])  # a new snapshot (same definitions) updates the gauge through a listener
    assert metric("karta_webhook_definitions_loaded") == n


def test_the_gang_route_links_a_pod_to_its_group(tmp_path: Path) -> None:
    """``POST /gang`` answers the gang's Pod webhook through the app, counted as ``gang``."""
    import copy

    from helpers import sample

    from webhook.workload.gang import GANG_LABEL, group_name

    p = tmp_path / "policy.yaml"
    p.write_text("rules: [{name: g, match: {kinds: [JobSet]}, gang: native}]\n")
    st = State([], p)
    js = copy.deepcopy(sample("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml"))
    js["metadata"].update(uid="js-uid", resourceVersion="7")
    st.owners = lambda ns, ref, deadline: js if ref["uid"] == "js-uid" else None
    ref = {
        "apiVersion": js["apiVersion"],
        "kind": "JobSet",
        "name": "trainer",
        "uid": "js-uid",
        "controller": True,
    }
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "research", "ownerReferences": [ref],
                     "labels": {GANG_LABEL: "native", "jobset.sigs.k8s.io/replicatedjob-name": "leader"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }  # fmt: skip
    before = metric(
        "karta_webhook_requests_total",
        webhook="gang",
        kind="Pod",
        operation="CREATE",
        outcome="patched",
    )
    r = answer(post(server.create_app(st).test_client(), "/gang", review(pod, resource="pods")))
    assert patch_of(r) == [
        {"op": "add", "path": "/spec/schedulingGroup",
         "value": {"podGroupName": group_name("trainer", "js-uid", "jobset")}}
    ]  # fmt: skip
    after = metric(
        "karta_webhook_requests_total",
        webhook="gang",
        kind="Pod",
        operation="CREATE",
        outcome="patched",
    )
    assert after == before + 1
