"""Restarts under a stream of creates (issue 49 item 2): the server in cluster mode with two
KartaPolicies in force is restarted again and again while a client creates Deployments
through the real API server (the workloads webhook with failurePolicy Fail, so a create while
no server answers is refused, not admitted unstamped). Every Deployment admitted carries both
policies' labels, and the first one created after each first ``/readyz`` 200 does too: no
worker answers before it has read the policy objects."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kapi
import pytest
from hooks import Webhook, configurations, free_port, register, start_webhook, unregister

CRD = kapi.ROOT / "manifests" / "base" / "crd-kartapolicies.yaml"
TEAM_CRD = kapi.ROOT / "manifests" / "base" / "crd-kartanamespacepolicies.yaml"
RESTARTS = 5
WANT = {"example.com/first": "one", "example.com/second": "two"}


def _policy(name: str, key: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "policies.karta-webhook.run.ai/v1alpha1",
        "kind": "KartaPolicy",
        "metadata": {"name": name},
        "spec": {
            "rules": [{"name": "r", "match": {"kinds": ["Deployment"]}, "labels": {key: value}}]
        },
    }


def _create(plane: kapi.ControlPlane) -> tuple[int, dict[str, str]]:
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"d-{uuid.uuid4().hex[:8]}", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    status, out = plane.request(
        "POST", "/apis/apps/v1/namespaces/default/deployments?dryRun=All", body
    )
    labels = out["spec"]["template"]["metadata"].get("labels", {}) if status == 201 else {}
    return status, labels


@pytest.fixture(scope="module")
def served(
    plane: kapi.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, int, list[Webhook]]]:
    plane.kubectl("apply", "-f", str(CRD), "-f", str(TEAM_CRD))
    plane.wait_established(
        "kartapolicies.policies.karta-webhook.run.ai",
        "kartanamespacepolicies.policies.karta-webhook.run.ai",
    )
    plane.apply([_policy("first", "example.com/first", "one"),
                 _policy("second", "example.com/second", "two")])  # fmt: skip
    d, port = tmp_path_factory.mktemp("serve-restart"), free_port()
    hooks = [_start(plane, d, port)]
    try:
        register(plane, configurations(hooks[0], failure_policy="Fail"))
        yield d, port, hooks
    finally:
        unregister(plane)
        for h in hooks:
            h.stop()
        plane.kubectl("delete", "kartapolicies", "first", "second", "--wait=true", check=False)


def _start(plane: kapi.ControlPlane, d: Path, port: int) -> Webhook:
    return start_webhook(
        d, "rules: []\n",
        [f"--kubeconfig={plane.kubeconfig}", "--manage-webhooks=false", "--workers=2"],
        env={"POD_NAMESPACE": "default", "POD_NAME": "restart"}, port=port,
    )  # fmt: skip


def test_no_workload_is_admitted_without_the_policies_across_restarts(
    plane: kapi.ControlPlane, served: tuple[Path, int, list[Webhook]]
) -> None:
    d, port, hooks = served
    deadline = time.monotonic() + 60
    while _create(plane) != (201, {"app": "x", **WANT}):  # the webhook is registered
        assert time.monotonic() < deadline, hooks[-1].log_text()
        time.sleep(0.25)
    results: list[tuple[int, dict[str, str]]] = []
    stop = threading.Event()

    def stream() -> None:
        while not stop.is_set():
            try:
                results.append(_create(plane))
            except Exception as e:  # a refused connection is a refused create
                results.append((0, {"error": repr(e)}))

    client = threading.Thread(target=stream, daemon=True)
    client.start()
    firsts = []
    try:
        for _ in range(RESTARTS):
            hooks[-1].stop()
            hooks.append(_start(plane, d, port))
            while hooks[-1].readyz().get("ready") is not True:
                time.sleep(0.02)
            firsts.append(_create(plane))  # the first create after the first /readyz 200
    finally:
        stop.set()
        client.join(30)
    admitted = [labels for status, labels in results if status == 201]
    unstamped = [labels for labels in admitted if {k: labels.get(k) for k in WANT} != WANT]
    print(f"{len(results)} creates over {RESTARTS} restarts: {len(admitted)} admitted")
    assert admitted and not unstamped, unstamped[:3]
    assert all(status == 201 and {k: got.get(k) for k in WANT} == WANT for status, got in firsts)
