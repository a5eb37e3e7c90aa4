"""validation.check: one test per rule, each on a small valid definition broken in one way."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from helpers import ENGINE

from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.karta.loading import catalog_dir, samples_dir
from webhook.karta.model import parse
from webhook.karta.samples import SampleIndex
from webhook.validation.check import Report, check

ROOT = "spec.structureDefinition.rootComponent"
CHILD = "spec.structureDefinition.childComponents[0]"
GANG = "spec.optimizationInstructions.gangScheduling"
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")

BASE: dict[str, Any] = {
    "apiVersion": "run.ai/v1alpha1",
    "kind": "Karta",
    "metadata": {"name": "jobset"},
    "spec": {
        "structureDefinition": {
            "rootComponent": {
                "name": "jobset",
                "kind": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"},
                "statusDefinition": {
                    "phaseDefinition": {"path": ".status.phase"},
                    "conditionsDefinition": {"path": "(.status.conditions // [])"},
                    "statusMappings": {
                        "running": [{"byPhase": "Running"}],
                        "completed": [{"byConditions": [{"type": "Completed", "status": "True"}]}],
                        "failed": [
                            {
                                "byExpression": {
                                    "expression": '.status.terminalState == "Failed"',
                                    "expectedResult": "true",
                                }
                            }
                        ],
                    },
                },
                "suspendDefinition": {
                    "suspendActions": [{"path": ".spec.suspend", "value": "true"}],
                    "resumeActions": [{"path": ".spec.suspend", "value": "false"}],
                },
            },
            "childComponents": [
                {
                    "name": "replicatedjob",
                    "kind": {"group": "batch", "version": "v1", "kind": "Job"},
                    "ownerRef": "jobset",
                    "specDefinition": {
                        "podTemplateSpecPath": ".spec.replicatedJobs[].template.spec.template"
                    },
                    "scaleDefinition": {"replicasPath": ".spec.replicatedJobs[] | .replicas // 1"},
                    "instanceIdPath": ".spec.replicatedJobs[].name",
                    "podSelector": {
                        "componentTypeSelector": {"keyPath": '.metadata.labels["app"]'},
                        "componentInstanceSelector": {
                            "idPath": '.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]'
                        },
                    },
                }
            ],
        },
        "optimizationInstructions": {
            "gangScheduling": {
                "podGroups": [
                    {
                        "name": "all",
                        "members": [
                            {
                                "componentName": "replicatedjob",
                                "groupByKeyPaths": [".metadata.labels.app"],
                                "filters": ['.metadata.labels.app == "x"'],
                            }
                        ],
                    }
                ],
                "podGroup": {"name": "all", "subGroups": [{"componentName": "replicatedjob"}]},
            }
        },
    },
}


def _template(name: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": name, "image": "busybox"}]},
    }


SAMPLE: dict[str, Any] = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {
        "suspend": False,
        "replicatedJobs": [
            {"name": "leader", "replicas": 1, "template": {"spec": {"template": _template("l")}}},
            {"name": "workers", "replicas": 3, "template": {"spec": {"template": _template("w")}}},
        ],
    },
    "status": {
        "phase": "Running",
        "conditions": [{"type": "Completed", "status": "False"}],
    },
}
SAMPLES = [("train.yaml", SAMPLE)]


def base() -> dict[str, Any]:
    return copy.deepcopy(BASE)


def root(d: dict[str, Any]) -> dict[str, Any]:
    return d["spec"]["structureDefinition"]["rootComponent"]


def child(d: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return d["spec"]["structureDefinition"]["childComponents"][i]


def add_child(d: dict[str, Any], name: str, owner: str | None) -> None:
    c: dict[str, Any] = {"name": name}
    if owner is not None:
        c["ownerRef"] = owner
    d["spec"]["structureDefinition"]["childComponents"].append(c)


def run(d: Any, samples: Any = SAMPLES, **kw: Any) -> Report:
    return check(d, samples, ENGINE, **kw)


def errors_at(r: Report, path: str) -> list[str]:
    return [e.message for e in r.errors if e.path == path]


def only_error(r: Report, path: str, fragment: str) -> None:
    """The report has exactly one error, at ``path``, containing ``fragment``."""
    assert [(e.path, fragment in e.message) for e in r.errors] == [(path, True)], r.errors


# --------------------------------------------------------------------------- base and shape


def test_base_is_valid_against_its_sample() -> None:
    r = run(base())
    assert r.ok, r.errors
    assert r.samples == 1
    assert (r.name, r.gvk, r.source) == ("jobset", JOBSET, "<input>")
    assert r.warnings == []


@pytest.mark.parametrize(
    "doc",
    [
        None,
        [],
        "text",
        {"apiVersion": "v1", "kind": "Pod"},
        {"apiVersion": "run.ai/v1alpha1", "kind": "Karta", "spec": 5},
        {"apiVersion": "run.ai/v1alpha1", "kind": "Karta", "metadata": {"name": "x"}, "spec": {}},
    ],
)
def test_bad_shapes_are_errors_not_exceptions(doc: Any) -> None:
    r = run(doc, source="f.yaml")
    assert not r.ok and r.source == "f.yaml" and r.samples == 0


def test_shape_errors_keep_their_field_paths() -> None:
    d = base()
    d["spec"]["structureDefinition"]["childComponents"] = {"name": "x"}
    root(d)["scaleDefinition"] = {"replicasPath": 3}
    r = run(d)
    assert {e.path for e in r.errors} == {
        "spec.structureDefinition.childComponents",
        f"{ROOT}.scaleDefinition.replicasPath",
    }
    assert r.name == "jobset"


# --------------------------------------------------------------------------- 1. structure


def test_duplicate_component_name() -> None:
    d = base()
    add_child(d, "replicatedjob", "jobset")
    only_error(
        run(d),
        "spec.structureDefinition.childComponents[1].name",
        "component name replicatedjob is not unique",
    )


def test_empty_component_name() -> None:
    d = base()
    child(d)["name"] = ""
    d["spec"]["optimizationInstructions"] = {}
    r = run(d)
    assert "component name is empty" in errors_at(r, f"{CHILD}.name")


@pytest.mark.parametrize(
    "kind",
    [
        None,
        {"group": "apps", "version": "v1", "kind": ""},
        {"group": "", "version": "v1", "kind": "Deployment"},
    ],
)
def test_root_needs_full_kind(kind: Any) -> None:
    d = base()
    if kind is None:
        del root(d)["kind"]
    else:
        root(d)["kind"] = kind
    only_error(
        run(d, []), f"{ROOT}.kind", "root component must have full kind (group, version, kind)"
    )


@pytest.mark.parametrize("core", ["ReplicationController", "PodTemplate", "Pod"])
def test_an_empty_group_is_the_core_group_for_any_core_kind(core: str) -> None:
    d = base()
    root(d)["kind"] = {"group": "", "version": "v1", "kind": core}
    assert not errors_at(run(d, []), f"{ROOT}.kind")


def test_root_may_have_empty_group_for_pod_with_template_dot() -> None:
    d = {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "pod"},
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "name": "pod",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "specDefinition": {"podTemplateSpecPath": "."},
                    "scaleDefinition": {"replicasPath": '"1"'},
                    "statusDefinition": {
                        "phaseDefinition": {"path": ".status.phase"},
                        "statusMappings": {"running": [{"byPhase": "Running"}]},
                    },
                }
            }
        },
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, **_template("p")}
    r = run(d, [("pod.yaml", pod)])
    assert r.ok and r.samples == 1, r.errors


def test_root_cannot_have_owner_ref() -> None:
    d = base()
    root(d)["ownerRef"] = "someone"
    only_error(run(d), f"{ROOT}.ownerRef", "root component cannot have owner ref")


def test_root_needs_status_definition() -> None:
    d = base()
    del root(d)["statusDefinition"]
    only_error(run(d), f"{ROOT}.statusDefinition", "root component must have status definition")


@pytest.mark.parametrize("owner", [None, ""])
def test_child_needs_owner_ref(owner: str | None) -> None:
    d = base()
    if owner is None:
        del child(d)["ownerRef"]
    else:
        child(d)["ownerRef"] = owner
    only_error(run(d), f"{CHILD}.ownerRef", "child component 'replicatedjob' has no owner ref")


def test_child_owner_ref_must_exist() -> None:
    d = base()
    child(d)["ownerRef"] = "nonexistent"
    only_error(
        run(d),
        f"{CHILD}.ownerRef",
        "child component 'replicatedjob' has owner ref to non-existing component 'nonexistent'",
    )


def test_two_cycle_is_one_error() -> None:
    d = base()
    add_child(d, "a", "b")
    add_child(d, "b", "a")
    only_error(
        run(d),
        "spec.structureDefinition.childComponents[1].ownerRef",
        "ownership cycle detected involving component a",
    )


def test_three_cycle_is_one_error() -> None:
    d = base()
    add_child(d, "a", "b")
    add_child(d, "b", "c")
    add_child(d, "c", "a")
    r = run(d)
    assert len(r.errors) == 1 and "ownership cycle detected" in r.errors[0].message


def test_chain_to_root_is_fine() -> None:
    d = base()
    add_child(d, "a", "jobset")
    add_child(d, "b", "a")
    assert run(d).ok


def test_duplicate_name_hides_ownership_findings_like_upstream() -> None:
    d = base()
    for name, owner in (("A", "B"), ("B", "A"), ("C", "D"), ("C", "A")):
        add_child(d, name, owner)
    r = run(d)
    assert [e.message for e in r.errors] == ["component name C is not unique"]
    assert not any("'D'" in e.message for e in r.errors)


def test_missing_owner_hides_cycle_like_upstream() -> None:
    d = base()
    for name, owner in (("A", "B"), ("B", "A"), ("C", "D")):
        add_child(d, name, owner)
    r = run(d)
    assert len(r.errors) == 1
    assert "owner ref to non-existing component 'D'" in r.errors[0].message


@pytest.mark.parametrize(
    "spec",
    [
        {"podTemplateSpecPath": ".spec.x", "podSpecPath": ".spec.y"},
        {"podTemplateSpecPath": ".spec.x", "fragmentedPodSpecDefinition": {"labelsPath": ".a"}},
        {"podSpecPath": ".spec.y", "fragmentedPodSpecDefinition": {"labelsPath": ".a"}},
        {
            "podTemplateSpecPath": ".spec.x",
            "podSpecPath": ".spec.y",
            "fragmentedPodSpecDefinition": {},
        },
    ],
)
def test_at_most_one_spec_pattern(spec: dict[str, Any]) -> None:
    d = base()
    child(d)["specDefinition"] = spec
    r = run(d, [])
    assert errors_at(r, f"{CHILD}.specDefinition") == [
        m
        for m in errors_at(r, f"{CHILD}.specDefinition")
        if "has multiple pod spec definitions" in m
    ]
    assert len(errors_at(r, f"{CHILD}.specDefinition")) == 1


def test_metadata_path_only_with_pod_spec_path_is_a_warning() -> None:
    """Upstream documents the pairing without enforcing it, and alone it is never read: a
    warning (upstream's Argo and KubeVirt definitions have one), not a refusal."""
    d = base()
    child(d)["specDefinition"]["metadataPath"] = (
        ".spec.replicatedJobs[].template.spec.template.metadata"
    )
    r = run(d)
    assert r.ok, r.errors
    assert any(
        w.startswith(f"{CHILD}.specDefinition.metadataPath: ")
        and "metadataPath is only allowed with podSpecPath" in w
        for w in r.warnings
    )


def test_pod_spec_with_metadata_is_fine() -> None:
    d = base()
    child(d)["specDefinition"] = {
        "podSpecPath": ".spec.replicatedJobs[].template.spec.template.spec",
        "metadataPath": ".spec.replicatedJobs[].template.spec.template.metadata",
    }
    r = run(d)
    assert r.ok, r.errors


def test_instance_id_path_needs_instance_selector() -> None:
    d = base()
    del child(d)["podSelector"]["componentInstanceSelector"]
    only_error(
        run(d),
        f"{CHILD}.instanceIdPath",
        "has instance id path but no pod component instance selector",
    )


def test_instance_selector_needs_instance_id_path() -> None:
    d = base()
    del child(d)["instanceIdPath"]
    r = run(d)
    assert errors_at(r, f"{CHILD}.podSelector.componentInstanceSelector") == [
        "component replicatedjob has pod component instance selector but no instance id path"
    ]


def test_pod_group_members_must_exist() -> None:
    d = base()
    gang = d["spec"]["optimizationInstructions"]["gangScheduling"]
    gang["podGroups"][0]["members"][0]["componentName"] = "nonexistent"
    gang["podGroup"]["subGroups"].append({"componentName": "ghost"})
    r = run(d)
    assert {(e.path, e.message) for e in r.errors} == {
        (
            f"{GANG}.podGroups[0].members[0].componentName",
            "pod-group member component 'nonexistent' is not defined",
        ),
        (
            f"{GANG}.podGroup.subGroups[1].componentName",
            "pod-group member component 'ghost' is not defined",
        ),
    }


def test_no_gang_scheduling_is_fine() -> None:
    d = base()
    d["spec"]["optimizationInstructions"] = {}
    assert run(d).ok


def test_suspend_values_must_be_json() -> None:
    d = base()
    root(d)["suspendDefinition"]["resumeActions"][0]["value"] = "paused"
    only_error(run(d), f"{ROOT}.suspendDefinition.resumeActions[0].value", "must be a JSON value")


def test_every_structure_error_is_reported_at_once() -> None:
    d = base()
    del root(d)["statusDefinition"]
    root(d)["ownerRef"] = "x"
    child(d)["specDefinition"]["podSpecPath"] = ".spec.y"
    root(d)["suspendDefinition"]["suspendActions"][0]["value"] = "{"
    r = run(d, [])
    assert {e.path for e in r.errors} == {
        f"{ROOT}.statusDefinition",
        f"{ROOT}.ownerRef",
        f"{CHILD}.specDefinition",
        f"{ROOT}.suspendDefinition.suspendActions[0].value",
    }


# --------------------------------------------------------------------------- 2. jq


@pytest.mark.parametrize(
    "expr", ["env.HOME", "$ENV.PATH", "input_filename", "$__loc__", "del(.spec)"]
)
def test_unsafe_expressions_are_invalid(expr: str) -> None:
    d = base()
    root(d)["statusDefinition"]["phaseDefinition"]["path"] = expr
    r = run(d)
    assert not r.ok
    msgs = errors_at(r, f"{ROOT}.statusDefinition.phaseDefinition.path")
    assert msgs and all("not allowed" in m for m in msgs), r.errors


def test_unsafe_pod_side_expression_is_invalid() -> None:
    d = base()
    gang = d["spec"]["optimizationInstructions"]["gangScheduling"]
    gang["podGroups"][0]["members"][0]["groupByKeyPaths"] = ["env.HOME"]
    r = run(d)
    assert errors_at(r, f"{GANG}.podGroups[0].members[0].groupByKeyPaths[0]")


@pytest.mark.parametrize(
    ("where", "expr"),
    [
        (f"{CHILD}.specDefinition.podTemplateSpecPath", ".spec.template.["),
        (f"{CHILD}.podSelector.componentTypeSelector.keyPath", ".metadata.labels[0"),
        (f"{GANG}.podGroups[0].members[0].filters[0]", ".a == "),
    ],
)
def test_expressions_must_compile(where: str, expr: str) -> None:
    d = base()
    if "podTemplateSpecPath" in where:
        child(d)["specDefinition"]["podTemplateSpecPath"] = expr
    elif "keyPath" in where:
        child(d)["podSelector"]["componentTypeSelector"]["keyPath"] = expr
    else:
        gang = d["spec"]["optimizationInstructions"]["gangScheduling"]
        gang["podGroups"][0]["members"][0]["filters"] = [expr]
    r = run(d)
    assert errors_at(r, where), r.errors
    assert len(r.errors) == 1, r.errors  # nothing else is judged on a path that cannot run


def test_pod_side_expressions_are_never_run_on_the_sample() -> None:
    d = base()
    # would fail on the JobSet sample (a string is not a number), fine on a pod
    child(d)["podSelector"]["componentTypeSelector"]["keyPath"] = ".metadata.name | tonumber"
    assert run(d).ok


# --------------------------------------------------------------------------- 3. samples


def test_typo_path_finds_nothing_anywhere() -> None:
    d = base()
    child(d)["specDefinition"]["podTemplateSpecPath"] = (
        ".spec.replicatedJob[].template.spec.template"
    )
    child(d)["instanceIdPath"] = ".spec.replicatedJob[].name"
    child(d)["scaleDefinition"]["replicasPath"] = ".spec.replicatedJob[] | .replicas // 1"
    r = run(d)
    only_error(
        r, f"{CHILD}.specDefinition.podTemplateSpecPath", "finds nothing in any of 1 sample(s)"
    )
    assert any("absent (null)" in w and "train.yaml" in w for w in r.warnings)


def test_typo_path_against_catalog_jobset_samples() -> None:
    (_, d), *_ = read_documents(catalog_dir() / "jobset.x-k8s.io-jobset-v1alpha2.yaml")
    samples = SampleIndex.load([samples_dir()]).for_gvk(JOBSET)
    assert samples
    assert check(d, samples, ENGINE).ok
    d = copy.deepcopy(d)
    child(d)["specDefinition"]["podTemplateSpecPath"] = (
        ".spec.replicatedJob[].template.spec.template"
    )
    r = check(d, samples, ENGINE)
    assert not r.ok
    assert errors_at(r, f"{CHILD}.specDefinition.podTemplateSpecPath")


def test_computed_template_path_is_not_a_path() -> None:
    d = base()
    child(d)["specDefinition"]["podTemplateSpecPath"] = (
        ".spec.replicatedJobs[] | {spec: .template.spec.template.spec}"
    )
    r = run(d)
    msgs = errors_at(r, f"{CHILD}.specDefinition.podTemplateSpecPath")
    assert msgs and "must be a path expression" in msgs[0], r.errors


def test_computed_write_fragment_is_invalid_but_computed_read_only_fragment_is_fine() -> None:
    d = base()
    child(d)["specDefinition"] = {
        "fragmentedPodSpecDefinition": {
            "labelsPath": ".spec.replicatedJobs[].template.spec.template.metadata.labels",
            "resourcesPath": ".spec.replicatedJobs[].template.spec.template.spec"
            " | {limits: (.containers[0].resources.limits // {})}",
        }
    }
    r = run(d)
    assert r.ok, r.errors
    child(d)["specDefinition"]["fragmentedPodSpecDefinition"]["labelsPath"] = (
        ".spec.replicatedJobs[] | {app: .name}"
    )
    r = run(d)
    path = f"{CHILD}.specDefinition.fragmentedPodSpecDefinition.labelsPath"
    assert any("must be a path expression" in m for m in errors_at(r, path)), r.errors


def test_template_location_must_hold_a_pod_template() -> None:
    d = base()
    child(d)["specDefinition"]["podTemplateSpecPath"] = ".spec.replicatedJobs[].template"
    only_error(run(d), f"{CHILD}.specDefinition.podTemplateSpecPath", "is not a pod template")


def test_pod_spec_location_must_hold_a_pod_spec() -> None:
    d = base()
    child(d)["specDefinition"] = {"podSpecPath": ".spec.replicatedJobs[].template.spec.template"}
    only_error(run(d), f"{CHILD}.specDefinition.podSpecPath", "is not a pod spec")


def test_metadata_location_must_hold_an_object() -> None:
    d = base()
    child(d)["specDefinition"] = {
        "podSpecPath": ".spec.replicatedJobs[].template.spec.template.spec",
        "metadataPath": ".spec.replicatedJobs[].name",
    }
    only_error(run(d), f"{CHILD}.specDefinition.metadataPath", "is not an object")


def test_write_path_that_errors_is_invalid() -> None:
    d = base()
    child(d)["specDefinition"]["podTemplateSpecPath"] = ".spec.replicatedJobs.template"
    r = run(d)
    msgs = errors_at(r, f"{CHILD}.specDefinition.podTemplateSpecPath")
    assert msgs and "fails on sample train.yaml" in msgs[0]


def test_one_instance_id_for_two_templates() -> None:
    d = base()
    child(d)["instanceIdPath"] = ".metadata.name"
    only_error(
        run(d),
        f"{CHILD}.instanceIdPath",
        "yields 1 id(s) but the component's pod template path finds 2",
    )


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ('.spec.replicatedJobs[] | "same"', "duplicate id(s) same"),
        (".spec.replicatedJobs[].replicas", "must yield non-empty strings"),
        ('.spec.replicatedJobs[] | ""', "must yield non-empty strings"),
    ],
)
def test_instance_ids_are_unique_non_empty_strings(expr: str, fragment: str) -> None:
    d = base()
    child(d)["instanceIdPath"] = expr
    only_error(run(d), f"{CHILD}.instanceIdPath", fragment)


