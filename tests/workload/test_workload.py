"""Resolution (webhook.workload.locator) on realistic objects: instances, ids, GPUs, absent parts."""

from __future__ import annotations

from typing import Any

from helpers import ENGINE, JOBSET_SAMPLE, REGISTRY, apply, policy, sample

from webhook.base.gvk import GVK
from webhook.karta.loading import load_definition
from webhook.mutation.plan import plan
from webhook.workload.locator import resolve


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


def test_seed_jobset_says_12_gpus() -> None:
    obj = sample(*JOBSET_SAMPLE)
    w = resolve(REGISTRY.lookup(GVK.of(obj)), obj, ENGINE)
    assert w.gpus == 12
    [rj] = [c for c in w.components if c.name == "replicatedjob"]
    assert [(i.id, i.replicas, i.gpus) for i in rj.instances] == [
        ("leader", 1, 4),
        ("workers", 2, 8),
    ]


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


def test_object_of_wrong_shape_gives_warnings_not_exceptions() -> None:
    obj = sample(*JOBSET_SAMPLE)
    obj["spec"]["replicatedJobs"] = "not a list"
    w = resolve(REGISTRY.lookup(GVK.of(obj)), obj, ENGINE)
    assert w.warnings
    assert plan(w, policy(labels={"a": "b"}), obj).ops == []


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


def test_ids_that_do_not_fit_are_taken_from_the_locations_with_a_warning_that_says_why() -> None:
    obj = sample(*JOBSET_SAMPLE)
    karta = REGISTRY.lookup(GVK.of(obj))
    jobs = obj["spec"]["replicatedJobs"]
    cases = [
        ("", '""'),
        (3, "a number"),
        (None, "null"),
        ({"a": "b"}, "an object"),
    ]
    for bad, said in cases:
        jobs[1]["name"] = bad
        w = resolve(karta, obj, ENGINE, full=False)
        [rj] = [c for c in w.components if c.name == "replicatedjob"]
        assert [i.id for i in rj.instances] == ["0", "1"]
        assert w.warnings == (
            f"component 'replicatedjob': instanceIdPath gave {said}, not a non-empty string; "
            "ids taken from the locations",
        )
