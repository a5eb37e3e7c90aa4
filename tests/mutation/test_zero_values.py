"""A zero value is unset: ``""``, ``null``, ``{}`` and ``[]`` keep no policy value out, for every
field, on the fast lane and on the general path alike (issue 35 item 1). And a bare Pod's plan
fits what the API server does to Pods (``webhook.mutation.podadmission``)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import jsonpatch
import pytest
from helpers import ENGINE, REGISTRY, policy, sample

from webhook.admission.handlers import mutate_object
from webhook.mutation import stamp

SIX = {
    "schedulerName": "kai-scheduler",
    "priorityClassName": "train",
    "labels": {"kai.scheduler/queue": "research"},
    "annotations": {"example.com/owner": "x"},
    "nodeSelector": {"pool": "gpu"},
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
}
POLICY = policy(**SIX)
TOL = SIX["tolerations"][0]

#: (spec field or metadata map, the zero values it may hold as Kubernetes reads them)
ZEROS: list[tuple[str, str, Any]] = [
    ("spec", "schedulerName", ""),
    ("spec", "schedulerName", None),
    ("spec", "priorityClassName", ""),
    ("spec", "priorityClassName", None),
    ("spec", "nodeSelector", {}),
    ("spec", "nodeSelector", None),
    ("spec", "tolerations", []),
    ("spec", "tolerations", None),
    ("metadata", "labels", {}),
    ("metadata", "labels", None),
    ("metadata", "annotations", {}),
    ("metadata", "annotations", None),
    ("metadata", "labels", {"kai.scheduler/queue": ""}),
    ("metadata", "annotations", {"example.com/owner": ""}),
    ("spec", "nodeSelector", {"pool": ""}),
]


def _jobset_templates(o: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for rj in o["spec"]["replicatedJobs"]:
        yield rj["template"]["spec"]["template"]


def _deployment_templates(o: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield o["spec"]["template"]


def _pytorch_templates(o: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for spec in o["spec"]["pytorchReplicaSpecs"].values():
        yield spec["template"]


def _pod(o: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield o


KINDS: list[tuple[str, str, Callable[[dict[str, Any]], Iterator[dict[str, Any]]]]] = [
    ("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml", _jobset_templates),
    ("apps-deployment-v1", "llm-server.yaml", _deployment_templates),
    ("kubeflow.org-pytorchjob-v1", "master-workers-running.yaml", _pytorch_templates),
    ("core-pod-v1", "cuda-inference.yaml", _pod),
]


def _with_zero(obj: dict[str, Any], templates: Any, part: str, field: str, zero: Any) -> Any:
    out = copy.deepcopy(obj)
    for t in templates(out):
        t.setdefault(part, {})[field] = copy.deepcopy(zero)
    return out


def _applied(t: dict[str, Any]) -> None:
    spec, meta = t["spec"], t["metadata"]
    assert spec["schedulerName"] == "kai-scheduler"
    assert spec["priorityClassName"] == "train"
    assert spec["nodeSelector"]["pool"] == "gpu"
    assert spec["tolerations"].count(TOL) == 1
    assert meta["labels"]["kai.scheduler/queue"] == "research"
    assert meta["annotations"]["example.com/owner"] == "x"


@pytest.mark.parametrize("lane", ["fast lane", "general path"])
@pytest.mark.parametrize(("part", "field", "zero"), ZEROS, ids=[f"{f}={z!r}" for _, f, z in ZEROS])
@pytest.mark.parametrize(("stem", "name", "templates"), KINDS, ids=[k[0] for k in KINDS])
def test_a_zero_value_is_unset(
    stem: str,
    name: str,
    templates: Any,
    part: str,
    field: str,
    zero: Any,
    lane: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if lane == "general path":
        monkeypatch.setattr(stamp, "plan", lambda *a: None)
    obj = _with_zero(sample(stem, name), templates, part, field, zero)
    m = mutate_object(REGISTRY, POLICY, obj, ENGINE)
    assert m is not None and not m.failures, m
    patched = jsonpatch.apply_patch(obj, m.ops)
    found = list(templates(patched))
    assert found
    for t in found:
        _applied(t)
    again = mutate_object(REGISTRY, POLICY, patched, ENGINE)  # reinvocation: nothing to add
    assert again is not None and again.ops == []


def test_a_value_that_is_set_is_kept_without_overwrite() -> None:
    """Only zero values give way: a real value stays unless the rule overwrites."""
    obj = sample("apps-deployment-v1", "llm-server.yaml")
    spec = obj["spec"]["template"]["spec"]
    spec["schedulerName"], spec["priorityClassName"] = "volcano", "low"
    m = mutate_object(REGISTRY, POLICY, obj, ENGINE)
    assert m is not None
    kept = jsonpatch.apply_patch(obj, m.ops)["spec"]["template"]["spec"]
    assert (kept["schedulerName"], kept["priorityClassName"]) == ("volcano", "low")


# --------------------------------------------------------------------------- bare Pods


def _bare_pod(**spec: Any) -> dict[str, Any]:
    pod = sample("core-pod-v1", "minimal.yaml")
    pod["spec"].update(spec)
    return pod


def test_a_pods_priority_follows_the_class_the_policy_sets() -> None:
    """The Priority admission plugin filled priority 0 and PreemptLowerPriority before the
    webhook: setting a class removes both, so the plugin computes them from the class."""
    pod = _bare_pod(priority=0, preemptionPolicy="PreemptLowerPriority")
    m = mutate_object(REGISTRY, policy(priorityClassName="train"), pod, ENGINE)
    assert m is not None
    assert {"op": "remove", "path": "/spec/priority"} in m.ops
    assert {"op": "remove", "path": "/spec/preemptionPolicy"} in m.ops
    patched = jsonpatch.apply_patch(pod, m.ops)
    assert patched["spec"]["priorityClassName"] == "train"
    assert "priority" not in patched["spec"] and "preemptionPolicy" not in patched["spec"]


@pytest.mark.parametrize(
    "rule",
    [
        {"labels": {"a": "b"}},  # no class set: priority is the plugin's and stays
        {"priorityClassName": "train"},  # the class is there already: no op
    ],
)
def test_a_pods_priority_stays_when_its_class_does_not_change(rule: dict[str, Any]) -> None:
    pod = _bare_pod(priority=1000, priorityClassName="train")
    m = mutate_object(REGISTRY, policy(**rule), pod, ENGINE)
    assert m is not None
    assert not [op for op in m.ops if op["op"] == "remove"]


def test_a_template_keeps_its_priority() -> None:
    """Templates are not admitted as Pods: a Deployment's template priority is left alone."""
    obj = sample("apps-deployment-v1", "llm-server.yaml")
    obj["spec"]["template"]["spec"]["priority"] = 5
    m = mutate_object(REGISTRY, policy(priorityClassName="train"), obj, ENGINE)
    assert m is not None
    assert not [op for op in m.ops if op["op"] == "remove"]