def test_map_instances_with_to_entries_keys() -> None:
    d = base()
    root(d)["kind"] = {"group": "example.com", "version": "v1", "kind": "Graph"}
    child(d)["specDefinition"]["podTemplateSpecPath"] = ".spec.services[].template"
    child(d)["instanceIdPath"] = ".spec.services | to_entries[] | .key"
    child(d)["scaleDefinition"]["replicasPath"] = ".spec.services[].replicas"
    graph = {
        "apiVersion": "example.com/v1",
        "kind": "Graph",
        "metadata": {"name": "g"},
        "spec": {
            "services": {
                "frontend": {"replicas": 1, "template": _template("f")},
                "decode": {"replicas": "2", "template": _template("d")},
            }
        },
    }
    empty = {**graph, "spec": {}}
    r = run(d, [("graph.yaml", graph), ("empty.yaml", empty)])
    assert r.ok, r.errors
    assert r.samples == 2
    assert any("empty.yaml" in w for w in r.warnings)


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ('"-1"', "must yield non-negative integers"),
        ('"many"', "must yield non-negative integers"),
        (".spec.replicatedJobs[] | 1.5", "must yield non-negative integers"),
        ("1, 2, 3", "yields 3 value(s) but the component has 2 instance(s)"),
    ],
)
def test_replicas_are_counts_one_per_instance(expr: str, fragment: str) -> None:
    d = base()
    child(d)["scaleDefinition"]["replicasPath"] = expr
    only_error(run(d), f"{CHILD}.scaleDefinition.replicasPath", fragment)


