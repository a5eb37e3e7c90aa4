"""Rules decided by the namespace through a real API server (issue 36 items 3, 4): the server in
cluster mode watches Namespaces (metadata only) and one rule gives each workload the queue its
namespace is labelled with; a namespace without the label gets nothing; a label changed or a
namespace created later is in force within the watch's latency (measured, printed). On UPDATE
an objectSelector matches the old or the new object, as the API server's own (issue 49 item 3)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import kapi
import pytest
from hooks import Webhook, configurations, register, start_webhook, unregister, wait_until

QUEUE = "kai.scheduler/queue"
POLICY = """\
operations: [CREATE, UPDATE]
rules:
- name: queue
  match:
    namespaceSelector: {matchExpressions: [{key: kai-queue, operator: Exists}]}
  labels: {kai.scheduler/queue: "$(namespace.labels['kai-queue'])"}
- name: tier
  match: {objectSelector: {matchLabels: {tier: gpu}}}
  annotations: {example.com/tier: "gpu in $(workload.namespace)"}
"""


@pytest.fixture(scope="module")
def hook(plane: kapi.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    served = start_webhook(
        tmp_path_factory.mktemp("serve-namespaces"),
        POLICY,
        [f"--kubeconfig={plane.kubeconfig}", "--manage-webhooks=false"],
        env={"POD_NAMESPACE": "default", "POD_NAME": "namespaces"},
    )
    probe = _namespace(plane, "probe")
    try:
        # registered once ready, as a Service sends to a ready pod only: before it has listed
        # the cluster's policy sources every worker denies with 503, never admits unstamped
        wait_until(
            f"serve ready ({served.readyz().get('waitingFor')})",
            lambda: served.readyz().get("ready") is True,
        )
        register(plane, configurations(served, policy=served.policy, failure_policy="Fail"))
        wait_until(
            "the mutating webhook labels a dry-run Deployment with its namespace's queue",
            lambda: _queue(plane, probe) == "probe",
        )
        yield served
    finally:
        unregister(plane)
        served.stop()


def _namespace(plane: kapi.ControlPlane, queue: str | None) -> str:
    name = f"ns-{uuid.uuid4().hex[:8]}"
    labels = {"kai-queue": queue} if queue else {}
    plane.apply(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}]
    )
    return name


def _deployment(namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"d-{uuid.uuid4().hex[:6]}", "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }


def _created(plane: kapi.ControlPlane, namespace: str, **labels: str) -> dict[str, Any]:
    status, out = plane.request(
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments?dryRun=All",
        _deployment(namespace, **labels),
    )
    assert status == 201, out
    template: dict[str, Any] = out["spec"]["template"]["metadata"]
    return template


def _queue(plane: kapi.ControlPlane, namespace: str) -> str | None:
    return _created(plane, namespace).get("labels", {}).get(QUEUE)


def _latency(what: str, ok: Any) -> float:
    start = time.monotonic()
    wait_until(what, ok)
    took = time.monotonic() - start
    print(f"{what}: {took:.2f} s")
    return took


def test_each_workload_gets_the_queue_of_its_namespaces_label(
    plane: kapi.ControlPlane, hook: Webhook
) -> None:
    alpha, beta, bare = (
        _namespace(plane, "alpha"),
        _namespace(plane, "beta"),
        _namespace(plane, None),
    )
    _latency("a new namespace's label in force", lambda: _queue(plane, beta) == "beta")
    assert _queue(plane, alpha) == "alpha"
    got = _created(plane, bare)
    assert QUEUE not in got.get("labels", {})  # not selected: nothing, and no warning needed
    assert "mutation-failure" not in hook.log_text()


def test_a_relabelled_namespace_is_in_force_at_once(
    plane: kapi.ControlPlane, hook: Webhook
) -> None:
    ns = _namespace(plane, "first")
    wait_until("the namespace is known", lambda: _queue(plane, ns) == "first")
    plane.kubectl("label", "namespace", ns, "kai-queue=second", "--overwrite")
    _latency("a changed namespace label in force", lambda: _queue(plane, ns) == "second")
    plane.kubectl("label", "namespace", ns, "kai-queue-")
    _latency("a removed namespace label in force", lambda: _queue(plane, ns) is None)


def test_an_object_selector_reads_the_workloads_own_labels(
    plane: kapi.ControlPlane, hook: Webhook
) -> None:
    ns = _namespace(plane, None)
    assert "example.com/tier" not in _created(plane, ns, tier="cpu").get("annotations", {})
    assert _created(plane, ns, tier="gpu")["annotations"]["example.com/tier"] == f"gpu in {ns}"


def test_an_update_that_drops_the_selecting_label_is_stamped_again(
    plane: kapi.ControlPlane, hook: Webhook
) -> None:
    """The contract: the old object matched, so the rule applies, as the API server itself
    would call a webhook whose objectSelector the old object matched."""
    ns = _namespace(plane, None)
    made = _deployment(ns, tier="gpu")
    status, out = plane.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", made)
    assert status == 201, out
    assert out["spec"]["template"]["metadata"]["annotations"]["example.com/tier"] == f"gpu in {ns}"
    # the user removes the workload's label and the stamped annotation in one UPDATE
    out["metadata"]["labels"] = {}
    del out["spec"]["template"]["metadata"]["annotations"]
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/{out['metadata']['name']}"
    status, updated = plane.request("PUT", path, out)
    assert status == 200, updated
    assert not updated["metadata"].get("labels")
    got = updated["spec"]["template"]["metadata"].get("annotations", {})
    assert got.get("example.com/tier") == f"gpu in {ns}"
    # neither the old nor the new object matches: nothing is stamped
    updated["spec"]["template"]["metadata"].pop("annotations", None)
    status, again = plane.request("PUT", path, updated)
    assert status == 200, again
    assert "example.com/tier" not in again["spec"]["template"]["metadata"].get("annotations", {})
