"""Issue 48 item 5: tests that write themselves. ``mutate --crd`` defaults objects from the
CRD as ``test`` does (so its output is a test's expected result), ``test -o json`` names every
difference, ``test --update`` writes the computed results to the expected files. Real CLI, the
Volcano example's CRD, policy and suite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from webhook.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
VOLCANO = ROOT / "examples" / "volcano"


def test_mutate_with_the_crd_prints_the_expected_result(capsys: Any) -> None:
    base = ["mutate", "-f", str(VOLCANO / "mpi-job.yaml"), "--policy", str(VOLCANO / "policy.yaml")]
    want = yaml.safe_load((VOLCANO / "mpi-job-mutated.yaml").read_text())
    assert main([*base, "--crd", str(VOLCANO / "crd.yaml")]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == want
    assert main(base) == 0  # without the CRD its defaults (maxRetry, queue) are missing
    plain = yaml.safe_load(capsys.readouterr().out)
    assert plain != want
    assert "maxRetry" not in plain["spec"] and want["spec"]["maxRetry"] == 3


def _suite(tmp_path: Path) -> Path:
    suite = tmp_path / "volcano"
    shutil.copytree(VOLCANO, suite)
    expected = suite / "mpi-job-mutated.yaml"
    doc = yaml.safe_load(expected.read_text())
    doc["spec"]["maxRetry"] = 9
    doc["spec"]["queue"] = "other"
    doc["metadata"]["labels"] = {"a": "b"}
    doc["spec"]["tasks"][1]["replicas"] = 7
    expected.write_text(yaml.safe_dump(doc))
    return suite


def test_json_names_every_difference_and_update_writes_the_result(
    tmp_path: Path, capsys: Any
) -> None:
    suite = _suite(tmp_path)
    assert main(["test", str(suite), "-o", "json"]) == 1
    [failed] = [r for r in json.loads(capsys.readouterr().out)["results"] if r["result"] == "fail"]
    assert len(failed["differences"]) == 4
    assert failed["reason"] == "; ".join(failed["differences"])
    assert "/spec/tasks/1/replicas: want 7, got 2" in failed["differences"]
    assert main(["test", str(suite)]) == 1
    assert "(and 1 more)" in capsys.readouterr().out  # the table names three
    assert main(["test", str(suite), "--update"]) == 0
    assert "updated " in capsys.readouterr().err
    assert yaml.safe_load((suite / "mpi-job-mutated.yaml").read_text()) == yaml.safe_load(
        (VOLCANO / "mpi-job-mutated.yaml").read_text()
    )
    assert main(["test", str(suite)]) == 0


def test_update_leaves_an_inline_expectation_and_says_so(tmp_path: Path, capsys: Any) -> None:
    suite = tmp_path / "volcano"
    shutil.copytree(VOLCANO, suite)
    spec = yaml.safe_load((suite / "karta-test.yaml").read_text())
    spec["cases"][1]["mutated"]["spec"]["maxRetry"] = 5  # the inline no-tasks case
    (suite / "karta-test.yaml").write_text(yaml.safe_dump(spec))
    before = (suite / "karta-test.yaml").read_text()
    assert main(["test", str(suite), "--update"]) == 1
    assert "mutated is given inline: not updated" in capsys.readouterr().err
    assert (suite / "karta-test.yaml").read_text() == before


def test_validate_explain_says_what_each_path_matched_on_each_sample(capsys: Any) -> None:
    stem = "batch.volcano.sh-job-v1alpha1"
    f = ROOT / "catalog" / f"{stem}.yaml"
    assert main(["validate", "-f", str(f), "--explain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    template = "spec.structureDefinition.childComponents[0].specDefinition.podTemplateSpecPath"
    assert (
        f"  explain: {template} on {stem}/mpi-job.yaml: 2 matches: "
        "/spec/tasks/0/template, /spec/tasks/1/template"
    ) in lines
    ids = "spec.structureDefinition.childComponents[0].instanceIdPath"
    assert f'  explain: {ids} on {stem}/mpi-job.yaml: 2 matches: "mpimaster", "mpiworker"' in lines
    assert main(["validate", "-f", str(f)]) == 0
    assert "explain:" not in capsys.readouterr().out