def test_negative_count_reads_as_unknown_with_a_warning() -> None:
    """Milvus's ``replicas: -1`` hands the count to an HPA: unknown, not wrong."""
    d = base()
    child(d)["scaleDefinition"]["replicasPath"] = "-1"
    r = run(d)
    assert r.ok, r.errors
    assert any(w.startswith(f"{CHILD}.scaleDefinition.replicasPath: gave -1") for w in r.warnings)


def test_scale_path_failing_on_a_sample_is_a_warning() -> None:
    d = base()
    child(d)["scaleDefinition"]["replicasPath"] = ".spec.replicatedJobs[] | .replicas * .nope"
    r = run(d)
    assert r.ok, r.errors
    assert any(
        w.startswith(f"{CHILD}.scaleDefinition.replicasPath: fails on sample")
        and "the count is unknown" in w
        for w in r.warnings
    )


@pytest.mark.parametrize("expr", ['"1"', "1", ".spec.replicatedJobs[].replicas", ".spec.nothing"])
def test_replica_forms_that_are_fine(expr: str) -> None:
    d = base()
    child(d)["scaleDefinition"] = {
        "replicasPath": expr,
        "minReplicasPath": '"0"',
        "maxReplicasPath": "8",
    }
    r = run(d)
    assert r.ok, r.errors


