"""The Karta list+watch (webhook.cluster.kartasync) against the fake API server: watch events change
what /mutate does, 410 relists, back-off, unsafe and duplicate Kartas."""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from fakeapi import KARTAS, TRAINER, FakeAPI, event, karta, mutate, status, trainer, wait_for
from helpers import ENGINE

from webhook.admission.state import State
from webhook.base.gvk import GVK
from webhook.cluster.kartasync import ClusterSync, load_cluster_karta

# --------------------------------------------------------------------------- watch


def test_watch_add_modify_delete_changes_mutation(fake: FakeAPI) -> None:
    state = State(watch_cluster=True)
    assert not state.ready
    sync = ClusterSync(state, fake.api(), ENGINE)
    rv = sync.relist()
    assert state.ready and rv == "100"
    assert mutate(state, trainer()).outcome == "skipped"

    fake.watches.put([event("ADDED", karta("trainer", rv="101"))])
    rv = sync.watch_once(rv, 5)
    assert rv == "101"
    result = mutate(state, trainer())
    assert result.outcome == "patched"
    assert {op["path"] for op in result.response.patch} == {"/spec/template/spec/schedulerName"}
    assert [o["metadata"]["name"] for o in sync.objects()] == ["trainer"]

    fake.watches.put(
        [
            {
                "type": "BOOKMARK",
                "object": {"kind": "Karta", "metadata": {"resourceVersion": "102"}},
            },
            event("MODIFIED", karta("trainer", ".spec.other", rv="103")),
        ]
    )
    rv = sync.watch_once(rv, 5)
    assert rv == "103"
    result = mutate(state, trainer())
    assert {op["path"] for op in result.response.patch} == {"/spec/other/spec/schedulerName"}

    fake.watches.put([event("DELETED", karta("trainer", ".spec.other", rv="104"))])
    sync.watch_once(rv, 5)
    result = mutate(state, trainer())
    assert result.outcome == "skipped" and not result.response.patch
    assert sync.objects() == []
    # the bundled catalog is still there
    assert state.snapshot.registry.lookup(GVK("batch", "v1", "Job")) is not None


def test_watch_sends_resource_version_and_timeout(fake: FakeAPI) -> None:
    seen: list[str] = []
    original = fake.handle

    def spy(h: Any, method: str) -> None:
        seen.append(h.path)
        original(h, method)

    fake.handle = spy  # type: ignore[method-assign]
    sync = ClusterSync(State(watch_cluster=True), fake.api(), ENGINE)
    sync.watch_once("42", 7)
    (path,) = [p for p in seen if "watch=" in p]
    query = parse_qs(urlparse(path).query)
    assert query["resourceVersion"] == ["42"]
    assert query["timeoutSeconds"] == ["7"]
    assert query["allowWatchBookmarks"] == ["true"]


@pytest.mark.parametrize("gone", ["event", "status"])
def test_410_gone_relists(fake: FakeAPI, gone: str) -> None:
    state = State(watch_cluster=True)
    sync = ClusterSync(state, fake.api(), ENGINE, backoff_base=0.01)
    if gone == "event":
        fake.watches.put([{"type": "ERROR", "object": status(410, "Expired", "too old")}])
    else:
        fake.watches.put(410)
    fake.kartas["trainer"] = karta("trainer")
    thread = sync.start()
    try:
        assert wait_for(lambda: fake.seen("GET", KARTAS) >= 2)
        assert state.snapshot.registry.lookup(TRAINER) is not None
    finally:
        sync.stop(timeout=2)
    assert not thread.is_alive()


def test_other_errors_back_off_and_recover(fake: FakeAPI) -> None:
    state = State(watch_cluster=True)
    sync = ClusterSync(state, fake.api(), ENGINE, backoff_base=0.01, backoff_cap=0.05)
    fake.watches.put(500)
    sync.start()
    try:
        assert wait_for(lambda: fake.seen("GET", KARTAS) >= 2)
        assert state.ready
    finally:
        sync.stop(timeout=2)


