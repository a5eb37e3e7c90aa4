"""``mutate`` with a policy that reads namespaces (issue 36 items 3, 4): the input's Namespace
documents and ``--namespaces FILE`` give their labels and annotations; an unknown namespace or
a missing key is a warning on stderr, never an empty value; a bad ``--namespaces`` file is
exit 2 naming the document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from webhook.cli.main import main
from webhook.karta.loading import catalog_dir

JOBSET = catalog_dir() / "samples/jobset.x-k8s.io-jobset-v1alpha2/leader-workers.yaml"
POLICY = """\
rules:
- name: queue
  match: {namespaceSelector: {matchExpressions: [{key: kai-queue, operator: Exists}]}}
  labels: {kai.scheduler/queue: "$(namespace.labels['kai-queue'])"}
"""
NAMESPACE = (
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: research, labels: {kai-queue: gpu-q}}\n"
)


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(POLICY)
    return p


def _queues(doc: dict[str, object]) -> set[object]:
    spec = doc["spec"]
    assert isinstance(spec, dict)
    return {
        rj["template"]["spec"]["template"]
        .get("metadata", {})
        .get("labels", {})
        .get("kai.scheduler/queue")
        for rj in spec["replicatedJobs"]
    }


def test_namespace_documents_in_the_input_are_read_and_printed_as_they_are(
    tmp_path: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "in.yaml"
    f.write_text(NAMESPACE + "---\n" + JOBSET.read_text())
    assert main(["mutate", "-f", str(f), "--policy", str(policy)]) == 0
    ns, jobset = yaml.safe_load_all(capsys.readouterr().out)
    assert ns == yaml.safe_load(NAMESPACE)
    assert _queues(jobset) == {"gpu-q"}


def test_namespaces_from_a_file_and_a_kubectl_list(
    tmp_path: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [yaml.safe_load(NAMESPACE)],
    }
    for text in (NAMESPACE, json.dumps(listed)):
        ns = tmp_path / "ns.yaml"
        ns.write_text(text)
        args = ["mutate", "-f", str(JOBSET), "--policy", str(policy), "--namespaces", str(ns)]
        assert main([*args, "-o", "json"]) == 0
        assert _queues(json.loads(capsys.readouterr().out)) == {"gpu-q"}


def test_an_unknown_namespace_is_a_warning_and_nothing_written(
    policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mutate", "-f", str(JOBSET), "--policy", str(policy), "-o", "patch"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == []
    assert (
        "namespace 'research' is not known, so its namespaceSelector cannot be decided" in out.err
    )


def test_a_bad_namespaces_file_exits_2_naming_the_document(
    tmp_path: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = tmp_path / "ns.yaml"
    ns.write_text(NAMESPACE + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert (
        main(["mutate", "-f", str(JOBSET), "--policy", str(policy), "--namespaces", str(ns)]) == 2
    )
    err = capsys.readouterr().err
    assert "ns.yaml#1" in err and "not a Namespace" in err


def test_explain_names_the_policy_and_rule_of_each_operation(
    tmp_path: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import jsonpatch

    objects = tmp_path / "objects.yaml"
    objects.write_text(
        "apiVersion: policies.karta-webhook.run.ai/v1alpha1\nkind: KartaPolicy\n"
        "metadata: {name: sched}\nspec:\n  rules:\n  - {name: s, schedulerName: kai-scheduler}\n"
        "  - {name: q, labels: {kai.scheduler/queue: fixed}}\n"
    )
    f = tmp_path / "in.yaml"
    f.write_text(NAMESPACE + "---\n" + JOBSET.read_text())
    assert main(["mutate", "-f", str(JOBSET), "--policy", str(objects), "-o", "explain"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert {(e["policy"], e["rule"]) for e in said} == {("sched", "s"), ("sched", "q")}
    assert [e["rule"] for e in said] == sorted((e["rule"] for e in said), key="sq".index)
    # the operations, applied in order, give what mutate prints
    assert main(["mutate", "-f", str(JOBSET), "--policy", str(objects), "-o", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    ops = [{k: v for k, v in e.items() if k not in ("policy", "rule")} for e in said]
    assert jsonpatch.apply_patch(yaml.safe_load(JOBSET.read_text()), ops) == printed
    # a file policy's rules are its file's; the namespaces are read as for -o yaml
    assert main(["mutate", "-f", str(f), "--policy", str(policy), "-o", "explain"]) == 0
    ns_said, jobset_said = json.loads(capsys.readouterr().out)
    assert ns_said == [] and {e["rule"] for e in jobset_said} == {"queue"}
    assert {e["policy"] for e in jobset_said} == {str(policy)}


def test_the_example_policy_object_gives_the_namespaces_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = JOBSET.parents[3] / "examples" / "kartapolicy.yaml"
    ns = tmp_path / "ns.yaml"
    ns.write_text(NAMESPACE)
    args = ["mutate", "-f", str(JOBSET), "--policy", str(example), "--namespaces", str(ns)]
    assert main([*args, "-o", "json"]) == 0
    assert _queues(json.loads(capsys.readouterr().out)) == {"gpu-q"}
