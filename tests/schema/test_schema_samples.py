"""Schema defaulting as the API server does it, and samples synthesised from a schema.

Schemas are the CRD fixtures under tests/crds and the real ``kubernetes`` client models;
synthesised samples are queried with the real ``jq`` library.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.base.documents import read_documents
from webhook.base.errors import InputError
from webhook.base.gvk import GVK
from webhook.jq.paths import parse_plain
from webhook.schema.builtin import builtin_schema
from webhook.schema.crds import read_crds
from webhook.schema.defaulting import apply_defaults, copy_json
from webhook.schema.structural import Outcome, Shape, check_expression, check_path, check_shape
from webhook.schema.synthesis import MAP_KEY, minimal_pod_template, synthesize

CRDS = Path(__file__).resolve().parents[1] / "crds"
TFJOB = GVK("kubeflow.org", "v1", "TFJob")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
WORKFLOW = GVK("argoproj.io", "v1alpha1", "Workflow")


def _schemas() -> dict[GVK, Any]:
    docs: list[tuple[str, Any]] = []
    for f in sorted(CRDS.glob("*.yaml")):
        docs.extend(read_documents(f))
    index = read_crds(docs)
    return {g: index.schema(g) for g in (TFJOB, JOBSET, WORKFLOW)}


SCHEMAS = _schemas()


def jq_all(expr: str, value: Any) -> list[Any]:
    return list(jq.compile(expr).input_value(value).all())


def locate(expr: str, sample: Any) -> Any:
    return jq.compile(f"[path({expr})]").input_value(sample).first()


def count_values(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(count_values(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(count_values(v) for v in value)
    return 1


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


JOBSET_SAMPLE: dict[str, Any] = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "js", "labels": {"a": "b"}},
    "spec": {
        "replicatedJobs": [
            {
                "name": "workers",
                "template": {
                    "spec": {
                        "parallelism": 2,
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "w", "image": "i", "ports": [{"containerPort": 80}]}
                                ]
                            }
                        },
                    }
                },
            },
            {"name": "leader", "replicas": 3, "groupName": "lead", "template": {}},
        ]
    },
}


# --------------------------------------------------------------------------------------------
# Defaulting
# --------------------------------------------------------------------------------------------


def test_jobset_defaults_apply_inside_array_items_without_touching_the_input() -> None:
    before = copy.deepcopy(JOBSET_SAMPLE)
    out = apply_defaults(SCHEMAS[JOBSET], JOBSET_SAMPLE)
    assert before == JOBSET_SAMPLE
    jobs = out["spec"]["replicatedJobs"]
    assert [(j["replicas"], j["groupName"]) for j in jobs] == [(1, "default"), (3, "lead")]
    port = jobs[0]["template"]["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port == {"containerPort": 80, "protocol": "TCP"}
    # Nothing is invented where the object has nothing and the schema no default.
    assert "failurePolicy" not in out["spec"] and "status" not in out
    assert out["metadata"] == {"name": "js", "labels": {"a": "b"}}
    # The result shares nothing with the input.
    out["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 9
    assert before == JOBSET_SAMPLE


def test_a_definition_needing_defaults_evaluates_once_they_apply() -> None:
    # Upstream's JobSet replicas expression without the `// 1`: needs the CRD default.
    expr = "[.spec.replicatedJobs[] | .replicas * (.template.spec.parallelism // 1)] | add"
    with pytest.raises(ValueError, match="cannot be multiplied"):
        jq_all(expr, JOBSET_SAMPLE)
    assert jq_all(expr, apply_defaults(SCHEMAS[JOBSET], JOBSET_SAMPLE)) == [1 * 2 + 3 * 1]


def test_defaults_of_nested_properties_apply_inside_a_defaulted_object() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "default": {},
                "properties": {
                    "policy": {
                        "type": "object",
                        "default": {"mode": "x"},
                        "properties": {
                            "mode": {"type": "string"},
                            "limit": {"type": "integer", "default": 5},
                        },
                    },
                    "untouched": {
                        "type": "object",
                        "properties": {"n": {"type": "integer", "default": 1}},
                    },
                },
            }
        },
    }
    assert apply_defaults(schema, {}) == {"spec": {"policy": {"mode": "x", "limit": 5}}}


def test_map_values_get_their_defaults() -> None:
    schema = {
        "type": "object",
        "properties": {
            "replicaSpecs": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"replicas": {"type": "integer", "default": 1}},
                },
            }
        },
    }
    out = apply_defaults(schema, {"replicaSpecs": {"Worker": {}, "PS": {"replicas": 2}}})
    assert out == {"replicaSpecs": {"Worker": {"replicas": 1}, "PS": {"replicas": 2}}}


def test_nulls_are_handled_as_the_api_server_does() -> None:
    schema = {
        "type": "object",
        "properties": {
            "defaulted": {"type": "integer", "default": 1},
            "defaulted_nullable": {"type": "integer", "default": 1, "nullable": True},
            "plain": {"type": "string"},
            "nullable": {"type": "string", "nullable": True},
            "items": {"type": "array", "items": {"type": "string", "default": "d"}},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    obj = {
        "defaulted": None,
        "defaulted_nullable": None,
        "plain": None,
        "nullable": None,
        "items": [None, "x"],
        "map": {"k": None, "j": "v"},
        "unknown": None,
    }
    assert apply_defaults(schema, obj) == {
        "defaulted": 1,  # a null without nullable gets the default
        "defaulted_nullable": None,  # nullable: null is a value
        "nullable": None,
        "items": ["d", "x"],
        "map": {"j": "v"},  # non-nullable nulls without a default are dropped
        "unknown": None,  # not in the schema: left to pruning, not to defaulting
    }


def test_resource_root_fields_are_never_defaulted_from_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "metadata": {
                "type": "object",
                "properties": {"name": {"type": "string", "default": "x"}},
            },
            "spec": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}},
        },
    }
    assert apply_defaults(schema, {"metadata": {}, "spec": {}}) == {
        "metadata": {},
        "spec": {"name": "x"},
    }
    assert apply_defaults(schema, {"metadata": {}}, resource_root=False) == {
        "metadata": {"name": "x"}
    }


def test_defaulting_with_a_malformed_schema_or_object_never_raises() -> None:
    for schema in (None, [], {"properties": []}, {"properties": {"a": 3}}, {"items": "x"}):
        assert apply_defaults(schema, {"a": [1, {"b": None}]}) == {"a": [1, {"b": None}]}  # type: ignore[arg-type]
    assert apply_defaults(SCHEMAS[JOBSET], "text") == "text"
    assert apply_defaults(SCHEMAS[JOBSET], {"spec": {"replicatedJobs": {"not": "a list"}}}) == {
        "spec": {"replicatedJobs": {"not": "a list"}}
    }


def test_a_self_containing_object_is_an_input_error_not_a_hang() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(InputError, match="nested deeper"):
        apply_defaults(SCHEMAS[JOBSET], loop)
    with pytest.raises(InputError):
        copy_json([loop])


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=4)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
replicated_job = st.fixed_dictionaries(
    {},
    optional={
        "name": json_values,
        "replicas": json_values,
        "groupName": json_values,
        "template": st.fixed_dictionaries(
            {},
            optional={
                "spec": st.fixed_dictionaries(
                    {}, optional={"parallelism": json_values, "template": json_values}
                )
            },
        )
        | json_values,
        "extra": json_values,
    },
)
jobsets = st.fixed_dictionaries(
    {
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "replicatedJobs": st.lists(replicated_job, max_size=3) | json_values,
                "suspend": json_values,
                "failurePolicy": json_values,
            },
        )
    }
)


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in leaves(v, (*path, k))] or [(path, value)]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in leaves(v, (*path, i))] or [
            (path, value)
        ]
    return [(path, value)]


def get(value: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        value = value[p]
    return value


@settings(max_examples=200, deadline=None)
@given(jobsets)
def test_defaulting_never_removes_or_changes_a_non_null_value_and_is_idempotent(obj: Any) -> None:
    before = copy.deepcopy(obj)
    out = apply_defaults(SCHEMAS[JOBSET], obj)
    assert obj == before
    for path, value in leaves(obj):
        if isinstance(value, dict | list):  # an empty container stays one (defaults may fill it)
            assert type(get(out, path)) is type(value)
        elif value is not None:
            assert get(out, path) == value
    assert apply_defaults(SCHEMAS[JOBSET], out) == out


# --------------------------------------------------------------------------------------------
# Synthesis
# --------------------------------------------------------------------------------------------


def test_synthesised_tfjob_has_a_pod_template_where_the_definition_looks() -> None:
    tf = SCHEMAS[TFJOB]
    sample = synthesize(tf, TFJOB, name="demo")
    assert sample["apiVersion"] == "kubeflow.org/v1" and sample["kind"] == "TFJob"
    assert sample["metadata"] == {"name": "demo", "namespace": "default"}
    templates = jq_all(".spec.tfReplicaSpecs[].template", sample)
    assert templates == [minimal_pod_template()]
    r = check_expression(
        tf,
        ".spec.tfReplicaSpecs | to_entries[0] | .key as $k | .value.template",
        sample=sample,
        locate=lambda e, s: locate(".spec.tfReplicaSpecs[] | .template", s),
        shape=Shape.POD_TEMPLATE_SPEC,
    )
    assert (
        r.outcome is Outcome.OK
        and r.locations[0].path.path == f".spec.tfReplicaSpecs.{MAP_KEY}.template"
    )
    # The CRD's default inside runPolicy applies; required fields are present.
    assert sample["spec"]["runPolicy"]["suspend"] is False
    assert "status" not in sample


def test_synthesised_jobset_has_one_entry_per_list_defaults_and_first_enum_values() -> None:
    sample = synthesize(SCHEMAS[JOBSET], JOBSET, namespace=None)
    assert "namespace" not in sample["metadata"]
    (job,) = sample["spec"]["replicatedJobs"]
    assert job["replicas"] == 1 and job["groupName"] == "default"
    assert isinstance(job["name"], str) and job["name"]
    assert sample["spec"]["successPolicy"]["operator"] == "All"
    assert sample["spec"]["startupPolicy"]["startupPolicyOrder"] == "AnyOrder"
    assert sample["spec"]["failurePolicy"]["restartStrategy"] == "Recreate"
    pod_templates = jq_all(".spec.replicatedJobs[].template.spec.template", sample)
    assert pod_templates[0]["spec"]["containers"][0]["name"]
    # Upstream's replicas expression runs on it.
    assert jq_all(
        ".spec.replicatedJobs[] | (.replicas // 1) * (.template.spec.parallelism // 1)", sample
    ) == [1]
    with_status = synthesize(SCHEMAS[JOBSET], JOBSET, include_status=True)
    assert isinstance(with_status["status"]["replicatedJobsStatus"][0]["ready"], int)


def test_synthesised_sample_is_valid_against_its_own_schema_checks() -> None:
    js = SCHEMAS[JOBSET]
    sample = synthesize(js, JOBSET)
    for path in jq.compile("[paths]").input_value(sample).first():
        assert check_path(js, path).outcome in (Outcome.OK, Outcome.CANNOT_JUDGE), path


def test_pod_template_paths_get_a_template_even_where_the_schema_is_preserve_unknown() -> None:
    wf = SCHEMAS[WORKFLOW]
    steps = parse_plain(".spec.templates[].podTemplate")
    assert steps is not None
    sample = synthesize(
        wf, WORKFLOW, pod_template_paths=[steps], pod_spec_paths=[("spec", "executor", "podSpec")]
    )
    assert jq_all(".spec.templates[].podTemplate", sample) == [minimal_pod_template()]
    assert jq_all(".spec.executor.podSpec.containers | length", sample) == [1]
    # Without the hint, the schema says nothing below spec.
    assert synthesize(wf, WORKFLOW)["spec"] == {}


def test_pod_template_paths_complete_an_existing_partial_template() -> None:
    tf = SCHEMAS[TFJOB]
    sample = synthesize(
        tf, TFJOB, pod_template_paths=[("spec", "tfReplicaSpecs", "Chief", "template")]
    )
    assert set(sample["spec"]["tfReplicaSpecs"]) == {MAP_KEY, "Chief"}
    chief = sample["spec"]["tfReplicaSpecs"]["Chief"]["template"]
    assert (
        check_shape(
            check_path(tf, ("spec", "tfReplicaSpecs", "Chief", "template")).node,
            Shape.POD_TEMPLATE_SPEC,
        ).outcome
        is Outcome.OK
    )
    assert chief["spec"]["containers"][0]["image"]


def test_builtin_job_sample_has_a_minimal_pod_template() -> None:
    job = builtin_schema(GVK("batch", "v1", "Job"))
    assert job is not None
    sample = synthesize(job, GVK("batch", "v1", "Job"))
    assert sample["apiVersion"] == "batch/v1"
    assert sample["spec"]["template"] == minimal_pod_template()
    assert count_values(sample) <= 2000 + 50
    pod = synthesize(builtin_schema(GVK("", "v1", "Pod")), GVK("", "v1", "Pod"))  # type: ignore[arg-type]
    assert pod["apiVersion"] == "v1" and isinstance(pod["spec"]["containers"], list)


def self_referencing_schema() -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object", "required": ["name", "child", "children"]}
    node["properties"] = {
        "name": {"type": "string"},
        "child": node,
        "children": {"type": "array", "items": node},
        "byName": {"type": "object", "additionalProperties": node, "default": {}},
    }
    return {"type": "object", "properties": {"spec": node}}


def test_synthesis_of_a_self_referencing_schema_terminates_within_its_bounds() -> None:
    schema = self_referencing_schema()
    gvk = GVK("example.com", "v1", "Tree")
    sample = synthesize(schema, gvk, max_depth=10, max_nodes=300)
    assert count_values(sample) <= 300 + 10
    assert depth(sample) <= 10 + 2
    big = synthesize(schema, gvk)
    assert count_values(big) <= 2000 + 10 and depth(big) <= 24 + 2
    json.dumps(big)


def test_a_wide_schema_is_cut_at_the_size_bound_breadth_first() -> None:
    leaf = {
        "type": "object",
        "properties": {
            f"f{i}": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
            for i in range(60)
        },
    }
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["first"],
                "properties": {"first": {"type": "string"}, **{f"g{i}": leaf for i in range(60)}},
            }
        },
    }
    sample = synthesize(schema, GVK("example.com", "v1", "Wide"), max_nodes=500)
    assert count_values(sample) <= 500 + 10
    assert sample["spec"]["first"] == "example-first"  # shallow and required first
    assert len(sample["spec"]) == 61  # the whole first level before anything deeper


def test_defaulting_a_self_referencing_schema_with_defaults_terminates() -> None:
    node: dict[str, Any] = {"type": "object"}
    node["properties"] = {"next": {**node, "default": {}}}
    node["properties"]["next"]["properties"] = node["properties"]
    out = apply_defaults(node, {})
    assert 50 < depth(out) <= 110


def test_placeholders_respect_minimum_maximum_lengths_and_formats() -> None:
    schema = {
        "type": "object",
        "required": ["a", "b", "c", "d", "e", "f", "g", "h"],
        "properties": {
            "a": {"type": "integer", "minimum": 5},
            "b": {"type": "integer", "maximum": 0},
            "c": {"type": "number", "minimum": 0.5},
            "d": {"type": "string", "maxLength": 3},
            "e": {"type": "string", "format": "date-time"},
            "f": {"type": "boolean"},
            "g": {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
            },
            "h": {"type": "array", "minItems": 2, "items": {"type": "string"}},
        },
    }
    spec = synthesize({"type": "object", "properties": {"spec": schema}}, GVK("x.io", "v1", "X"))[
        "spec"
    ]
    assert spec == {
        "a": 5,
        "b": 0,
        "c": 0.5,
        "d": "exa",
        "e": "1970-01-01T00:00:00Z",
        "f": False,
        "g": 1,
        "h": ["example-h", "example-h"],
    }


def test_synthesis_with_a_malformed_schema_still_gives_an_object() -> None:
    for schema in (None, [], {"properties": "x"}, {"properties": {"spec": 3}}, {"type": 7}):
        sample = synthesize(schema, GVK("x.io", "v1", "X"))  # type: ignore[arg-type]
        assert sample["kind"] == "X" and sample["metadata"]["name"] == "sample"
