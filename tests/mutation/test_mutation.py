"""Planning patches (webhook.mutation.plan): escaping, politeness, order, created parents, matching."""

from __future__ import annotations

from helpers import ENGINE, JOBSET_SAMPLE, REGISTRY, SAMPLES, apply, policy, sample

from webhook.base.gvk import GVK
from webhook.mutation.plan import plan
from webhook.mutation.policyfile import parse_policy
from webhook.workload.locator import resolve


def test_keys_with_slash_are_escaped_and_patch_applies() -> None:
    obj = sample(*JOBSET_SAMPLE)
    _, ops = apply(obj, policy(labels={"kai.scheduler/queue": "research"}))
    paths = [op["path"] for op in ops]
    assert (
        "/spec/replicatedJobs/0/template/spec/template/metadata/labels/kai.scheduler~1queue"
        in paths
    )
    assert all(op["op"] == "add" for op in ops)


def test_existing_values_win_without_overwrite_and_lose_with_it() -> None:
    obj = sample(*JOBSET_SAMPLE)
    tmpl = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    tmpl.setdefault("metadata", {}).setdefault("labels", {})["team"] = "a"
    tmpl["spec"]["schedulerName"] = "team-scheduler"
    polite = policy(labels={"team": "b"}, schedulerName="kai-scheduler")
    out, _ = apply(obj, polite)
    t0 = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    t1 = out["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert t0["metadata"]["labels"]["team"] == "a"
    assert t0["spec"]["schedulerName"] == "team-scheduler"
    assert t1["metadata"]["labels"]["team"] == "b"
    assert t1["spec"]["schedulerName"] == "kai-scheduler"
    forceful = policy(labels={"team": "b"}, schedulerName="kai-scheduler", overwrite=True)
    out, _ = apply(obj, forceful)
    t0 = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert t0["metadata"]["labels"]["team"] == "b"
    assert t0["spec"]["schedulerName"] == "kai-scheduler"


def test_rules_apply_in_order_and_a_second_plan_is_empty() -> None:
    obj = sample(*JOBSET_SAMPLE)
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


def test_match_by_kind_namespace_component_and_instance() -> None:
    obj = sample(*JOBSET_SAMPLE)
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
    obj = sample(*JOBSET_SAMPLE)
    obj["metadata"]["name"] = "x" * 70
    w = resolve(REGISTRY.lookup(GVK.of(obj)), obj, ENGINE, full=False)
    p = plan(
        w,
        policy(labels={"owner": "$(workload.name)"}, annotations={"owner": "$(workload.name)"}),
        obj,
    )
    assert p.warnings and "not a valid label value" in p.warnings[0]
    assert all("annotations" in op["path"] for op in p.ops)


def test_the_api_servers_default_scheduler_counts_as_unset() -> None:
    """Built-in pod specs reach the webhook with ``schedulerName: default-scheduler`` filled in
    by the API server; a policy's scheduler replaces it without ``overwrite``, and a second
    plan changes nothing."""
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "n"},
        "spec": {
            "template": {
                "spec": {
                    "schedulerName": "default-scheduler",
                    "containers": [{"name": "c", "image": "i"}],
                }
            }
        },
    }
    out, ops = apply(obj, policy(schedulerName="kai-scheduler"))
    assert out["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler"
    assert ops == [
        {"op": "add", "path": "/spec/template/spec/schedulerName", "value": "kai-scheduler"}
    ]
    assert apply(out, policy(schedulerName="kai-scheduler"))[1] == []