def test_root_scale_with_many_values_and_no_template() -> None:
    d = base()
    root(d)["scaleDefinition"] = {"replicasPath": ".spec.replicatedJobs[].replicas"}
    only_error(run(d), f"{ROOT}.scaleDefinition.replicasPath", "give one value")


@pytest.mark.parametrize(
    ("field", "expr"),
    [
        ("phase", ".status.phase | tonumber"),
        ("expression", 'error("x")'),
        ("conditions", ".status.conditions.type"),
    ],
)
def test_erroring_status_expression(field: str, expr: str) -> None:
    d = base()
    sd = root(d)["statusDefinition"]
    if field == "phase":
        sd["phaseDefinition"]["path"] = expr
        path = f"{ROOT}.statusDefinition.phaseDefinition.path"
    elif field == "conditions":
        sd["conditionsDefinition"]["path"] = expr
        path = f"{ROOT}.statusDefinition.conditionsDefinition.path"
    else:
        sd["statusMappings"]["failed"][0]["byExpression"]["expression"] = expr
        path = f"{ROOT}.statusDefinition.statusMappings.failed[0].byExpression.expression"
    only_error(run(d), path, "fails on sample train.yaml")


def test_conditions_path_must_yield_a_list() -> None:
    d = base()
    root(d)["statusDefinition"]["conditionsDefinition"]["path"] = ".status.conditions[]"
    only_error(
        run(d),
        f"{ROOT}.statusDefinition.conditionsDefinition.path",
        "must yield the conditions list",
    )


