"""KartaPolicy objects (issue 36 item 1): the policy file's schema under ``spec``, checked by the
same code with every error at its field path from the object's root; the policy in force is
the file's rules, then each object's in name order; a file of objects works offline; the
validating webhook refuses an invalid one with the file's messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ENGINE, JOBSET, REGISTRY

from webhook.admission.handlers import mutate_object, validate_policy
from webhook.admission.review import decode, encode
from webhook.cli.main import main
from webhook.mutation.policy import EMPTY
from webhook.mutation.policyfile import PolicyError, parse_policy
from webhook.mutation.policyobject import (
    cluster_conflicts,
    cluster_part,
    combine,
    load_policies,
    parse_namespace_policy_object,
    parse_policy_object,
)

QUEUE = "kai.scheduler/queue"


def _object(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policies.karta-webhook.run.ai/v1alpha1",
        "kind": "KartaPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_an_objects_errors_are_the_files_at_their_path_under_spec() -> None:
    rules = [{"name": "kai", "labels": {"bad key": "x"}, "match": {"kinds": ["a/b/C"]}}]
    with pytest.raises(PolicyError) as e:
        parse_policy_object(_object("p", rules=rules))
    with pytest.raises(PolicyError) as f:
        parse_policy({"rules": rules})
    assert [(x.path, x.message) for x in e.value.errors] == [
        (f"spec.{x.path}", x.message) for x in f.value.errors
    ]
    assert e.value.errors[0].path.startswith("spec.rules[0] (kai).")
    assert str(e.value).startswith('KartaPolicy "p": invalid policy:')


@pytest.mark.parametrize(
    ("obj", "path", "says"),
    [
        ({**_object("p"), "spec": None}, "spec", "required"),
        ({**_object("p", rules=[]), "metadata": {}}, "metadata.name", "required"),
        ({**_object("P_1", rules=[])}, "metadata.name", ""),
        ({**_object("p", rules=[]), "apiVersion": "x/v1"}, "apiVersion", "policies.karta"),
        (_object("p"), "spec.rules", "required"),
    ],
)
def test_an_objects_own_fields(obj: dict[str, Any], path: str, says: str) -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy_object(obj)
    assert any(x.path == path and says in x.message for x in e.value.errors), e.value.errors


def test_the_file_first_then_objects_in_name_order() -> None:
    file = parse_policy({"rules": [{"name": "base", "labels": {QUEUE: "file"}}]})
    b = parse_policy_object(_object("b", rules=[{"name": "q", "labels": {QUEUE: "b", "x": "b"}}]))
    a = parse_policy_object(
        _object("a", operations=["UPDATE"], rules=[{"name": "q", "labels": {"x": "a"}}])
    )
    both = combine(file, [b, a])
    assert [r.name for r in both.rules] == ["base", "a/q", "b/q"]
    assert both.operations == ("CREATE", "UPDATE")
    obj = yaml.safe_load(JOBSET.read_text())
    m = mutate_object(REGISTRY, both, obj, ENGINE)
    assert m is not None
    written: set[tuple[str, str]] = set()
    for op in m.ops:  # a label set alone, or a labels map created with its keys
        if isinstance(op["value"], dict):
            written |= {(k, v) for k, v in op["value"].items() if isinstance(v, str)}
        else:
            written.add((op["path"].rsplit("/", 1)[-1].replace("~1", "/"), op["value"]))
    # without overwrite the first rule to set a key wins: the file's queue, a's x
    assert {(QUEUE, "file"), ("x", "a")} <= written
    assert not {(QUEUE, "b"), ("x", "b")} & written
    assert combine(file, []) is file
    closed = parse_policy_object(_object("c", failureMode="closed", rules=[]))
    assert combine(file, [closed]).failure_mode == "closed"
    alone = combine(EMPTY, [a])
    assert alone.operations == ("UPDATE",)


def test_a_file_of_objects_is_a_policy_for_mutate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "objects.yaml"
    f.write_text(
        yaml.safe_dump_all(
            [
                _object("team", rules=[{"name": "q", "labels": {QUEUE: "team-q"}}]),
                _object("sched", rules=[{"name": "s", "schedulerName": "kai-scheduler"}]),
            ]
        )
    )
    assert [r.name for r in load_policies(f).rules] == ["sched/s", "team/q"]
    assert main(["mutate", "-f", str(JOBSET), "--policy", str(f), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    tmpl = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert tmpl["metadata"]["labels"][QUEUE] == "team-q"
    assert tmpl["spec"]["schedulerName"] == "kai-scheduler"
    f.write_text(
        yaml.safe_dump_all([_object("bad", rules=[{"name": "q", "labels": {"a b": "x"}}])])
    )
    assert main(["mutate", "-f", str(JOBSET), "--policy", str(f)]) == 2
    err = capsys.readouterr().err
    assert "objects.yaml KartaPolicy/bad spec.rules[0] (q).labels['a b']: invalid key" in err, err


def _review(obj: Any, operation: str = "CREATE") -> Any:
    return decode(
        json.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "u",
                    "kind": {"group": "policies.karta-webhook.run.ai", "version": "v1alpha1",
                             "kind": "KartaPolicy"},
                    "resource": {"group": "policies.karta-webhook.run.ai", "version": "v1alpha1",
                                 "resource": "kartapolicies"},
                    "operation": operation,
                    "name": obj["metadata"].get("name", ""),
                    "object": obj,
                },
            }
        ).encode()
    )  # fmt: skip


def test_the_validating_webhook_refuses_an_invalid_policy_naming_its_field() -> None:
    bad = _object("p", rules=[{"name": "kai", "schedulerName": "Bad_Name"}])
    result = validate_policy(_review(bad))
    out = json.loads(encode(result.response))["response"]
    assert out["allowed"] is False and out["status"]["code"] == 422
    assert out["status"]["message"].startswith(
        'KartaPolicy "p" is invalid: spec.rules[0] (kai).schedulerName: '
    )
    good = _object("p", rules=[{"name": "kai", "schedulerName": "kai-scheduler"}])
    assert validate_policy(_review(good)).outcome == "allowed"


def test_the_audit_annotation_names_the_policies_applied() -> None:
    from helpers import review

    from webhook.admission.handlers import mutate

    file = parse_policy({"rules": [{"name": "base", "labels": {"a": "b"}}]})
    team = parse_policy_object(_object("team", rules=[{"name": "q", "labels": {QUEUE: "t"}}]))
    other = parse_policy_object(
        _object("other", rules=[{"name": "d", "match": {"kinds": ["Deployment"]},
                                  "labels": {"x": "y"}}])
    )  # fmt: skip
    obj = yaml.safe_load(JOBSET.read_text())
    req = decode(json.dumps(review(obj)).encode())
    got = json.loads(encode(mutate(req, REGISTRY, combine(file, [team, other]), ENGINE).response))
    assert got["response"]["auditAnnotations"]["policies"] == "file,team"
    alone = json.loads(encode(mutate(req, REGISTRY, file, ENGINE).response))
    assert "policies" not in alone["response"]["auditAnnotations"]  # the file alone: as before


# --------------------------------------------------------------------------- namespaced


def _team(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    obj = _object(name, **spec)
    obj["kind"] = "KartaNamespacePolicy"
    obj["metadata"]["namespace"] = namespace
    return obj


@pytest.mark.parametrize(
    ("rule", "path", "says"),
    [
        ({"name": "t", "schedulerName": "x"}, "spec.rules[0] (t).schedulerName",
         "may set only labels and annotations"),
        ({"name": "t", "labels": {"a": "b"}, "overwrite": True}, "spec.rules[0] (t).overwrite",
         "never overwrites"),
        ({"name": "t", "labels": {"a": "b"}, "match": {"namespaces": ["other"]}},
         "spec.rules[0] (t).match.namespaces", "its own namespace"),
        ({"name": "t", "labels": {"a b": "x"}}, "spec.rules[0] (t).labels['a b']", "invalid key"),
    ],
)  # fmt: skip
def test_a_namespaced_policy_may_set_only_labels_and_annotations_of_its_namespace(
    rule: dict[str, Any], path: str, says: str
) -> None:
    with pytest.raises(PolicyError) as e:
        parse_namespace_policy_object(_team("research", "t", rules=[rule]))
    assert any(x.path == path and says in x.message for x in e.value.errors), e.value.errors


def test_a_namespaced_policy_applies_in_its_namespace_after_the_cluster_and_changes_nothing_set() -> (
    None
):
    cluster = parse_policy_object(_object("c", rules=[{"name": "q", "labels": {QUEUE: "c"}}]))
    team = parse_namespace_policy_object(
        _team("research", "t", rules=[{"name": "r", "labels": {"team": "ml", QUEUE: "mine"}}])
    )
    elsewhere = parse_namespace_policy_object(
        _team("other", "t", rules=[{"name": "r", "labels": {"other": "x"}}])
    )
    both = combine(EMPTY, [cluster], [team, elsewhere])
    assert [r.name for r in both.rules] == ["c/q", "other/t/r", "research/t/r"]
    obj = yaml.safe_load(JOBSET.read_text())  # in namespace research
    m = mutate_object(REGISTRY, both, obj, ENGINE)
    assert m is not None
    written = {(op["path"].rsplit("/", 1)[-1].replace("~1", "/"), op["value"]) for op in m.ops}
    assert written == {(QUEUE, "c"), ("team", "ml")}  # the cluster's queue stays; not other's
    # refused at apply: the key a cluster rule sets
    [conflict] = cluster_conflicts(team, cluster_part(both), "research")
    assert conflict.path == f"spec.rules[0] (r).labels['{QUEUE}']"
    assert "set by the cluster's policy (rule 'c/q')" in conflict.message
    assert cluster_conflicts(elsewhere, cluster_part(both), "other") == []
