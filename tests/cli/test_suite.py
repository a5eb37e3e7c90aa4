"""``karta-webhook test``: test suites of definitions (karta-test.yaml), pass/fail per check.

The shipped example (examples/volcano) must pass; each kind of wrong expectation fails with
its reason; unusable suites exit 2 naming the file and field.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli.console import EXIT_FINDING, EXIT_INPUT, EXIT_OK
from webhook.cli.main import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
VOLCANO = EXAMPLES / "volcano"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A copy of the Volcano example to break."""
    d = tmp_path / "volcano"
    shutil.copytree(VOLCANO, d)
    return d


def edit(path: Path, change: Any) -> None:
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def run_json(path: Path, capsys: Any) -> tuple[int, dict[str, Any]]:
    code = main(["test", str(path), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def rows(out: dict[str, Any], case: str, check: str) -> list[dict[str, Any]]:
    return [r for r in out["results"] if r["case"] == case and r["check"] == check]


def test_every_shipped_example_passes() -> None:
    """The examples as a user runs them: the installed entry point on the directory."""
    proc = subprocess.run(
        [sys.executable, "-m", "webhook", "test", str(EXAMPLES)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["ID", "TEST", "CASE", "CHECK", "RESULT", "REASON"]
    assert lines[-1] == "7 passed, 0 failed"
    assert any(ln.split()[2:5] == ["mpi-job", "mutated", "pass"] for ln in lines[1:-2])


def test_json_output_lists_every_check(capsys: Any) -> None:
    code, out = run_json(VOLCANO / "karta-test.yaml", capsys)
    assert code == EXIT_OK
    assert (out["passed"], out["failed"]) == (7, 0)
    checks = [(r["case"], r["check"], r["result"]) for r in out["results"]]
    assert checks == [
        ("batch-volcano-sh-job-v1alpha1", "valid", "pass"),
        ("mpi-job", "templates", "pass"),
        ("mpi-job", "gpus", "pass"),
        ("mpi-job", "mutated", "pass"),
        ("no-tasks", "templates", "pass"),
        ("no-tasks", "gpus", "pass"),
        ("no-tasks", "mutated", "pass"),
    ]
    assert {r["test"] for r in out["results"]} == {"volcano-job"}


def test_wrong_expectations_fail_with_their_reasons(suite: Path, capsys: Any) -> None:
    def change(doc: dict[str, Any]) -> None:
        case = doc["cases"][0]
        case["templates"] = ["/spec/tasks/0/template", "/spec/tasks/2/template"]
        case["gpus"] = 4

    edit(suite / "karta-test.yaml", change)
    edit(
        suite / "mpi-job-mutated.yaml",
        lambda d: d["spec"]["tasks"][1]["template"]["spec"].update(schedulerName="volcano"),
    )
    code, out = run_json(suite, capsys)
    assert code == EXIT_FINDING
    [templates] = rows(out, "mpi-job", "templates")
    assert templates["result"] == "fail"
    assert (
        templates["reason"] == "missing /spec/tasks/2/template; unexpected /spec/tasks/1/template"
    )
    [gpus] = rows(out, "mpi-job", "gpus")
    assert (gpus["result"], gpus["reason"]) == ("fail", "want 4, got 8")
    [mutated] = rows(out, "mpi-job", "mutated")
    assert mutated["result"] == "fail"
    assert mutated["reason"] == (
        '/spec/tasks/1/template/spec/schedulerName: want "volcano", got "kai-scheduler"'
    )
    assert out["failed"] == 3


def test_an_invalid_definition_fails_its_validity_check(suite: Path, capsys: Any) -> None:
    def typo(doc: dict[str, Any]) -> None:
        child = doc["spec"]["structureDefinition"]["childComponents"][0]
        child["specDefinition"]["podTemplateSpecPath"] = ".spec.task[].template"

    edit(suite / "karta.yaml", typo)
    code, out = run_json(suite, capsys)
    assert code == EXIT_FINDING
    [valid] = rows(out, "batch-volcano-sh-job-v1alpha1", "valid")
    assert valid["result"] == "fail" and 'did you mean "tasks"?' in valid["reason"]
    [templates] = rows(out, "mpi-job", "templates")
    assert templates["result"] == "fail" and "missing /spec/tasks/0/template" in templates["reason"]


def test_a_case_of_a_kind_without_definition_fails(suite: Path, capsys: Any) -> None:
    edit(
        suite / "karta-test.yaml",
        lambda d: d["cases"][1]["object"].update(apiVersion="batch.volcano.sh/v1beta1"),
    )
    code, out = run_json(suite, capsys)
    assert code == EXIT_FINDING
    failed = [r for r in out["results"] if r["result"] == "fail"]
    assert {r["case"] for r in failed} == {"no-tasks"} and len(failed) == 3
    assert all(
        "no usable definition for batch.volcano.sh/v1beta1 Job" in r["reason"] for r in failed
    )


def test_the_table_has_one_line_per_check_and_a_summary(suite: Path, capsys: Any) -> None:
    edit(suite / "karta-test.yaml", lambda d: d["cases"][0].update(gpus=1))
    assert main(["test", str(suite / "karta-test.yaml")]) == EXIT_FINDING
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + 7 + 2
    [gpus] = [ln for ln in lines if " gpus " in ln and "mpi-job" in ln]
    assert gpus.split()[4:] == ["fail", "want", "1,", "got", "8"]
    assert lines[-1] == "6 passed, 1 failed"


def test_several_suites_under_a_directory_are_all_run(tmp_path: Path, capsys: Any) -> None:
    for name in ("a", "b"):
        shutil.copytree(VOLCANO, tmp_path / name)
        edit(tmp_path / name / "karta-test.yaml", lambda d: d.pop("name"))
    code, out = run_json(tmp_path, capsys)
    assert code == EXIT_OK
    assert [r["test"] for r in out["results"]].count("a") == 7
    assert {r["test"] for r in out["results"]} == {"a", "b"}


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda d: d.update(definitions=["missing.yaml"]), "definitions[0]: "),
        (lambda d: d.update(crds="nope.yaml"), "crds[0]: "),
        (lambda d: d.update(polcy="policy.yaml"), "polcy: unknown field"),
        (lambda d: d["cases"][0].update(gpus="eight"), "cases[0].gpus: must be a non-negative"),
        (lambda d: d["cases"][0].update(templates=["spec/tasks/0"]), "is not a JSON pointer"),
        (
            lambda d: d["cases"][0].update(object="policy.yaml"),
            "cases[0].object: must be a Kubernetes object",
        ),
        (lambda d: d["cases"][1].pop("object"), "cases[1].object: required field is missing"),
        (
            lambda d: [d["cases"][1].pop(k) for k in ("templates", "gpus", "mutated")],
            "cases[1]: give what to check",
        ),
        (lambda d: d.update(definitions=["policy.yaml"]), "no Karta definition in it"),
        (lambda d: d.update(cases={}), "cases: must be a list"),
        (lambda d: d.update(policy={"rules": [{"labels": {"a": "b"}}]}), "policy"),
    ],
)
def test_an_unusable_suite_exits_2_naming_file_and_field(
    suite: Path, change: Any, fragment: str, capsys: Any
) -> None:
    edit(suite / "karta-test.yaml", change)
    assert main(["test", str(suite)]) == EXIT_INPUT
    captured = capsys.readouterr()
    assert fragment in captured.err, captured.err
    assert "karta-test.yaml" in captured.err or "policy" in captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_unusable_files_exit_2(tmp_path: Path, suite: Path, capsys: Any) -> None:
    assert main(["test", str(tmp_path / "nothing-here")]) == EXIT_INPUT
    assert "no such file or directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["test", str(empty)]) == EXIT_INPUT
    assert "no karta-test.yaml found" in capsys.readouterr().err
    (suite / "karta-test.yaml").write_text("cases: [\n")
    assert main(["test", str(suite)]) == EXIT_INPUT
    assert "not valid YAML/JSON" in capsys.readouterr().err
    (suite / "karta-test.yaml").write_text("a: 1\n---\nb: 2\n")
    assert main(["test", str(suite)]) == EXIT_INPUT
    assert "a test suite is one YAML document" in capsys.readouterr().err


def test_the_bundled_catalog_can_be_tested_without_definitions(tmp_path: Path, capsys: Any) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ml"},
        "spec": {
            "parallelism": 2,
            "template": {
                "spec": {
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
                }
            },
        },
    }
    (tmp_path / "karta-test.yaml").write_text(
        yaml.safe_dump(
            {
                "catalog": True,
                "cases": [{"object": job, "templates": ["/spec/template"], "gpus": 2}],
            }
        )
    )
    code, out = run_json(tmp_path, capsys)
    assert code == EXIT_OK, out
    assert [(r["check"], r["result"]) for r in out["results"]] == [
        ("templates", "pass"),
        ("gpus", "pass"),
    ]
