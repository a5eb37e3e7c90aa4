"""Pods checked, not templates (issue 45 item 2): on the scheduling plane (``schedplane.py``:
kube-controller-manager, kube-scheduler, the JobSet and LWS managers with their own pod
webhooks), each controller-made kind is created twice, in a namespace the policy matches and in
one it does not; the pods the controllers make differ exactly by what the policy set — labels,
annotations, ``schedulerName``, ``priorityClassName`` and the priority its class gives,
``tolerations``, ``nodeSelector`` — and by nothing else. The operators' pod webhooks ran too
(their labels are on both), before ours and after it (its configuration renamed to sort first),
with reinvocation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hooks import Webhook
from schedkinds import CLASSES, KINDS, create, serving, shape
from schedplane import SchedulingPlane

SCHEDULER = "karta-e2e-scheduler"  # not running: the pods stay as the controllers made them
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SELECTOR = {"nvidia.com/gpu.present": "true"}
LABELS = {"kai.scheduler/queue": "research"}
POLICY = f"""\
rules:
- name: stamp
  match: {{namespaces: ["pods-*"]}}
  schedulerName: {SCHEDULER}
  priorityClassName: karta-e2e-high
  labels: {yaml.safe_dump(LABELS, default_flow_style=True).strip()}
  annotations: {{example.com/owner: "$(workload.name)", example.com/kind: "$(workload.kind)"}}
  nodeSelector: {yaml.safe_dump(SELECTOR, default_flow_style=True).strip()}
  tolerations: [{yaml.safe_dump(TOLERATION, default_flow_style=True).strip()}]
"""
#: Labels the operators' pod webhooks add (so both webhooks ran): JobSet's copies the pod's
#: priority, the one our priorityClassName gave it.
OPERATOR_KEYS = {
    "JobSet": "jobset.sigs.k8s.io/priority",
    "LeaderWorkerSet": "leaderworkerset.sigs.k8s.io/worker-index",
}
#: What the policy sets (with what its PriorityClass gives), and where the control pods went.
POLICY_SPEC = (
    "schedulerName", "priorityClassName", "priority", "preemptionPolicy", "tolerations",
    "nodeSelector", "nodeName",
)  # fmt: skip


@pytest.fixture(scope="module")
def hook(
    scheduling_plane: SchedulingPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    with serving(scheduling_plane, tmp_path_factory.mktemp("serve-plane-pods"), POLICY) as h:
        yield h


def _pair(
    sp: SchedulingPlane, kind: str
) -> tuple[str, list[dict[str, Any]], str, list[dict[str, Any]]]:
    """The kind made in a matched and an unmatched namespace; both namespaces' pods."""
    out: list[Any] = []
    for prefix in ("pods", "ctl"):
        ns = sp.namespace(prefix)
        count = create(sp, kind, "w", ns)
        if kind == "DaemonSet":  # one pod a node the template fits: the policy's GPU nodes
            count = sum(n.startswith("gpu-") for n in sp.nodes) if prefix == "pods" else None
        pods = sp.wait_pods(ns, count, bound=False) if count else _some_pods(sp, ns)
        out += [ns, pods]
    return out[0], out[1], out[2], out[3]


def _some_pods(sp: SchedulingPlane, ns: str) -> list[dict[str, Any]]:
    import time

    deadline = time.monotonic() + 60
    while not (pods := sp.pods(ns)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pods, f"{ns}: no pods"
    return pods


def _check(
    kind: str, ns: str, pods: list[dict[str, Any]], cns: str, ctl: list[dict[str, Any]]
) -> None:
    for pod in pods:
        c = _peer(pod, ctl)
        where = f"{kind} pod {pod['metadata']['name']}"
        spec, meta = pod["spec"], pod["metadata"]
        assert spec["schedulerName"] == SCHEDULER, where
        assert spec["priorityClassName"] == "karta-e2e-high", where
        assert spec["priority"] == CLASSES["karta-e2e-high"], where
        assert spec["preemptionPolicy"] == "Never", where  # the class's too
        assert spec["nodeSelector"] == SELECTOR, where
        assert not spec.get("nodeName"), where
        own = [t for t in spec["tolerations"] if t not in c["spec"].get("tolerations", [])]
        assert own == [TOLERATION], (where, spec["tolerations"])
        assert c["spec"]["schedulerName"] == "default-scheduler"
        assert "priorityClassName" not in c["spec"] and "nodeSelector" not in c["spec"]
        # labels and annotations: the control pod's keys plus exactly the policy's
        assert set(meta["labels"]) - set(c["metadata"]["labels"]) == set(LABELS), where
        assert {k: meta["labels"][k] for k in LABELS} == LABELS, where
        ann, cann = meta.get("annotations", {}), c["metadata"].get("annotations", {})
        assert set(ann) - set(cann) == {"example.com/owner", "example.com/kind"}, (where, ann)
        assert ann["example.com/owner"] == "w" and ann["example.com/kind"] == kind, (where, ann)
        if kind in OPERATOR_KEYS:
            assert OPERATOR_KEYS[kind] in meta["labels"], (where, meta["labels"])
        if kind == "JobSet":
            assert meta["labels"]["jobset.sigs.k8s.io/priority"] == str(spec["priority"]), where
        drop = POLICY_SPEC + (("affinity",) if kind == "DaemonSet" else ())
        assert shape(pod, ns, drop) == shape(c, cns, drop), where


def _peer(pod: dict[str, Any], ctl: list[dict[str, Any]]) -> dict[str, Any]:
    """The control pod of the same hostname (JobSet) or name (StatefulSet, LWS), else the
    first."""
    same = [
        c
        for c in ctl
        if c["spec"].get("hostname") and c["spec"].get("hostname") == pod["spec"].get("hostname")
    ]
    same += [c for c in ctl if c["metadata"]["name"] == pod["metadata"]["name"]]
    return same[0] if same else ctl[0]


@pytest.mark.parametrize("kind", KINDS)
def test_pods_carry_what_the_policy_set(
    scheduling_plane: SchedulingPlane, hook: Webhook, kind: str
) -> None:
    sp = scheduling_plane
    ns, pods, cns, ctl = _pair(sp, kind)
    try:
        _check(kind, ns, pods, cns, ctl)
    finally:
        sp.clean(ns)
        sp.clean(cns)


@pytest.mark.parametrize("kind", ["JobSet", "LeaderWorkerSet"])
def test_ours_first_then_the_operators(
    scheduling_plane: SchedulingPlane, hook: Webhook, kind: str, tmp_path: Path
) -> None:
    """The same with karta-webhook's configuration named to sort before the operators' (the
    API server calls mutating webhooks in configuration-name order, then reinvokes ours)."""
    sp = scheduling_plane
    cfg = sp.cp.get_json("mutatingwebhookconfiguration", "karta-webhook")
    first = {k: cfg[k] for k in ("apiVersion", "kind", "webhooks")}
    first["metadata"] = {"name": "0-karta-webhook", "labels": cfg["metadata"].get("labels", {})}
    sp.cp.apply([first])
    sp.cp.kubectl("delete", "mutatingwebhookconfiguration", "karta-webhook")
    try:
        ns, pods, cns, ctl = _pair(sp, kind)
        try:
            _check(kind, ns, pods, cns, ctl)
        finally:
            sp.clean(ns)
            sp.clean(cns)
    finally:
        cfg["metadata"] = {"name": "karta-webhook", "labels": cfg["metadata"].get("labels", {})}
        sp.cp.apply([cfg])
        sp.cp.kubectl("delete", "mutatingwebhookconfiguration", "0-karta-webhook")
