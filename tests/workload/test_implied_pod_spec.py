"""The pod spec a fragmented definition implies (issue 35 item 2; webhook/karta/podspec.py).

Where a fragmented component's pod-spec field paths end in their fields of one and the same
object, ``nodeSelector`` and ``tolerations`` (which upstream's fragmented format has no path
for) go there; where they disagree, or no written field ends there, or the kind's schema has
no such field there, nothing is inferred and ``validate`` says why.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from helpers import ENGINE, REGISTRY, apply, policy, sample

from webhook.admission.handlers import mutate_with
from webhook.base.gvk import GVK
from webhook.karta import carry
from webhook.karta import model as definitions
from webhook.karta.fields import FRAGMENTED, WRITE_FRAGMENTS
from webhook.karta.podspec import implied_pod_spec, object_of
from webhook.validation.check import check

GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PLACE = policy(nodeSelector={"pool": "gpu"}, tolerations=[GPU])


@pytest.mark.parametrize(
    ("expr", "suffix", "obj"),
    [
        (".spec.predictor.schedulerName", ("schedulerName",), ".spec.predictor"),
        (".spec.services[] | .extraPodSpec.schedulerName", ("schedulerName",),
         ".spec.services[] | .extraPodSpec"),
        (".spec.template.cliques[].spec.podSpec.affinity.nodeAffinity",
         ("affinity", "nodeAffinity"), ".spec.template.cliques[].spec.podSpec"),
        (".spec.components.proxy // empty | .schedulerName", ("schedulerName",),
         ".spec.components.proxy // empty"),
        (".schedulerName", ("schedulerName",), "."),
        # not bound to the whole expression, or not the field: no evidence either way
        (".a // .b.schedulerName", ("schedulerName",), None),
        (".a | .b, .c.schedulerName", ("schedulerName",), None),
        (".spec.podPriorityClassName", ("priorityClassName",), None),
        (".spec.affinity.podAffinity", ("schedulerName",), None),
        ('.spec["schedulerName"]', ("schedulerName",), None),
    ],
)  # fmt: skip
def test_the_object_a_path_ends_in(expr: str, suffix: tuple[str, ...], obj: str | None) -> None:
    assert object_of(expr, suffix) == obj


@pytest.mark.parametrize(
    ("gvk", "component", "obj"),
    [
        (GVK("grove.io", "v1alpha1", "PodCliqueSet"), "podclique",
         ".spec.template.cliques[].spec.podSpec"),
        (GVK("nvidia.com", "v1alpha1", "DynamoGraphDeployment"), "service",
         ".spec.services[] | .extraPodSpec"),
        (GVK("tekton.dev", "v1", "TaskRun"), "taskrun", ".spec.podTemplate"),
        (GVK("argoproj.io", "v1alpha1", "Workflow"), "workflow", ".spec"),
        (GVK("apps.nvidia.com", "v1alpha1", "NIMService"), "nimservice", ".spec"),
    ],
)  # fmt: skip
def test_the_catalogs_fragmented_kinds_imply_their_pod_spec(
    gvk: GVK, component: str, obj: str
) -> None:
    karta = REGISTRY.lookup(gvk)
    assert karta is not None
    c = next(c for c in karta.components if c.name == component)
    assert implied_pod_spec(c).expression == obj


def test_every_fragmented_catalog_component_that_writes_implies_a_pod_spec() -> None:
    for karta in REGISTRY.definitions():
        for c in karta.components:
            if c.pattern == FRAGMENTED and any(c.exprs.get(r) for r in WRITE_FRAGMENTS):
                implied = implied_pod_spec(c)
                assert implied.expression is not None, (karta.name, c.name, implied.reason)


def test_a_grove_clique_takes_the_node_selector_and_tolerations_in_its_pod_spec() -> None:
    obj = sample("grove.io-podcliqueset-v1alpha1", "disaggregated.yaml")
    out, ops = apply(obj, PLACE)
    cliques = out["spec"]["template"]["cliques"]
    assert cliques
    for clique in cliques:
        pod = clique["spec"]["podSpec"]
        assert pod["nodeSelector"]["pool"] == "gpu" and GPU in pod["tolerations"]
    assert all("/spec/podSpec/" in op["path"] for op in ops)
    _, again = apply(out, PLACE)
    assert again == []


@pytest.mark.parametrize(
    ("stem", "name", "pointer"),
    [
        ("serving.kserve.io-inferenceservice-v1beta1", "predictor-only.yaml", "/spec/predictor"),
        ("tekton.dev-taskrun-v1", "inline-gpu-eval.yaml", "/spec/podTemplate"),
        ("argoproj.io-workflow-v1alpha1", "gpu-dag.yaml", "/spec"),
        ("nvidia.com-dynamographdeployment-v1alpha1", "disagg-successful.yaml",
         "/spec/services/VllmDecodeWorker/extraPodSpec"),
        ("serving.kserve.io-llminferenceservice-v1alpha1", "single-node-gpu.yaml",
         "/spec/router/scheduler/template"),
        ("serving.kserve.io-llminferenceservice-v1alpha1", "single-node-gpu.yaml",
         "/spec/template"),
        ("milvus.io-milvus-v1beta1", "cluster.yaml", "/spec/components"),
    ],
)  # fmt: skip
def test_the_implied_pod_spec_gets_the_fields(stem: str, name: str, pointer: str) -> None:
    obj = sample(stem, name)
    out, _ = apply(obj, PLACE)
    node: Any = out
    for tok in pointer.strip("/").split("/"):
        node = node[tok]
    assert node["nodeSelector"]["pool"] == "gpu" and GPU in node["tolerations"]


_THING = """
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: thing}
spec:
  structureDefinition:
    rootComponent:
      name: thing
      kind: {group: example.com, version: v1, kind: Thing}
      statusDefinition:
        phaseDefinition: {path: .status.phase}
        statusMappings:
          running: [{byPhase: Running}]
      specDefinition:
        fragmentedPodSpecDefinition:
          schedulerNamePath: .spec.pod.schedulerName
          containersPath: .spec.pod.containers
