"""Schema checks of jq paths: CRD reading, built-in kinds, path walking, shapes, expressions.

CRDs are the fixtures under tests/crds (real field names, types and defaults, trimmed); built-in
kinds come from the real ``kubernetes`` client models; non-plain expressions are located with
the real ``jq`` library, as the caller's sandboxed engine will do.
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
from webhook.jq.paths import Index, Iterate, Key, parse_plain
from webhook.schema.builtin import BUILTIN_KINDS, builtin_schema, model_schema
from webhook.schema.crds import CRDError, SchemaIndex, check_schema, read_crds
from webhook.schema.structural import (
    MAX_LOCATIONS,
    Outcome,
    Shape,
    Slice,
    check_expression,
    check_path,
    check_shape,
    describe,
    format_path,
    to_steps,
)

CRDS = Path(__file__).resolve().parents[1] / "crds"
TFJOB = GVK("kubeflow.org", "v1", "TFJob")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
WORKFLOW = GVK("argoproj.io", "v1alpha1", "Workflow")
JOB = GVK("batch", "v1", "Job")


def fixture_docs() -> list[tuple[str, Any]]:
    docs: list[tuple[str, Any]] = []
    for f in sorted(CRDS.glob("*.yaml")):
        docs.extend(read_documents(f))
    return docs


@pytest.fixture(scope="module")
def index() -> SchemaIndex:
    return read_crds(fixture_docs())


def schema_of(index: SchemaIndex, gvk: GVK) -> Any:
    s = index.schema(gvk)
    assert s is not None
    return s


def walk(schema: Any, expr: str) -> Any:
    steps = parse_plain(expr)
    assert steps is not None, expr
    return check_path(schema, steps)


def locate(expr: str, sample: Any) -> Any:
    return jq.compile(f"[path({expr})]").input_value(sample).first()


def crd_doc(name: str) -> dict[str, Any]:
    (_label, doc), *_ = read_documents(CRDS / name)
    return copy.deepcopy(doc)


# --------------------------------------------------------------------------------------------
# Reading CRDs
# --------------------------------------------------------------------------------------------


def test_fixtures_index_every_served_version_and_ignore_other_documents(index: SchemaIndex) -> None:
    assert {(e.group, e.version, e.kind) for e in index} == {
        ("kubeflow.org", "v1", "TFJob"),
        ("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        ("argoproj.io", "v1alpha1", "Workflow"),
    }
    tf = index.get(TFJOB)
    assert tf is not None and tf.crd == "tfjobs.kubeflow.org" and tf.namespaced
    assert tf.source.endswith("kubeflow.org_tfjobs.yaml")
    assert TFJOB in index and GVK("kubeflow.org", "v2", "TFJob") not in index
    assert index.versions("kubeflow.org", "TFJob") == ["v1"]


def test_a_kind_list_of_crds_is_read_like_separate_documents() -> None:
    items = [doc for _, doc in fixture_docs() if doc.get("kind") == "CustomResourceDefinition"]
    index = read_crds([("crds.yaml", {"apiVersion": "v1", "kind": "List", "items": items})])
    assert len(index) == 3
    assert index.get(JOBSET) is not None
    assert index.get(JOBSET).source == "crds.yaml items[1]"  # type: ignore[union-attr]


def test_versions_not_served_are_left_out_and_each_served_one_is_indexed() -> None:
    doc = crd_doc("kubeflow.org_tfjobs.yaml")
    v1 = doc["spec"]["versions"][0]
    doc["spec"]["versions"] = [
        {**copy.deepcopy(v1), "name": "v1beta1", "served": False, "storage": False},
        v1,
        {**copy.deepcopy(v1), "name": "v2", "storage": False},
    ]
    index = read_crds([("tf.yaml", doc)])
    assert sorted(index.versions("kubeflow.org", "TFJob")) == ["v1", "v2"]


def test_non_crd_documents_of_any_shape_are_ignored() -> None:
    docs = [("a", None), ("b", "text"), ("c", [1, 2]), ("d", {"kind": "ConfigMap"}), ("e", 3)]
    assert len(read_crds(docs)) == 0


def test_documents_not_given_as_label_document_pairs_are_an_input_error() -> None:
    with pytest.raises(InputError, match="pairs"):
        read_crds([crd_doc("kubeflow.org_tfjobs.yaml")])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (
            lambda d: d["spec"]["versions"][0].pop("schema"),
            "spec.versions[0].schema.openAPIV3Schema",
        ),
        (lambda d: d["spec"].pop("group"), "spec.group"),
        (lambda d: d["spec"]["names"].pop("kind"), "spec.names.kind"),
        (lambda d: d["spec"].update(versions=[]), "spec.versions"),
        (lambda d: d["spec"]["versions"][0].update(served="yes"), "spec.versions[0].served"),
        (lambda d: d["spec"].update(scope="Galaxy"), "spec.scope"),
        (
            lambda d: d["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
                "spec"
            ].update(properties=["tfReplicaSpecs"]),
            "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties",
        ),
        (
            lambda d: d["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
                "properties"
            ]["successPolicy"].update(type="text"),
            "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.successPolicy.type",
        ),
        (
            lambda d: d["spec"]["versions"][0]["schema"]["openAPIV3Schema"].update(required="spec"),
            "spec.versions[0].schema.openAPIV3Schema.required",
        ),
        (lambda d: d.update(apiVersion="apiextensions.k8s.io/v1beta1"), "apiVersion"),
    ],
)
def test_an_unusable_crd_is_an_error_naming_document_crd_and_field(mutate: Any, field: str) -> None:
    doc = crd_doc("kubeflow.org_tfjobs.yaml")
    mutate(doc)
    with pytest.raises(CRDError) as e:
        read_crds(
            [("crds/tf.yaml", doc), ("crds/js.yaml", crd_doc("jobset.x-k8s.io_jobsets.yaml"))]
        )
    (problem,) = e.value.problems
    assert problem.startswith(
        f"crds/tf.yaml: CustomResourceDefinition tfjobs.kubeflow.org: {field}:"
    )
    assert isinstance(e.value, InputError)


def test_every_unusable_crd_is_reported_at_once() -> None:
    a, b = crd_doc("kubeflow.org_tfjobs.yaml"), crd_doc("jobset.x-k8s.io_jobsets.yaml")
    a["spec"].pop("versions")
    b["spec"]["names"] = "JobSet"
    with pytest.raises(CRDError) as e:
        read_crds([("a.yaml", a), ("b.yaml", b)])
    assert [p.split(":")[0] for p in e.value.problems] == ["a.yaml", "b.yaml"]


def test_the_same_kind_defined_differently_twice_is_an_error_identical_twice_is_not() -> None:
    a = crd_doc("kubeflow.org_tfjobs.yaml")
    assert len(read_crds([("a.yaml", a), ("b.yaml", copy.deepcopy(a))])) == 1
    b = copy.deepcopy(a)
    b["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] = []
    with pytest.raises(
        CRDError,
        match=r"b.yaml: kubeflow.org/v1 TFJob is already defined differently by CustomResourceDefinition tfjobs.kubeflow.org in a.yaml",
    ):
        read_crds([("a.yaml", a), ("b.yaml", b)])


def test_a_schema_nested_absurdly_deep_is_an_error_not_a_crash() -> None:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        node = {"type": "object", "properties": {"a": node}}
    problems = check_schema(node, "s")
    assert len(problems) == 1 and "nested deeper than" in problems[0]


# --------------------------------------------------------------------------------------------
# Built-in kinds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "template_path"),
    [
        (GVK("batch", "v1", "Job"), ".spec.template"),
        (GVK("apps", "v1", "Deployment"), ".spec.template"),
        (GVK("apps", "v1", "StatefulSet"), ".spec.template"),
        (GVK("apps", "v1", "DaemonSet"), ".spec.template"),
        (GVK("apps", "v1", "ReplicaSet"), ".spec.template"),
        (GVK("batch", "v1", "CronJob"), ".spec.jobTemplate.spec.template"),
        (GVK("", "v1", "PodTemplate"), ".template"),
        (GVK("", "v1", "ReplicationController"), ".spec.template"),
    ],
)
def test_builtin_kinds_hold_pod_templates_where_kubernetes_says(
    kind: GVK, template_path: str
) -> None:
    schema = builtin_schema(kind)
    assert schema is not None
    r = walk(schema, template_path)
    assert r.outcome is Outcome.OK
    assert check_shape(r.node, Shape.POD_TEMPLATE_SPEC).outcome is Outcome.OK
    assert (
        check_shape(walk(schema, template_path + ".spec").node, Shape.POD_SPEC).outcome
        is Outcome.OK
    )
    assert (
        check_shape(walk(schema, template_path + ".metadata").node, Shape.OBJECT_META).outcome
        is Outcome.OK
    )


def test_builtin_job_paths_use_json_names_and_types_of_the_client_models() -> None:
    job = builtin_schema(JOB)
    assert (
        walk(job, ".spec.template.spec.containers[].livenessProbe.exec.command[0]").outcome
        is Outcome.OK
    )
    assert walk(job, ".spec.template.spec.containers[]._exec").outcome is Outcome.UNKNOWN
    labels = walk(job, ".spec.template.metadata.labels").node
    assert check_shape(labels, Shape.STRING_MAP).outcome is Outcome.OK
    assert (
        check_shape(walk(job, ".spec.template.spec.schedulerName").node, Shape.STRING).outcome
        is Outcome.OK
    )
    assert check_shape(walk(job, ".spec.parallelism").node, Shape.INTEGER).outcome is Outcome.OK
    assert describe(walk(job, ".metadata.creationTimestamp").node) == "a string"
    assert describe(walk(job, ".spec.template.spec.containers").node) == "an array of objects"
    # ``object`` in the models (an int-or-string port here) cannot be judged.
    port = walk(job, ".spec.template.spec.containers[].livenessProbe.httpGet.port")
    assert port.outcome is Outcome.OK
    assert check_shape(port.node, Shape.INTEGER).outcome is Outcome.CANNOT_JUDGE
    assert (
        walk(job, ".spec.template.spec.containers[].livenessProbe.httpGet.port.x").outcome
        is Outcome.CANNOT_JUDGE
    )


def test_builtin_typo_gets_the_closest_field() -> None:
    r = walk(builtin_schema(JOB), ".spec.template.spec.schedulername")
    assert r.outcome is Outcome.UNKNOWN and r.suggestions[0] == "schedulerName"
    assert r.step == 3


def test_builtin_schemas_are_finite_cached_and_only_for_known_kinds() -> None:
    assert builtin_schema(GVK("example.com", "v1", "Pod")) is None
    assert builtin_schema(JOB) is builtin_schema(JOB)
    assert set(BUILTIN_KINDS.values()) <= {
        n for n in dir(__import__("kubernetes.client.models").client.models)
    }
    props = model_schema("V1JSONSchemaProps")  # refers to itself: cut, not infinite
    assert json.dumps(props)
    assert walk(props, ".properties.x.type").outcome is Outcome.CANNOT_JUDGE
    with pytest.raises(KeyError):
        model_schema("V1NoSuchThing")


def test_builtin_required_fields_come_from_the_client_where_it_says() -> None:
    from kubernetes.client import models

    if not hasattr(models.V1PodSpec, "model_fields"):
        pytest.skip("this kubernetes client does not say which fields are required")
    assert "containers" in model_schema("V1PodSpec")["required"]
    assert "name" in model_schema("V1Container")["required"]


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def test_typo_step_is_unknown_with_the_closest_existing_name(index: SchemaIndex) -> None:
    r = walk(schema_of(index, TFJOB), ".spec.tfReplicaSpec[].template")
    assert r.outcome is Outcome.UNKNOWN and r.outcome.is_error
    assert (r.step, r.suggestions) == (1, ("tfReplicaSpecs",))
    assert r.message == '.spec has no field "tfReplicaSpec"; did you mean "tfReplicaSpecs"?'
    assert r.path == ".spec.tfReplicaSpec[].template"


def test_case_only_difference_is_suggested_first(index: SchemaIndex) -> None:
    r = walk(schema_of(index, TFJOB), ".spec.TFReplicaSpecs")
    assert r.suggestions[0] == "tfReplicaSpecs"


def test_unknown_step_without_close_names_lists_the_fields(index: SchemaIndex) -> None:
    r = walk(schema_of(index, JOBSET), ".spec.replicatedJobs[].zzz")
    assert r.outcome is Outcome.UNKNOWN and r.suggestions == ()
    assert r.message.startswith(
        '.spec.replicatedJobs[] has no field "zzz" (fields: dependsOn, groupName'
    )


def test_map_values_array_items_and_root_fields_are_known(index: SchemaIndex) -> None:
    tf = schema_of(index, TFJOB)
    assert (
        walk(tf, ".spec.tfReplicaSpecs.Worker.template.spec.containers[0].image").outcome
        is Outcome.OK
    )
    assert walk(tf, '.spec.tfReplicaSpecs["PS"].replicas').outcome is Outcome.OK
    for p in (".apiVersion", ".kind", ".metadata.name", ".metadata.labels.app", "."):
        assert walk(tf, p).outcome is Outcome.OK, p


def test_path_tokens_from_jq_are_walked_like_steps(index: SchemaIndex) -> None:
    tf = schema_of(index, TFJOB)
    r = check_path(tf, ("spec", "tfReplicaSpecs", "Worker", "template", "spec", "containers", 0))
    assert r.outcome is Outcome.OK and describe(r.node).startswith("an object with fields args")
    r = check_path(schema_of(index, JOBSET), ["spec", "replicatedJobs", {"start": 0, "end": 1}])
    assert r.outcome is Outcome.OK and r.steps[-1] == Slice(0, 1)
    assert describe(r.node) == "an array of objects"
    assert to_steps(["a", 1, Iterate()]) == (Key("a"), Index(1), Iterate())
    assert (
        format_path((Key("a"), Key("b/c"), Index(2), Iterate(), Slice(None, 3)))
        == '.a["b/c"][2][][:3]'
    )


@pytest.mark.parametrize("bad", ["spec.x", b"spec", 3, None, [True], [1.5], [{"x": 1}]])
def test_a_path_of_the_wrong_shape_is_an_input_error(bad: Any) -> None:
    with pytest.raises(InputError):
        check_path({"type": "object"}, bad)


def test_preserve_unknown_fields_cannot_be_judged_a_warning_not_an_error(
    index: SchemaIndex,
) -> None:
    r = walk(schema_of(index, WORKFLOW), ".spec.templates[].container.image")
    assert r.outcome is Outcome.CANNOT_JUDGE and not r.outcome.is_error
    assert r.step == 1
    assert "x-kubernetes-preserve-unknown-fields" in r.message and ".spec" in r.message


def test_additional_properties_true_and_untyped_nodes_cannot_be_judged() -> None:
    schema = {
        "type": "object",
        "properties": {
            "free": {"type": "object", "additionalProperties": True},
            "anything": {},
        },
    }
    r = check_path(schema, ("free", "x", "y"))
    assert r.outcome is Outcome.CANNOT_JUDGE and "additionalProperties: true" in r.message
    assert check_path(schema, ("anything", 0)).outcome is Outcome.CANNOT_JUDGE
    assert check_path(schema, ("anything", "x")).outcome is Outcome.CANNOT_JUDGE


def test_wrong_types_are_errors_with_what_the_node_is(index: SchemaIndex) -> None:
    js = schema_of(index, JOBSET)
    r = walk(js, ".spec.replicatedJobs.template")
    assert r.outcome is Outcome.WRONG_TYPE
    assert "is an array of objects" in r.message and ".spec.replicatedJobs[].template" in r.message
    r = walk(js, ".spec.replicatedJobs[].name.first")
    assert r.outcome is Outcome.WRONG_TYPE and "is a string" in r.message
    r = walk(js, ".spec.suspend[]")
    assert (
        r.outcome is Outcome.WRONG_TYPE
        and r.message == "cannot iterate over .spec.suspend: it is a boolean"
    )
    r = walk(js, ".spec.failurePolicy[0]")
    assert (
        r.outcome is Outcome.WRONG_TYPE
        and "cannot index .spec.failurePolicy with a number" in r.message
    )


def test_iterating_an_object_of_fixed_fields_cannot_be_judged(index: SchemaIndex) -> None:
    r = walk(schema_of(index, JOBSET), ".spec.failurePolicy[]")
    assert r.outcome is Outcome.CANNOT_JUDGE


def test_int_or_string_has_no_fields(index: SchemaIndex) -> None:
    tf = schema_of(index, TFJOB)
    q = ".spec.tfReplicaSpecs[].template.spec.containers[].resources.limits.cpu"
    node = walk(tf, q).node
    assert describe(node) == "an integer or a string"
    assert walk(tf, q + ".x").outcome is Outcome.WRONG_TYPE
    assert check_shape(node, Shape.INTEGER).outcome is Outcome.CANNOT_JUDGE


def test_combinators_add_their_fields_and_disagreeing_types_cannot_be_judged() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "allOf": [{"properties": {"x": {"type": "string"}}}]},
            "b": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
            "c": {"oneOf": [{"properties": {"y": {"type": "integer"}}}, {"properties": {"z": {}}}]},
        },
    }
    assert describe(check_path(schema, ("a", "x")).node) == "a string"
    assert check_path(schema, ("a", "nope")).outcome is Outcome.UNKNOWN
    assert check_path(schema, ("b", 0)).outcome is Outcome.CANNOT_JUDGE
    assert check_path(schema, ("c", "y")).outcome is Outcome.OK
    assert check_path(schema, ("c", "z")).outcome is Outcome.OK


def test_nullable_fields_are_walked_like_others() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "nullable": True, "properties": {"b": {"type": "string"}}}
        },
    }
    assert check_path(schema, ("a", "b")).outcome is Outcome.OK


def test_embedded_resources_know_apiversion_kind_and_metadata() -> None:
    # As in a Crossplane Composition: resources[].base is any Kubernetes object.
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "resources": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "base": {
                                    "type": "object",
                                    "x-kubernetes-embedded-resource": True,
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        },
                    }
                },
            }
        },
    }
    base = ".spec.resources[].base"
    assert describe(walk(schema, base + ".kind").node) == "a string"
    labels = walk(schema, base + ".metadata.labels")
    assert check_shape(labels.node, Shape.STRING_MAP).outcome is Outcome.OK
    assert walk(schema, base + ".metadata.labelz").suggestions[0] == "labels"
    assert walk(schema, base + ".spec.replicas").outcome is Outcome.CANNOT_JUDGE


def test_an_empty_or_malformed_root_schema_cannot_judge_but_knows_root_fields() -> None:
    for schema in ({}, None, [], {"type": 3}):
        assert check_path(schema, ("spec", "x")).outcome is Outcome.CANNOT_JUDGE
        assert check_path(schema, ("metadata", "labels")).outcome is Outcome.OK


def test_an_object_that_declares_no_fields_cannot_be_judged(index: SchemaIndex) -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object"}}}
    r = check_path(schema, ("spec", "x"))
    assert r.outcome is Outcome.CANNOT_JUDGE and "declares no fields" in r.message


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
schema_keys = st.sampled_from(
    ["type", "properties", "items", "additionalProperties", "allOf", "anyOf", "oneOf",
     "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string", "nullable", "required",
     "x-kubernetes-embedded-resource", "enum", "default"]
)  # fmt: skip
garbage_schemas = st.recursive(
    json_values,
    lambda inner: st.dictionaries(schema_keys | st.sampled_from(["a", "{b}"]), inner, max_size=5),
    max_leaves=30,
)
paths = st.lists(st.sampled_from(["a", "{b}", "type", 0, 1]) | st.just({"start": 0}), max_size=5)


@settings(max_examples=300, deadline=None)
@given(garbage_schemas, paths, st.sampled_from(list(Shape)))
def test_no_schema_however_malformed_makes_path_or_shape_checks_raise(
    schema: Any, path: list[Any], shape: Shape
) -> None:
    r = check_path(schema, path)
    assert isinstance(r.outcome, Outcome)
    check_shape(r.node, shape)
    describe(r.node)
    check_schema(schema)


# --------------------------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------------------------


def test_tfjob_template_is_a_pod_template_spec(index: SchemaIndex) -> None:
    node = walk(schema_of(index, TFJOB), ".spec.tfReplicaSpecs[].template").node
    assert check_shape(node, Shape.POD_TEMPLATE_SPEC).outcome is Outcome.OK
    c = check_shape(node, Shape.POD_SPEC)
    assert c.outcome is Outcome.WRONG_TYPE and c.message.endswith(
        "(no containers); its .spec is a PodSpec"
    )


def test_jobset_job_template_is_not_a_pod_template_and_says_where_one_is(
    index: SchemaIndex,
) -> None:
    js = schema_of(index, JOBSET)
    c = check_shape(walk(js, ".spec.replicatedJobs[].template").node, Shape.POD_TEMPLATE_SPEC)
    assert c.outcome is Outcome.WRONG_TYPE
    assert c.message == (
        "expected a PodTemplateSpec (metadata and a spec with containers), found an object "
        "with fields metadata, spec whose spec is not a PodSpec; its .spec.template is a PodTemplateSpec"
    )
    ok = walk(js, ".spec.replicatedJobs[].template.spec.template").node
    assert check_shape(ok, Shape.POD_TEMPLATE_SPEC).outcome is Outcome.OK


@pytest.mark.parametrize(
    ("expr", "shape", "found"),
    [
        (".spec.replicatedJobs", Shape.POD_TEMPLATE_SPEC, "an array of objects"),
        (".spec.replicatedJobs[].name", Shape.STRING_MAP, "a string"),
        (".spec.replicatedJobs[].replicas", Shape.STRING, "an integer"),
        (".spec.replicatedJobs[].name", Shape.INTEGER, "a string"),
        (".spec.suspend", Shape.OBJECT_META, "a boolean"),
        (
            ".spec.failurePolicy",
            Shape.OBJECT_META,
            "an object with fields maxRestarts, restartStrategy",
        ),
        (
            ".spec.replicatedJobs[].template.spec.template.spec.containers",
            Shape.POD_SPEC,
            "an array of objects",
        ),
    ],
)
def test_wrong_shapes_say_what_the_node_is(
    index: SchemaIndex, expr: str, shape: Shape, found: str
) -> None:
    c = check_shape(walk(schema_of(index, JOBSET), expr).node, shape)
    assert c.outcome is Outcome.WRONG_TYPE and c.found == found
    assert c.message.startswith(f"expected {shape.value}, found {found}")


@pytest.mark.parametrize(
    ("expr", "shape"),
    [
        (".spec.replicatedJobs[].template.spec.template.spec.schedulerName", Shape.STRING),
        (".spec.replicatedJobs[].replicas", Shape.INTEGER),
        (".spec.replicatedJobs[].template.spec.template.metadata.labels", Shape.STRING_MAP),
        (".spec.replicatedJobs[].template.spec.template.metadata", Shape.OBJECT_META),
        (".spec.replicatedJobs[].template.spec.template.spec", Shape.POD_SPEC),
        (".metadata", Shape.OBJECT_META),
    ],
)
def test_right_shapes_are_ok(index: SchemaIndex, expr: str, shape: Shape) -> None:
    assert check_shape(walk(schema_of(index, JOBSET), expr).node, shape).outcome is Outcome.OK


def test_preserve_unknown_template_and_bare_metadata_cannot_be_judged(index: SchemaIndex) -> None:
    doc = crd_doc("kubeflow.org_tfjobs.yaml")
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    replica = spec["properties"]["tfReplicaSpecs"]["additionalProperties"]
    replica["properties"]["template"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    tf = read_crds([("tf.yaml", doc)]).schema(TFJOB)
    c = check_shape(walk(tf, ".spec.tfReplicaSpecs[].template").node, Shape.POD_TEMPLATE_SPEC)
    assert (
        c.outcome is Outcome.CANNOT_JUDGE
        and "cannot tell whether it is a PodTemplateSpec" in c.message
    )
    # controller-gen without embedded ObjectMeta: the template's metadata is a bare object.
    bare = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {"containers": {"type": "array", "items": {"type": "object"}}},
            },
        },
    }
    c = check_shape(bare, Shape.POD_TEMPLATE_SPEC)
    assert c.outcome is Outcome.CANNOT_JUDGE
    assert c.message.endswith("; its metadata is an object with no declared fields")
    c = check_shape(
        {"type": "object", "properties": {"labels": {"type": "array"}}}, Shape.OBJECT_META
    )
    assert c.outcome is Outcome.WRONG_TYPE and c.message.endswith("whose labels is an array")
    assert check_shape({"type": "object"}, Shape.OBJECT_META).outcome is Outcome.CANNOT_JUDGE
    assert check_shape(None, Shape.STRING).outcome is Outcome.CANNOT_JUDGE


def test_describe_names_common_nodes() -> None:
    assert (
        describe({"type": "object", "additionalProperties": {"type": "string"}})
        == "a map of strings"
    )
    assert (
        describe({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}})
        == "an array of arrays"
    )
    assert describe({"type": "string", "enum": ["A", "B"]}) == "a string (one of A, B)"
    assert describe({"type": "object", "x-kubernetes-preserve-unknown-fields": True}) == (
        "an object with any fields (x-kubernetes-preserve-unknown-fields)"
    )
    assert describe({}) == "a value the schema does not describe"
    assert describe({"type": "object"}) == "an object with no declared fields"


# --------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------


def test_plain_expression_is_checked_without_a_sample(index: SchemaIndex) -> None:
    tf = schema_of(index, TFJOB)
    bad = check_expression(tf, ".spec.tfReplicaSpec[].template", shape=Shape.POD_TEMPLATE_SPEC)
    assert bad.plain and bad.outcome is Outcome.UNKNOWN
    assert bad.errors == [
        '.spec.tfReplicaSpec[].template: .spec has no field "tfReplicaSpec"; did you mean "tfReplicaSpecs"?'
    ]
    good = check_expression(tf, ".spec.tfReplicaSpecs[].template", shape=Shape.POD_TEMPLATE_SPEC)
    assert good.outcome is Outcome.OK and good.errors == [] and good.warnings == []


def test_plain_path_landing_on_the_wrong_shape_is_an_error(index: SchemaIndex) -> None:
    r = check_expression(
        schema_of(index, JOBSET), ".spec.replicatedJobs[].template", shape=Shape.POD_TEMPLATE_SPEC
    )
    assert r.outcome is Outcome.WRONG_TYPE
    assert r.errors[0].startswith(".spec.replicatedJobs[].template: expected a PodTemplateSpec")


def test_non_plain_expression_is_checked_at_every_location_on_the_sample(
    index: SchemaIndex,
) -> None:
    js = schema_of(index, JOBSET)
    sample = {"spec": {"replicatedJobs": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}}
    expr = '.spec.replicatedJobs[] | select(.name != "c") | .templat'
    r = check_expression(js, expr, sample=sample, locate=locate)
    assert not r.plain and len(r.locations) == 2
    assert [c.path.path for c in r.locations] == [
        ".spec.replicatedJobs[0].templat",
        ".spec.replicatedJobs[1].templat",
    ]
    assert r.outcome is Outcome.UNKNOWN and r.locations[0].path.suggestions == ("template",)
    assert len(r.errors) == 2
    ok = check_expression(
        js, expr + "e.spec.template", sample=sample, locate=locate, shape=Shape.POD_TEMPLATE_SPEC
    )
    assert ok.outcome is Outcome.OK


def test_expression_that_cannot_be_located_cannot_be_judged(index: SchemaIndex) -> None:
    js = schema_of(index, JOBSET)
    sample = {"spec": {}}
    for expr, note in [
        (".spec.replicas // 1", "cannot locate its paths: Invalid path expression with result 1"),
        (".spec.replicatedJobs[]?", "selects nothing on the sample: not checked"),
    ]:
        r = check_expression(js, expr, sample=sample, locate=locate)
        assert r.outcome is Outcome.CANNOT_JUDGE and r.locations == () and r.warnings == [note]
    r = check_expression(js, ".spec.x?", sample=sample)
    assert r.outcome is Outcome.CANNOT_JUDGE and "no sample" in r.note
    assert check_expression(
        js, ".a?", sample=sample, locate=lambda e, s: "engine says no"
    ).note.endswith("engine says no")
    assert "not a list" in check_expression(js, ".a?", sample=sample, locate=lambda e, s: 3).note
    assert (
        "path step 0"
        in check_expression(js, ".a?", sample=sample, locate=lambda e, s: [[1.5]]).note
    )


def test_an_expression_that_is_not_a_string_is_an_input_error(index: SchemaIndex) -> None:
    with pytest.raises(InputError):
        check_expression(schema_of(index, JOBSET), 3)  # type: ignore[arg-type]


def test_locations_are_deduplicated_and_bounded(index: SchemaIndex) -> None:
    js = schema_of(index, JOBSET)
    many = [["spec", "replicatedJobs", i, "name"] for i in range(500)]
    r = check_expression(js, "first(.x)", sample={}, locate=lambda e, s: many + many)
    assert len(r.locations) == MAX_LOCATIONS and r.outcome is Outcome.OK
    r = check_expression(js, "first(.x)", sample={}, locate=lambda e, s: [["spec"], ["spec"]])
    assert len(r.locations) == 1