def test_on_update_a_pod_gets_only_what_an_existing_pod_may_change() -> None:
    """Labels, annotations and added tolerations are written; schedulerName,
    priorityClassName and nodeSelector, which the API server refuses to change on an existing
    Pod, are left out with a warning naming them."""
    pod = _bare_pod(priority=0)
    m = mutate_object(REGISTRY, POLICY, pod, ENGINE, "UPDATE")
    assert m is not None
    paths = {op["path"] for op in m.ops}
    assert not {p for p in paths if p.startswith("/spec/") and not p.startswith("/spec/tol")}
    patched = jsonpatch.apply_patch(pod, m.ops)
    assert patched["metadata"]["labels"]["kai.scheduler/queue"] == "research"
    assert patched["spec"]["tolerations"].count(TOL) == 1
    assert "priority" in patched["spec"]
    [said] = [w for w in m.warnings if "cannot change on an existing Pod" in w]
    for field in ("schedulerName", "priorityClassName", "nodeSelector"):
        assert f"spec.{field}" in said
    assert m.templates_mutated == 1


def test_on_update_a_pod_toleration_is_never_replaced() -> None:
    pod = _bare_pod(tolerations=[{**TOL, "effect": "NoSchedule", "operator": "Exists"}])
    pod["spec"]["tolerations"][0]["tolerationSeconds"] = 5
    pol = policy(tolerations=[TOL], overwrite=True)
    create = mutate_object(REGISTRY, pol, pod, ENGINE)
    assert create is not None and [op["op"] for op in create.ops] == ["replace"]
    update = mutate_object(REGISTRY, pol, pod, ENGINE, "UPDATE")
    assert update is not None and update.ops == [] and update.templates_mutated == 0
    assert any("spec.tolerations" in w for w in update.warnings)