def test_conditions_field_name_defaults_may_be_left_out() -> None:
    d = base()
    sd = root(d)["statusDefinition"]
    assert set(sd["conditionsDefinition"]) == {"path"}
    sd["conditionsDefinition"]["path"] = ".status.conditions"
    assert run(d).ok


def test_suspend_action_path_must_be_a_path() -> None:
    d = base()
    root(d)["suspendDefinition"]["suspendActions"][0]["path"] = ".spec.suspend // false"
    r = run(d)
    msgs = errors_at(r, f"{ROOT}.suspendDefinition.suspendActions[0].path")
    assert msgs and "must be a path expression" in msgs[0]


# --------------------------------------------------------------------------- 4. bounds


@pytest.mark.parametrize(
    "where",
    [
        f"{CHILD}.scaleDefinition.replicasPath",
        f"{ROOT}.statusDefinition.statusMappings.failed[0].byExpression.expression",
    ],
)
def test_endless_expression_times_out_and_is_named(where: str) -> None:
    d = base()
    if "replicasPath" in where:
        child(d)["scaleDefinition"]["replicasPath"] = "def f: f; f"
    else:
        root(d)["statusDefinition"]["statusMappings"]["failed"][0]["byExpression"]["expression"] = (
            "def f: f; f"
        )
    second = copy.deepcopy(SAMPLE)
    r = run(d, [*SAMPLES, ("second.yaml", second)], timeout=1)
    assert [e.path for e in r.errors] == [where], r.errors
    assert "timed out" in r.errors[0].message
    assert r.samples == 2


