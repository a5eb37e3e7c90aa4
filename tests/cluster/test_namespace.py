"""The leader's namespace and failed status writes, said once and by name (issue 38 item 2):
a missing Lease namespace is a start-up error naming it (``serve`` exits 2) and, met later, a
``*.error`` line naming it, logged once while it lasts; a Karta status write the API server
refuses names the Karta and the API server's reason, once per Karta and reason."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fakeapi import KARTAS, FakeAPI, install_crds, karta, status, stored, trainer_crd
from helpers import ENGINE

from webhook.admission.state import State
from webhook.base.gvk import GVK
from webhook.cluster.crdsync import CRDSync
from webhook.cluster.kartastatus import StatusWriter
from webhook.cluster.kartasync import ClusterSync
from webhook.cluster.lease import LeaseElector, NamespaceMissing
from webhook.cluster.wiring import namespace_problem

ROOT = Path(__file__).resolve().parents[2]


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, Any]]:
    return [
        r.fields  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "fields", {}).get("event") == name
    ]


def test_lease_in_a_missing_namespace_names_it(fake: FakeAPI) -> None:
    elector = LeaseElector(fake.api(), "nowhere", holder="me_1")
    with pytest.raises(NamespaceMissing) as err:
        elector.try_acquire_or_renew()
    assert str(err.value).startswith(
        'namespace "nowhere" does not exist: the leader Lease nowhere/karta-webhook-leader'
    )
    assert "kubectl create namespace nowhere" in str(err.value)
    assert not elector.is_leader()


def test_namespace_problem_asks_by_a_dry_run(fake: FakeAPI) -> None:
    problem = namespace_problem(api=fake.api(), namespace="nowhere")
    assert problem is not None and 'namespace "nowhere" does not exist' in problem
    assert namespace_problem(api=fake.api(), namespace="karta-system") is None
    dry = [q for p, q in fake.queries if p.endswith("/leases")]
    assert dry and all(q.get("dryRun") == "All" for q in dry)


def test_an_unreachable_cluster_is_not_a_missing_namespace() -> None:
    from kubernetes import client

    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    assert namespace_problem(api=api, namespace="nowhere") is None


def test_a_missing_namespace_is_logged_once_while_it_lasts(
    fake: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    state = State(bundled=False, watch_cluster=True)
    writer = StatusWriter(
        state, fake.api(), elector=LeaseElector(fake.api(), "nowhere"), renews=True,
        retry_seconds=0.02,
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="karta_webhook.kube"):
        writer.start()
        try:
            deadline = time.monotonic() + 10
            while fake.seen("POST", "/apis/coordination.k8s.io/v1/namespaces/nowhere/leases") < 10:
                assert time.monotonic() < deadline, "the writer did not retry"
                time.sleep(0.02)
        finally:
            writer.stop()
    errors = events(caplog, "status.error")
    assert len(errors) == 1, errors
    assert 'namespace "nowhere" does not exist' in errors[0]["error"]


def test_a_refused_status_write_names_the_karta_once(
    fake: FakeAPI, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_crds(fake, trainer_crd())
    fake.kartas["good"] = stored(karta("good"), fake.next_rv(), 1)
    fake.kartas["other"] = stored(karta("other", kind=GVK("batch", "v1", "Job")), fake.next_rv(), 1)
    refused = 'kartas.run.ai "good" is invalid: status.conditions[0].reason: Invalid value'
    real = fake.patch_status

    def patch_status(h: Any, path: str, body: Any) -> None:
        if path == f"{KARTAS}/good/status" and refuse:
            fake.patches.append((path, "", body))
            return h._send(422, status(422, "Invalid", refused))  # type: ignore[no-any-return]
        return real(h, path, body)

    monkeypatch.setattr(fake, "patch_status", patch_status)
    api = fake.api()
    state = State(bundled=False, watch_cluster=True)
    writer = StatusWriter(state, api, elector=None)
    state.listeners.append(writer.on_snapshot)
    ClusterSync(state, api, ENGINE).relist()
    CRDSync(state, api).relist()
    refuse = True
    with caplog.at_level(logging.INFO, logger="karta_webhook.kube"):
        assert writer.reconcile() == 1  # the other Karta is written all the same
        for _ in range(5):
            assert writer.reconcile() == 0
        assert writer.failed == {"good": f"HTTP 422: Unprocessable Entity: {refused}"}
        refuse = False
        assert writer.reconcile() == 1
    failed = events(caplog, "karta.status-failed")
    assert failed == [
        {
            "event": "karta.status-failed",
            "name": "good",
            "error": f"HTTP 422: Unprocessable Entity: {refused}",
        }
    ]
    assert events(caplog, "karta.status-recovered") == [
        {"event": "karta.status-recovered", "name": "good"}
    ]
    assert writer.failed == {}
    assert fake.kartas["good"]["status"]["conditions"]


def test_serve_refuses_to_start_without_its_namespace(fake: FakeAPI, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": fake.host}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--port=18443", f"--kubeconfig={kubeconfig}",
         f"--certs-dir={tmp_path / 'certs'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin", "POD_NAMESPACE": "nowhere", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        'karta-webhook: serve: namespace "nowhere" does not exist: the leader Lease '
        "nowhere/karta-webhook-leader cannot be created, so no process leads (no Karta status "
        "conditions, no webhook configuration kept); create it (kubectl create namespace "
        "nowhere) or set POD_NAMESPACE to an existing namespace"
    )


def test_a_failure_that_ends_is_said_to_end(
    fake: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """Forbidden Lease reads (say, RBAC not yet applied): one ``status.error`` line however
    many retries, and one line with ``resolved`` once the writer leads."""
    lease = "/apis/coordination.k8s.io/v1/namespaces/karta-system/leases/karta-webhook-leader"
    fake.forbidden.add(lease)
    state = State(bundled=False, watch_cluster=True)
    elector = LeaseElector(fake.api(), "karta-system")
    writer = StatusWriter(state, fake.api(), elector=elector, renews=True, retry_seconds=0.02)
    with caplog.at_level(logging.INFO, logger="karta_webhook.kube"):
        writer.start()
        try:
            deadline = time.monotonic() + 10
            while fake.seen("GET", lease) < 10:
                assert time.monotonic() < deadline, "the writer did not retry"
                time.sleep(0.02)
            fake.forbidden.discard(lease)
            while not elector.is_leader():
                assert time.monotonic() < deadline, "the writer did not lead"
                time.sleep(0.02)
            while not events(caplog, "status.error")[1:]:
                assert time.monotonic() < deadline, "no resolved line"
                time.sleep(0.02)
        finally:
            writer.stop()
    errors = events(caplog, "status.error")
    assert [set(e) for e in errors] == [
        {"event", "error", "failures"},
        {"event", "resolved", "failures"},
    ]
    assert errors[0]["error"] == "HTTP 403: Forbidden"
    assert errors[1]["resolved"] == "HTTP 403: Forbidden" and errors[1]["failures"] >= 10
