"""Ready only when every source of policy is read, in every worker (issue 49 item 2): /readyz
waits for the policy objects and namespaces as for the Kartas, names what it waits for, and a
/mutate that reaches a worker before it has read them waits for them, then is denied rather
than admitted without the policy in force."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import JOBSET, POLICY, load, review

from webhook.admission.state import State
from webhook.server import app as server
from webhook.server import app_admission
from webhook.server.readiness import Peers


@pytest.fixture
def state(tmp_path: Path) -> State:
    p = tmp_path / "policy.yaml"
    p.write_text(POLICY)
    got = State([], p, watch_cluster=True)
    got.set_cluster([])
    return got


def _mutate(client: Any) -> dict[str, Any]:
    r = client.post(
        "/mutate", data=json.dumps(review(load(JOBSET))), content_type="application/json"
    )
    assert r.status_code == 200
    return r.get_json()["response"]  # type: ignore[no-any-return]


def test_readyz_waits_for_every_source(state: State) -> None:
    policies, namespaces = threading.Event(), threading.Event()
    state.awaiting.update({"policies": policies, "namespaces": namespaces})
    c = server.create_app(state).test_client()
    r = c.get("/readyz")
    assert r.status_code == 503
    assert r.get_json()["waitingFor"] == ["policies", "namespaces"]
    policies.set()
    assert c.get("/readyz").get_json()["waitingFor"] == ["namespaces"]
    namespaces.set()
    r = c.get("/readyz")
    assert r.status_code == 200 and r.get_json()["waitingFor"] == []


def test_a_mutation_before_the_sources_waits_for_them(state: State) -> None:
    listed = threading.Event()
    state.awaiting["policies"] = listed
    c = server.create_app(state).test_client()
    threading.Timer(0.3, listed.set).start()
    started = time.monotonic()
    got = _mutate(c)
    assert time.monotonic() - started >= 0.25
    assert got["allowed"] is True and got["patch"]  # the policy in force


def test_a_mutation_whose_sources_never_come_is_denied(
    state: State, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.awaiting["namespaces"] = threading.Event()
    monkeypatch.setattr(app_admission, "SOURCES_WAIT", 0.2)
    got = _mutate(server.create_app(state).test_client())
    assert got["allowed"] is False and "patch" not in got
    assert got["status"]["code"] == 503
    assert "not ready" in got["status"]["message"] and "namespaces" in got["status"]["message"]


def test_ready_only_when_every_worker_is(state: State, tmp_path: Path) -> None:
    peers = Peers(2, str(tmp_path))
    try:
        c = server.create_app(state)
        c.extensions["karta"].peers = peers.ready
        client = c.test_client()
        r = client.get("/readyz")
        assert r.status_code == 503 and r.get_json()["workersReady"] is False
        peers.watch(state)  # this process: ready at once
        (peers.folder / "1").touch()  # the other worker
        deadline = time.monotonic() + 5
        while not peers.ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert client.get("/readyz").status_code == 200
        peers.forget(os.getpid())  # a worker exits: its replacement is not ready yet
        assert client.get("/readyz").status_code == 503
    finally:
        peers.close()
    assert not peers.folder.exists()