# --------------------------------------------------------------------------- 5. warnings


def test_write_path_found_on_some_samples_only_is_a_warning() -> None:
    bare = copy.deepcopy(SAMPLE)
    del bare["spec"]["replicatedJobs"]
    r = run(base(), [*SAMPLES, ("bare.yaml", bare)])
    assert r.ok, r.errors
    path = f"{CHILD}.specDefinition.podTemplateSpecPath"
    assert any(
        w.startswith(path) and "bare.yaml" in w and "found in train.yaml" in w for w in r.warnings
    )


def test_matcher_without_clauses_is_a_warning() -> None:
    d = base()
    root(d)["statusDefinition"]["statusMappings"]["initializing"] = [{}]
    r = run(d)
    assert r.ok
    assert any(
        "statusMappings.initializing[0]" in w and "matches every object" in w for w in r.warnings
    )


def test_no_samples_is_a_warning() -> None:
    r = run(base(), [])
    assert r.ok and r.samples == 0
    assert any("no sample" in w for w in r.warnings)


def test_samples_of_another_kind_are_skipped() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    r = run(base(), [("pod.yaml", pod), ("list.yaml", [])])  # type: ignore[list-item]
    assert r.ok and r.samples == 0
    assert any("pod.yaml" in w for w in r.warnings)


