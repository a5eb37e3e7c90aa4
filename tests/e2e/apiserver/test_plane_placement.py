"""The policy steers the scheduler (issue 45 item 3), proven by bound pods on the scheduling
plane (``schedplane.py``): the GPU nodes are tainted ``nvidia.com/gpu:NoSchedule``; a Job
whose policy adds the GPU toleration and ``nodeSelector`` lands on GPU nodes only, the same
Job without that policy stays off them; a policy naming a scheduler that is not running leaves
the pods Pending with that name, untouched by the default scheduler; a ``priorityClassName``
from the policy orders a pending queue: when a one-slot node frees, the higher class binds
first though it was created last.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hooks import Webhook
from schedkinds import create, serving
from schedplane import SchedulingPlane

ABSENT = "karta-e2e-absent-scheduler"
POLICY = f"""\
rules:
- name: gpu
  match: {{namespaces: ["gpu-*"]}}
  tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
  nodeSelector: {{nvidia.com/gpu.present: "true"}}
- name: absent
  match: {{namespaces: ["absent-*"]}}
  schedulerName: {ABSENT}
- name: high
  match: {{namespaces: ["prio-*"], objectSelector: {{matchLabels: {{prio: high}}}}}}
  priorityClassName: karta-e2e-high
- name: low
  match: {{namespaces: ["prio-*"], objectSelector: {{matchLabels: {{prio: low}}}}}}
  priorityClassName: karta-e2e-low
"""
SLOT = "example.com/slot"


@pytest.fixture(scope="module")
def hook(
    scheduling_plane: SchedulingPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    with serving(scheduling_plane, tmp_path_factory.mktemp("serve-plane-place"), POLICY) as h:
        yield h


def _job(sp: SchedulingPlane, ns: str, name: str, n: int, **spec: Any) -> None:
    path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    labels = spec.pop("labels", {})
    body = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"parallelism": n, "completions": n, "template": {
            "metadata": {"labels": {"app": name, **labels}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "busybox", **spec.pop("container", {})}], **spec},
        }},
    }  # fmt: skip
    status, out = sp.cp.request("POST", path, body)
    assert status == 201, out


def test_gpu_policy_lands_on_gpu_nodes_only(
    scheduling_plane: SchedulingPlane, hook: Webhook
) -> None:
    sp = scheduling_plane
    gpu, plain = sp.namespace("gpu"), sp.namespace("cpu")
    try:
        _job(sp, gpu, "train", 6)
        _job(sp, plain, "train", 6)
        on_gpu = sp.wait_pods(gpu, 6)
        off_gpu = sp.wait_pods(plain, 6)
        assert {p["spec"]["nodeName"] for p in on_gpu} <= {
            n for n in sp.nodes if n.startswith("gpu-")
        }
        assert len({p["spec"]["nodeName"] for p in on_gpu}) > 1  # spread, not one lucky node
        assert not [p for p in off_gpu if p["spec"]["nodeName"].startswith("gpu-")]
        assert all(
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            in p["spec"]["tolerations"]
            for p in on_gpu
        )
    finally:
        sp.clean(gpu)
        sp.clean(plain)


def test_absent_scheduler_leaves_pods_pending(
    scheduling_plane: SchedulingPlane, hook: Webhook
) -> None:
    sp = scheduling_plane
    ns, ctl = sp.namespace("absent"), sp.namespace("cpu")
    try:
        create(sp, "Job", "w", ns)
        _job(sp, ctl, "w", 2)
        sp.wait_pods(ctl, 2)  # the default scheduler is at work: the control pods bind
        time.sleep(2)
        pods = sp.wait_pods(ns, 2, bound=False)
        for p in pods:
            assert p["spec"]["schedulerName"] == ABSENT
            assert not p["spec"].get("nodeName"), p["metadata"]["name"]
            assert p["status"]["phase"] == "Pending"
            # nobody tried it: the default scheduler writes PodScheduled=False on pods it fails
            assert not [c for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    finally:
        sp.clean(ns)
        sp.clean(ctl)


def _pending_unschedulable(pods: list[dict[str, Any]]) -> bool:
    return all(
        any(
            c["type"] == "PodScheduled" and c["status"] == "False"
            for c in p["status"].get("conditions", [])
        )
        for p in pods
    )


def test_priority_orders_the_pending_queue(
    scheduling_plane: SchedulingPlane, hook: Webhook
) -> None:
    """A node with one ``example.com/slot``: a blocker holds it; a low- then a high-class Job
    wait (their classes never preempt); the blocker force-deleted, the high one binds."""
    sp = scheduling_plane
    node = "slot-0"
    sp.add_node(node, labels={"karta-e2e/slot": "true"}, extra={SLOT: "1"},
                taints=[{"key": "karta-e2e/slot", "effect": "NoSchedule"}])  # fmt: skip
    ns = sp.namespace("prio")
    spec = {
        "nodeSelector": {"karta-e2e/slot": "true"},
        "tolerations": [{"key": "karta-e2e/slot", "operator": "Exists", "effect": "NoSchedule"}],
        "container": {"resources": {"limits": {SLOT: "1"}}},
    }
    try:
        _job(sp, ns, "blocker", 1, **spec)
        blocker = sp.wait_pods(ns, 1, selector="app=blocker")
        assert blocker[0]["spec"]["nodeName"] == node
        _job(sp, ns, "low", 1, labels={"prio": "low"}, **spec)
        sp.wait_pods(ns, 1, selector="app=low", bound=False, ok=_pending_unschedulable)
        _job(sp, ns, "high", 1, labels={"prio": "high"}, **spec)
        sp.wait_pods(ns, 1, selector="app=high", bound=False, ok=_pending_unschedulable)
        time.sleep(11)  # past the scheduler's longest backoff: both wait in the same queue
        status, out = sp.cp.request(
            "DELETE", f"/api/v1/namespaces/{ns}/pods/{blocker[0]['metadata']['name']}",
            {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
        )  # fmt: skip
        assert status == 200, out
        high = sp.wait_pods(ns, 1, selector="app=high", seconds=60)
        assert high[0]["spec"]["nodeName"] == node
        assert high[0]["spec"]["priorityClassName"] == "karta-e2e-high"
        low = sp.pods(ns, "app=low")
        assert low[0]["spec"]["priorityClassName"] == "karta-e2e-low"
        assert not low[0]["spec"].get("nodeName"), "the lower class bound first"
    finally:
        sp.clean(ns)
        sp.delete_node(node)