"""
THING = {
    "apiVersion": "example.com/v1",
    "kind": "Thing",
    "metadata": {"name": "t", "namespace": "n"},
    "spec": {"pod": {"containers": [{"name": "c", "image": "i"}]}, "other": {}},
}


def _thing(**fragments: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(_THING)
    frag = doc["spec"]["structureDefinition"]["rootComponent"]["specDefinition"]
    frag["fragmentedPodSpecDefinition"].update(fragments)
    return doc


def test_paths_that_disagree_imply_nothing_and_validate_says_why() -> None:
    karta = definitions.parse(_thing(containersPath=".spec.other.containers"))
    implied = implied_pod_spec(karta.root)
    assert implied.expression is None
    assert implied.reason == (
        "the pod-spec field paths end in different objects (schedulerNamePath in '.spec.pod', "
        "containersPath in '.spec.other')"
    )
    line = carry.summary(karta)
    assert line is not None
    assert (
        "no place for labels, annotations, priorityClassName, nodeSelector, tolerations, runtimeClassName"
        in line
    )
    assert "no pod spec implied: component 'thing': the pod-spec field paths end in" in line
    m = mutate_with(karta, PLACE, THING, ENGINE)
    assert m.ops == [] and sorted(w.split(": ", 1)[1] for w in m.warnings) == [
        "the definition gives no place for nodeSelector; not applicable, skipped",
        "the definition gives no place for tolerations; not applicable, skipped",
    ]


def test_without_a_written_field_there_is_nowhere_to_find_the_pod_spec() -> None:
    doc = _thing()
    del doc["spec"]["structureDefinition"]["rootComponent"]["specDefinition"][
        "fragmentedPodSpecDefinition"
    ]["schedulerNamePath"]
    implied = implied_pod_spec(definitions.parse(doc).root)
    assert implied.expression is None and implied.reason is not None
    assert "no written pod-spec field" in implied.reason


def test_agreeing_paths_carry_the_fields_and_write_them_there() -> None:
    karta = definitions.parse(_thing())
    # priorityClassName too: a pod-spec field it gives no path for
    assert carry.carried(karta) == (
        "schedulerName", "priorityClassName", "nodeSelector", "tolerations", "runtimeClassName"
    )  # fmt: skip
    m = mutate_with(karta, PLACE, THING, ENGINE)
    assert m.ops == [
        {"op": "add", "path": "/spec/pod/nodeSelector", "value": {"pool": "gpu"}},
        {"op": "add", "path": "/spec/pod/tolerations", "value": [GPU]},
    ]
    m = mutate_with(karta, policy(priorityClassName="train"), THING, ENGINE)
    assert m.ops == [{"op": "add", "path": "/spec/pod/priorityClassName", "value": "train"}]


def test_a_path_of_its_own_wins_over_the_implied_pod_spec() -> None:
    karta = definitions.parse(_thing(priorityClassNamePath=".spec.other.priorityClassName"))
    # .spec.other: the paths disagree, so nothing is implied, and the class goes to its path
    assert implied_pod_spec(karta.root).expression is None
    m = mutate_with(karta, policy(priorityClassName="train"), THING, ENGINE)
    assert m.ops == [{"op": "add", "path": "/spec/other/priorityClassName", "value": "train"}]


def _schema(pod_fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "pod": {"type": "object", "properties": pod_fields},
                    "other": {"type": "object"},
                },
            },
        },
    }


POD_FIELDS = {
    "schedulerName": {"type": "string"},
    "containers": {"type": "array", "items": {"type": "object"}},
}


def test_the_kinds_schema_without_the_fields_is_warned_and_named_in_the_carried_line() -> None:
    report = check(_thing(), [("t", copy.deepcopy(THING))], ENGINE, schema=_schema(POD_FIELDS))
    assert report.errors == []  # an inference never costs the definition
    where = "spec.structureDefinition.rootComponent.specDefinition.fragmentedPodSpecDefinition"
    found = [w for w in report.warnings if w.startswith(where + ": its paths imply")]
    assert [w.split("where ")[1].split(" ")[0] for w in found] == [
        "priorityClassName", "nodeSelector", "tolerations", "runtimeClassName"
    ]  # fmt: skip
    assert all("'.spec.pod'" in w and carry.REFUSED_ANNOTATION in w for w in found)
    [line] = [n for n in report.notes if n.startswith("policy fields carried")]
    assert line.endswith(
        "; not in the schema at the implied pod spec (pruned there): "
        "priorityClassName, nodeSelector, tolerations, runtimeClassName"
    )
    # the definition says its kind has no such fields: no warning, and they are left out
    doc = _thing()
    refused = "priorityClassName,nodeSelector,tolerations,runtimeClassName"
    doc["metadata"]["annotations"] = {carry.REFUSED_ANNOTATION: refused}
    report = check(doc, [("t", copy.deepcopy(THING))], ENGINE, schema=_schema(POD_FIELDS))
    assert report.errors == [] and not [w for w in report.warnings if "imply" in w]
    m = mutate_with(definitions.parse(doc), PLACE, THING, ENGINE)
    assert m.ops == [] and m.failures == []


def test_the_kinds_schema_with_the_fields_accepts_it() -> None:
    fields = {
        **POD_FIELDS,
        "priorityClassName": {"type": "string"},
        "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
        "tolerations": {"type": "array", "items": {"type": "object"}},
        "runtimeClassName": {"type": "string"},
    }
    report = check(_thing(), [("t", copy.deepcopy(THING))], ENGINE, schema=_schema(fields))
    assert report.errors == []
    assert any("nodeSelector, tolerations" in n for n in report.notes)


def test_an_lws_worker_of_an_llm_inference_service_takes_the_class_at_its_pod_spec() -> None:
    obj = sample("serving.kserve.io-llminferenceservice-v1alpha1", "multi-node-dp.yaml")
    assert "priorityClassName" not in obj["spec"]["worker"]
    out, _ = apply(obj, policy(priorityClassName="train", tolerations=[GPU]))
    assert out["spec"]["worker"]["priorityClassName"] == "train"
    assert out["spec"]["template"]["priorityClassName"] == "train"
    assert GPU in out["spec"]["worker"]["tolerations"]


def test_a_milvus_without_components_gets_them_with_every_field() -> None:
    obj = sample("milvus.io-milvus-v1beta1", "cluster-minimal.yaml")
    assert "components" not in obj["spec"]
    out, _ = apply(obj, PLACE)
    made = out["spec"]["components"]
    assert made["nodeSelector"] == {"pool": "gpu"} and made["tolerations"] == [GPU]


def test_the_gvk_of_every_sample_used_here_has_a_definition() -> None:
    assert REGISTRY.lookup(GVK("grove.io", "v1alpha1", "PodCliqueSet")) is not None