# --------------------------------------------------------------------------- the catalog


#: Every catalog file, strictly: a write path that finds nothing in any sample is
#: indistinguishable from a typo, so each component needs a sample that has it.
CATALOG = [pytest.param(p, id=p.stem) for p in sorted(catalog_dir().glob("*.yaml"))]
_INDEX: list[SampleIndex] = []


def _index() -> SampleIndex:
    if not _INDEX:
        _INDEX.append(SampleIndex.load([samples_dir()]))
    return _INDEX[0]


@pytest.mark.parametrize("path", CATALOG)
def test_catalog_definition_passes_against_its_samples(path: Path) -> None:
    for source, doc in read_documents(path):
        gvk = parse(doc, source).gvk
        assert gvk is not None
        samples = _index().for_gvk(gvk)
        r = check(doc, samples, ENGINE, source=source)
        assert r.ok, "\n".join(str(e) for e in r.errors)
        assert r.samples >= 1, f"no sample of {gvk} under catalog/samples"


def test_many_endless_expressions_stay_bounded() -> None:
    d = base()
    child(d)["scaleDefinition"] = {
        "replicasPath": "def f: f; f",
        "minReplicasPath": "def g: g; g",
        "maxReplicasPath": "def h: h; h",
    }
    root(d)["statusDefinition"]["phaseDefinition"]["path"] = "def k: k; k"
    r = run(d, [("a.yaml", SAMPLE), ("b.yaml", SAMPLE), ("c.yaml", SAMPLE)], timeout=1)
    assert len(r.errors) == 4
    assert sum(e.message.startswith("evaluation timed out") for e in r.errors) == 3
    assert any("not checked" in w for w in r.warnings)


def test_samples_are_not_used_without_a_root_kind() -> None:
    d = base()
    del root(d)["kind"]
    r = run(d)
    assert r.samples == 0 and r.gvk is None
    assert any("no full kind" in w for w in r.warnings)


def test_values_of_live_objects_are_never_quoted() -> None:
    """A live object read from the cluster may hold what the Karta's author cannot read: its
    values appear in messages by type only (a catalog sample's by its JSON)."""
    d = base()
    child(d)["instanceIdPath"] = ".spec.replicatedJobs[] | .template.spec.template.spec"
    secret = {**SAMPLE, "metadata": {"name": "t", "namespace": "n"}}
    secret["spec"] = copy.deepcopy(SAMPLE["spec"])
    secret["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "env"
    ] = [{"name": "TOKEN", "value": "hunter2"}]
    r = run(d, [("cluster:n/t", secret)])
    assert not r.ok
    assert all("hunter2" not in e.message for e in r.errors), r.errors
    assert any("gave an object on sample cluster:n/t" in e.message for e in r.errors), r.errors
    r = run(d, [("train.yaml", secret)])
    assert any("hunter2" in e.message or "containers" in e.message for e in r.errors)
