"""The core engine on realistic objects: resolution, mutation semantics, safety at load."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jq
import jsonpatch
import pytest
from helpers import ENGINE

from webhook import jqexpr
from webhook.definitions import (
    catalog_dir,
    jq_fields,
    load_definition,
    load_files,
)
from webhook.documents import read_documents
from webhook.errors import DefinitionError
from webhook.gvk import GVK
from webhook.handlers import mutate_object
from webhook.mutation import plan
from webhook.policy import parse_policy
from webhook.registry import load_registry
from webhook.workload import resolve

SAMPLES = catalog_dir() / "samples"
REGISTRY = load_registry()


def sample(stem: str, name: str) -> dict[str, Any]:
    [(_, obj)] = read_documents(SAMPLES / stem / name)
    return obj


def policy(**rule: Any) -> Any:
    return parse_policy({"rules": [{"name": "r", **rule}]})


def apply(obj: dict[str, Any], pol: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    m = mutate_object(REGISTRY, pol, obj, ENGINE)
    assert m is not None
    return jsonpatch.apply_patch(obj, m.ops), m.ops


JOBSET = ("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml")


def test_seed_jobset_says_12_gpus() -> None:
    obj = sample(*JOBSET)
    w = resolve(REGISTRY.lookup(GVK.of(obj)), obj, ENGINE)
    assert w.gpus == 12
    [rj] = [c for c in w.components if c.name == "replicatedjob"]
    assert [(i.id, i.replicas, i.gpus) for i in rj.instances] == [
        ("leader", 1, 4),
        ("workers", 2, 8),
    ]


def test_keys_with_slash_are_escaped_and_patch_applies() -> None:
    obj = sample(*JOBSET)
    _, ops = apply(obj, policy(labels={"kai.scheduler/queue": "research"}))
    paths = [op["path"] for op in ops]
    assert (
        "/spec/replicatedJobs/0/template/spec/template/metadata/labels/kai.scheduler~1queue"
        in paths
    )
    assert all(op["op"] == "add" for op in ops)


def test_existing_values_win_without_overwrite_and_lose_with_it() -> None:
    obj = sample(*JOBSET)
    tmpl = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    tmpl.setdefault("metadata", {}).setdefault("labels", {})["team"] = "a"
    tmpl["spec"]["schedulerName"] = "default-scheduler"
    polite = policy(labels={"team": "b"}, schedulerName="kai-scheduler")
    out, _ = apply(obj, polite)
    t0 = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    t1 = out["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert t0["metadata"]["labels"]["team"] == "a"
    assert t0["spec"]["schedulerName"] == "default-scheduler"
    assert t1["metadata"]["labels"]["team"] == "b"
    assert t1["spec"]["schedulerName"] == "kai-scheduler"
    forceful = policy(labels={"team": "b"}, schedulerName="kai-scheduler", overwrite=True)
    out, _ = apply(obj, forceful)
    t0 = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert t0["metadata"]["labels"]["team"] == "b"
    assert t0["spec"]["schedulerName"] == "kai-scheduler"


def test_rules_apply_in_order_and_a_second_plan_is_empty() -> None:
    obj = sample(*JOBSET)
    pol = parse_policy(
        {
            "rules": [
                {"name": "first", "labels": {"q": "one"}},
                {"name": "second", "labels": {"q": "two", "other": "x"}},
            ]
        }
    )
    out, _ = apply(obj, pol)
    labels = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
    assert labels["q"] == "one" and labels["other"] == "x"
    _, again = apply(out, pol)
    assert again == []


def test_missing_and_null_metadata_are_created_in_one_op() -> None:
    obj = sample("core-pod-v1", sorted(p.name for p in (SAMPLES / "core-pod-v1").glob("*.yaml"))[0])
    obj["metadata"]["labels"] = None
    obj["metadata"].pop("annotations", None)
    out, ops = apply(obj, policy(labels={"a": "1"}, annotations={"b": "$(workload.kind)"}))
    assert out["metadata"]["labels"] == {"a": "1"}
    assert out["metadata"]["annotations"] == {"b": "Pod"}
    assert {op["path"] for op in ops} >= {"/metadata/labels", "/metadata/annotations"}
    # The Pod keeps its identity: a template path of "." never replaces the object.
    assert out["kind"] == "Pod" and out["apiVersion"] == "v1"


def test_metadata_created_once_for_labels_and_annotations() -> None:
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "n"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    out, ops = apply(
        obj, policy(labels={"a": "1"}, annotations={"b": "2"}, schedulerName="kai-scheduler")
    )
    assert out["spec"]["template"]["metadata"] == {"labels": {"a": "1"}, "annotations": {"b": "2"}}
    assert len(ops) == 2


def test_absent_roles_and_lists_are_never_created() -> None:
    pj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}},
                }
            }
        },
    }
    out, ops = apply(pj, policy(labels={"a": "1"}))
    assert "Master" not in out["spec"]["pytorchReplicaSpecs"]
    assert len(ops) == 1
    rc = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "r", "namespace": "n"},
        "spec": {
            "headGroupSpec": {
                "template": {"spec": {"containers": [{"name": "ray-head", "image": "x"}]}}
            }
        },
    }
    out, ops = apply(rc, policy(labels={"a": "1"}))
    assert "workerGroupSpecs" not in out["spec"]
    assert [op["path"] for op in ops] == ["/spec/headGroupSpec/template/metadata"]


def test_match_by_kind_namespace_component_and_instance() -> None:
    obj = sample(*JOBSET)
    cases = {
        "kinds-hit": ({"kinds": ["jobset.x-k8s.io/JobSet"]}, 2),
        "kinds-bare": ({"kinds": ["JobSet"]}, 2),
        "kinds-miss": ({"kinds": ["/Pod"]}, 0),
        "ns-glob": ({"namespaces": ["res*"]}, 2),
        "ns-miss": ({"namespaces": ["team-*"]}, 0),
        "instance": ({"instances": ["work*"]}, 1),
        "component-miss": ({"components": ["nope"]}, 0),
    }
    for name, (match, templates) in cases.items():
        w = resolve(REGISTRY.lookup(GVK.of(obj)), obj, ENGINE, full=False)
        p = plan(w, policy(match=match, labels={"x": "$(component)-$(instance)"}), obj)
        assert p.templates_mutated == templates, name
    w = resolve(REGISTRY.lookup(GVK.of(obj)), obj, ENGINE, full=False)
    p = plan(w, policy(labels={"x": "$(component)-$(instance)"}), obj)
    values = [str(op["value"]) for op in p.ops]
    assert len(values) == 2
    assert "replicatedjob-leader" in values[0] and "replicatedjob-workers" in values[1]


def test_unrenderable_label_value_is_skipped_with_warning() -> None:
    obj = sample(*JOBSET)
    obj["metadata"]["name"] = "x" * 70
    w = resolve(REGISTRY.lookup(GVK.of(obj)), obj, ENGINE, full=False)
    p = plan(
        w,
        policy(labels={"owner": "$(workload.name)"}, annotations={"owner": "$(workload.name)"}),
        obj,
    )
    assert p.warnings and "not a valid label value" in p.warnings[0]
    assert all("annotations" in op["path"] for op in p.ops)


def test_kind_without_definition_is_left_alone() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Unknown", "metadata": {"name": "u"}}
    assert mutate_object(REGISTRY, policy(labels={"a": "b"}), obj, ENGINE) is None


def test_object_of_wrong_shape_gives_warnings_not_exceptions() -> None:
    obj = sample(*JOBSET)
    obj["spec"]["replicatedJobs"] = "not a list"
    w = resolve(REGISTRY.lookup(GVK.of(obj)), obj, ENGINE)
    assert w.warnings
    assert plan(w, policy(labels={"a": "b"}), obj).ops == []


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("env.HOME", "env"),
        ("$ENV.PATH", "$ENV"),
        ("input_filename", "input_filename"),
        ('"\\(env)"', "env"),
    ],
)
def test_definition_reading_the_environment_is_refused_at_load(expr: str, reason: str) -> None:
    doc = copy.deepcopy(next(iter(read_documents(catalog_dir() / "batch-job-v1.yaml")))[1])
    doc["spec"]["structureDefinition"]["rootComponent"]["scaleDefinition"]["replicasPath"] = expr
    with pytest.raises(DefinitionError) as e:
        load_definition(doc, "test.yaml")
    assert "spec.structureDefinition.rootComponent.scaleDefinition.replicasPath" in str(e.value)
    assert reason in str(e.value)


def test_sandbox_has_no_environment_and_is_bounded() -> None:
    # Even past the screen, the sandbox child has an empty environment.
    out = ENGINE.values("$ENV | length", {})
    assert out.items == [0]
    slow = ENGINE.values("def f: f; f", {}, timeout=0.5)
    assert slow.error and "timed out" in slow.error
    assert ENGINE.values(".a + 1", {"a": 1}).items == [2]  # a fresh child after the kill
    assert ENGINE.compile_errors([".a |"])[0]


def test_iterating_absent_list_is_absent_not_error() -> None:
    out = ENGINE.locations(".spec.workerGroupSpecs[].template", {"spec": {}})
    assert out.absent and out.error is None and out.items == []
    out = ENGINE.locations(".spec.x[] | select(.a) | .t", {"spec": {}})
    assert out.absent and out.error is None
    out = ENGINE.locations(".spec.x[] | {a: .}", {"spec": {"x": [1]}})
    assert out.error and "Invalid path expression" in out.error


def _plain_catalog_cases() -> list[Any]:
    cases = []
    for karta in load_files([catalog_dir()]):
        stem = Path(karta.source).stem
        objs = [
            obj for f in sorted((SAMPLES / stem).glob("*.yaml")) for _, obj in read_documents(f)
        ]
        for field in jq_fields(karta):
            if field.subject == "workload" and jqexpr.plain(field.expr) is not None:
                cases.append(pytest.param(field.expr, objs, id=f"{stem}:{field.path}"))
    return cases


@pytest.mark.parametrize(("expr", "objs"), _plain_catalog_cases())
def test_native_walk_equals_libjq_on_every_catalog_path(expr: str, objs: list[Any]) -> None:
    program = jq.compile(f"[path({expr})]")
    for obj in objs:
        try:
            want = program.input_value(obj).first()
        except ValueError as e:
            got = ENGINE.locations(expr, obj)
            assert got.items == [] and (got.absent or got.error), (expr, str(e))
            continue
        got = ENGINE.locations(expr, obj)
        assert [list(p) for p, _ in got.items] == want


def _review(obj: dict[str, Any], operation: str) -> Any:
    from webhook.admission import Request

    return Request(
        uid="u",
        operation=operation,
        kind=GVK.of(obj),
        resource={},
        sub_resource="",
        name=obj["metadata"]["name"],
        namespace=obj["metadata"].get("namespace", ""),
        object=obj,
        old_object=obj if operation == "UPDATE" else None,
        dry_run=False,
    )


def test_update_is_mutated_only_when_the_policy_asks() -> None:
    from webhook import handlers

    obj = sample(*JOBSET)
    create_only = policy(labels={"a": "1"})
    assert handlers.mutate(_review(obj, "UPDATE"), REGISTRY, create_only, ENGINE).response.patch is None
    assert handlers.mutate(_review(obj, "CREATE"), REGISTRY, create_only, ENGINE).response.patch
    both = parse_policy(
        {"operations": ["CREATE", "UPDATE"], "rules": [{"name": "r", "labels": {"a": "1"}}]}
    )
    assert handlers.mutate(_review(obj, "UPDATE"), REGISTRY, both, ENGINE).response.patch


def _nested_karta(expr: str) -> Any:
    root = {
        "name": "thing",
        "kind": {"group": "example.com", "version": "v1", "kind": "Thing"},
        "statusDefinition": {},
        "specDefinition": {"podTemplateSpecPath": expr},
    }
    doc = {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "thing"},
        "spec": {"structureDefinition": {"rootComponent": root}},
    }
    return load_definition(doc, "test.yaml")


def test_ids_from_nested_locations_tell_every_instance_apart() -> None:
    """Without instanceIdPath, ids come from the locations; where the first differing step
    repeats (two roles in group 0), the steps that differ are joined so no two are alike."""
    karta = _nested_karta(".spec.groups[].roles[].template")
    tmpl = {"spec": {"containers": [{"name": "c", "image": "x"}]}}

    def ids(groups: Any) -> list[str]:
        obj = {"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"groups": groups}}
        return [i.id for _, i in resolve(karta, obj, ENGINE).instances]

    assert ids([{"roles": [{"template": tmpl}, {"template": tmpl}]}, {"roles": []}]) == ["0", "1"]
    both = [{"roles": [{"template": tmpl}, {"template": tmpl}]}, {"roles": [{"template": tmpl}]}]
    assert ids(both) == ["0-0", "0-1", "1-0"]
    by_key = {"a": {"roles": {"x": {"template": tmpl}, "y": {"template": tmpl}}}}
    by_key["b"] = {"roles": {"x": {"template": tmpl}}}
    assert ids(by_key) == ["a-x", "a-y", "b-x"]
    assert ids([{"roles": [{"template": tmpl}]}, {"roles": [{"template": tmpl}]}]) == ["0", "1"]