@pytest.mark.parametrize("ending", ["empty stream", "410"])
def test_watches_that_end_at_once_back_off(fake: FakeAPI, ending: str) -> None:
    """A proxy that cuts every watch stream, or a 410 on every watch, must not turn the sync
    into a loop of requests as fast as the network allows."""
    for _ in range(1000):
        fake.watches.put([] if ending == "empty stream" else 410)
    sync = ClusterSync(State(watch_cluster=True), fake.api(), ENGINE, backoff_base=0.5)
    sync.start()
    try:
        time.sleep(1.0)
    finally:
        sync.stop(timeout=2)
    assert 1 <= fake.seen("WATCH", KARTAS) <= 8  # jittered 0-1 s, 0-2 s, ...: a few at most


def test_periodic_resync_relists(fake: FakeAPI) -> None:
    sync = ClusterSync(State(watch_cluster=True), fake.api(), ENGINE, resync_seconds=0.1)
    sync.start()
    try:
        assert wait_for(lambda: fake.seen("GET", KARTAS) >= 2)
    finally:
        sync.stop(timeout=2)


def test_unsafe_karta_is_never_loaded(fake: FakeAPI, caplog: pytest.LogCaptureFixture) -> None:
    fake.kartas["evil"] = karta("evil", ".spec.template | env.HOME")
    fake.kartas["other"] = karta("other", kind=GVK("example.com", "v1", "Other"))
    state = State(watch_cluster=True)
    sync = ClusterSync(state, fake.api(), ENGINE)
    with caplog.at_level(logging.WARNING, logger="karta_webhook.kube"):
        rv = sync.relist()
        fake.watches.put([event("MODIFIED", karta("evil", "env.HOME", rv="105"))])
        sync.watch_once(rv, 5)
    assert state.ready
    assert state.snapshot.registry.lookup(TRAINER) is None
    assert state.snapshot.registry.lookup(GVK("example.com", "v1", "Other")) is not None
    lines = [r.fields for r in caplog.records]  # type: ignore[attr-defined]
    skipped = [x for x in lines if x["event"] == "karta.skipped"]
    assert [x["name"] for x in skipped] == ["evil", "evil"]
    assert all("env" in " ".join(x["errors"]) for x in skipped)
    karta_obj, errors = load_cluster_karta(karta("evil", "env.HOME"), ENGINE)
    assert karta_obj is None and errors


def test_duplicate_root_kind_in_cluster_keeps_the_oldest(fake: FakeAPI) -> None:
    old = karta("old", ".spec.template")
    new = karta("new", ".spec.other")
    new["metadata"]["creationTimestamp"] = "2026-05-02T00:00:00Z"
    fake.kartas.update({"old": old, "new": new})
    state = State(watch_cluster=True)
    ClusterSync(state, fake.api(), ENGINE).relist()
    assert state.snapshot.registry.lookup(TRAINER).name == "old"


def test_validate_webhook_denies_a_second_karta_per_kind(fake: FakeAPI) -> None:
    from webhook.server.app import create_app

    fake.kartas["trainer"] = karta("trainer")
    state = State(watch_cluster=True)
    sync = ClusterSync(state, fake.api(), ENGINE)
    sync.relist()  # the Kartas the sync saw reach /validate through the state's snapshot
    app = create_app(state, engine=ENGINE).test_client()

    def review(obj: dict) -> dict:
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "run.ai", "version": "v1alpha1", "kind": "Karta"},
                "resource": {"group": "run.ai", "version": "v1alpha1", "resource": "kartas"},
                "operation": "CREATE",
                "name": obj["metadata"]["name"],
                "object": obj,
                "userInfo": {"username": "me"},
            },
        }
        return app.post("/validate", json=body).get_json()["response"]

    denied = review(karta("trainer-2"))
    assert denied["allowed"] is False
    assert 'kind "Trainer" already exists ("trainer")' in denied["status"]["message"]
    assert review(karta("trainer"))["allowed"] is True  # updating itself
    assert review(karta("v2", kind=GVK("example.com", "v2", "Trainer")))["allowed"] is True
