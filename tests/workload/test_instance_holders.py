"""Created inside an instance, never an instance (issue 34 item 1; docs/definition-rules.md,
"Created inside an instance").

A fragment whose holder (``extraPodSpec``, ``template``, ``metadata``, ``labels``) is missing
inside a component instance that exists gets the holder created, as upstream's writer does;
an absent instance (no entry, a null, a missing replica type) is still left alone. ``mutate``,
``describe`` and ``validate`` agree on it.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from helpers import ENGINE, REGISTRY, apply, policy, sample

from webhook.base.gvk import GVK
from webhook.karta import model as definitions
from webhook.karta.locations import creatable, instance_depths
from webhook.validation.check import check
from webhook.workload.locator import resolve

DGD = ("nvidia.com-dynamographdeployment-v1alpha1", "disagg-successful.yaml")
LLM = ("serving.kserve.io-llminferenceservice-v1alpha1", "single-node-gpu.yaml")
ISVC = ("serving.kserve.io-inferenceservice-v1beta1", "predictor-only.yaml")
KAI = policy(schedulerName="kai-scheduler", labels={"q": "r"})


def _ops_at(ops: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [op for op in ops if op["path"] == prefix or op["path"].startswith(prefix + "/")]


def test_a_dynamo_service_without_extra_pod_spec_gets_one_with_the_scheduler() -> None:
    obj = sample(*DGD)
    assert "extraPodSpec" not in obj["spec"]["services"]["Frontend"]
    out, ops = apply(obj, KAI)
    assert {"op": "add", "path": "/spec/services/Frontend/extraPodSpec",
            "value": {"schedulerName": "kai-scheduler"}} in ops  # fmt: skip
    for svc in out["spec"]["services"].values():
        assert svc["extraPodSpec"]["schedulerName"] == "kai-scheduler"


def test_the_router_scheduler_without_a_template_gets_one() -> None:
    obj = sample(*LLM)
    assert obj["spec"]["router"]["scheduler"] == {}
    out, ops = apply(obj, KAI)
    assert {"op": "add", "path": "/spec/router/scheduler/template",
            "value": {"schedulerName": "kai-scheduler"}} in ops  # fmt: skip
    assert out["spec"]["router"]["scheduler"]["labels"] == {"q": "r"}


def test_every_holder_a_rule_needs_is_made_in_one_op_inside_the_instance() -> None:
    obj = sample(*DGD)
    six = policy(
        schedulerName="kai-scheduler",
        priorityClassName="train",
        nodeSelector={"pool": "gpu"},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
    )
    out, ops = apply(obj, six)
    [made] = _ops_at(ops, "/spec/services/Frontend/extraPodSpec")
    assert made["value"] == {
        "schedulerName": "kai-scheduler",
        "priorityClassName": "train",
        "nodeSelector": {"pool": "gpu"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
    }
    _, again = apply(out, six)
    assert again == []  # reinvocation is a no-op


def test_an_absent_instance_is_never_created() -> None:
    obj = sample(*LLM)
    del obj["spec"]["router"]
    obj["spec"]["prefill"] = None  # a null component: no instance either
    _, ops = apply(obj, KAI)
    assert _ops_at(ops, "/spec/router") == [] and _ops_at(ops, "/spec/prefill") == []
    assert _ops_at(ops, "/spec/worker") == []  # an LWS worker nobody asked for
    isvc = sample(*ISVC)
    assert "transformer" not in isvc["spec"]
    _, ops = apply(isvc, KAI)
    assert _ops_at(ops, "/spec/transformer") == [] and _ops_at(ops, "/spec/explainer") == []


def test_a_dynamo_graph_without_services_gets_nothing() -> None:
    obj = sample(*DGD)
    obj["spec"]["services"] = {}
    _, ops = apply(obj, KAI)
    assert ops == []


def test_a_value_in_the_way_is_not_replaced() -> None:
    obj = sample(*DGD)
    obj["spec"]["services"]["Frontend"]["extraPodSpec"] = "not an object"
    _, ops = apply(obj, KAI)
    assert _ops_at(ops, "/spec/services/Frontend/extraPodSpec") == []
    assert _ops_at(ops, "/spec/services/Frontend/labels")  # the rest of the instance is written
    loc = ("spec", "services", "Frontend", "extraPodSpec", "schedulerName")
    assert creatable(obj, loc, 3) is None


def test_the_instance_is_where_its_fragments_meet() -> None:
    a = ("spec", "services", "A")
    b = ("spec", "services", "B")
    labels = [(*a, "labels"), (*b, "labels")]
    sched = [(*a, "extraPodSpec", "schedulerName"), (*b, "extraPodSpec", "schedulerName")]
    assert instance_depths([labels, sched]) == [3, 3]
    # one fragment alone says only where its parent is: nothing is created for a child
    assert instance_depths([sched]) == [0, 0]
    assert instance_depths([]) == []


def test_describe_shows_the_slot_mutate_writes() -> None:
    obj = sample(*DGD)
    karta = REGISTRY.lookup(GVK.of(obj))
    assert karta is not None
    for full in (True, False):
        w = resolve(karta, obj, ENGINE, full=full)
        [svc] = [c for c in w.components if c.name == "service"]
        frontend = next(i for i in svc.instances if i.id == "Frontend")
        slot = frontend.slots["schedulerName"]
        assert slot.pointer == "/spec/services/Frontend/extraPodSpec/schedulerName"
        assert slot.path[: slot.base] == ("spec", "services", "Frontend")


def test_validate_counts_a_holder_inside_an_instance_as_found() -> None:
    obj = sample(*DGD)
    for svc in obj["spec"]["services"].values():
        svc.pop("extraPodSpec", None)
    karta = REGISTRY.lookup(GVK.of(obj))
    assert karta is not None
    report = check(copy.deepcopy(dict(karta.raw)), [("no-extra-pod-spec", obj)], ENGINE)
    assert report.errors == []
    assert not [w for w in report.warnings if "finds nothing" in w]
    # and a service that is not there finds nothing, as before
    empty = copy.deepcopy(obj)
    empty["spec"]["services"] = {}
    report = check(copy.deepcopy(dict(karta.raw)), [("no-services", empty)], ENGINE)
    assert [e.path.rsplit(".", 1)[1] for e in report.errors if "finds nothing" in e.message] == [
        "schedulerNamePath", "labelsPath", "annotationsPath", "priorityClassNamePath"
    ]  # fmt: skip


def test_a_child_with_one_written_fragment_creates_nothing() -> None:
    doc = yaml.safe_load(
        """
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: one-fragment}
spec:
  structureDefinition:
    rootComponent:
      name: root
      kind: {group: example.com, version: v1, kind: Thing}
    childComponents:
      - name: part
        ownerRef: root
        instanceIdPath: .spec.parts | to_entries[] | .key
        specDefinition:
          fragmentedPodSpecDefinition:
            schedulerNamePath: .spec.parts[] | .pod.schedulerName
"""
    )
    karta = definitions.parse(doc)
    obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
           "spec": {"parts": {"a": {}, "b": {"pod": {}}}}}  # fmt: skip
    w = resolve(karta, obj, ENGINE)
    [part] = [c for c in w.components if c.name == "part"]
    assert [i.id for i in part.instances] == ["b"]  # "a" has no pod: its parent is not made
