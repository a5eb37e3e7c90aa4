"""``karta-webhook validate``: output lines and exit codes."""

from __future__ import annotations

import copy
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_validation import BASE, SAMPLE  # tests/ is on sys.path ("prepend" import mode)

from webhook.base.documents import read_documents
from webhook.cli.console import EXIT_FINDING, EXIT_INPUT, EXIT_OK
from webhook.cli.main import main
from webhook.karta.loading import catalog_dir

REPO = Path(__file__).resolve().parents[2]
#: the line ``validate`` ends an OK report of a whole-template definition with
CARRIED = (
    "  note: policy fields carried: labels, annotations, schedulerName, priorityClassName, "
    "nodeSelector, tolerations, runtimeClassName\n"
)
JOBSET = catalog_dir() / "jobset.x-k8s.io-jobset-v1alpha2.yaml"


def write(path: Path, *docs: Any) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    d = tmp_path / "samples" / "jobset"
    d.mkdir(parents=True)
    write(d / "train.yaml", SAMPLE)
    return d.parent


def broken() -> dict[str, Any]:
    d = copy.deepcopy(BASE)
    d["metadata"]["name"] = "broken"
    c = d["spec"]["structureDefinition"]["childComponents"][0]
    c["specDefinition"]["podTemplateSpecPath"] = ".spec.replicatedJob[].template.spec.template"
    c["ownerRef"] = "nobody"
    return d


def test_ok_against_given_samples(tmp_path: Path, samples: Path, capsys: Any) -> None:
    f = write(tmp_path / "k.yaml", BASE)
    assert main(["validate", "-f", str(f), "--samples", str(samples)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out == (
        "OK jobset (jobset.x-k8s.io/v1alpha2 JobSet): checked against 1 sample(s)\n" + CARRIED
    )


def test_invalid_lists_every_error_at_its_field(tmp_path: Path, samples: Path, capsys: Any) -> None:
    f = write(tmp_path / "k.yaml", BASE, broken())
    assert main(["validate", "-f", str(f), "--samples", str(samples)]) == EXIT_FINDING
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("OK jobset ")
    assert lines[1] == CARRIED.rstrip("\n")
    assert lines[2] == "INVALID broken"
    assert not any("policy fields" in ln for ln in lines[2:])  # said of valid definitions only
    child = "spec.structureDefinition.childComponents[0]"
    assert (
        f"  {child}.ownerRef: child component 'replicatedjob' has owner ref to non-existing "
        "component 'nobody'" in lines
    )
    assert any(
        ln.startswith(f"  {child}.specDefinition.podTemplateSpecPath: finds nothing")
        for ln in lines
    )
    assert any(ln.startswith("  warning: ") and "absent (null)" in ln for ln in lines)


def test_default_samples_are_the_bundled_catalogs(capsys: Any) -> None:
    assert main(["validate", "-f", str(JOBSET)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("OK jobset-x-k8s-io-jobset-v1alpha2 (jobset.x-k8s.io/v1alpha2 JobSet)")
    assert "checked against" in out and "no samples" not in out


def test_no_samples_is_said_on_the_ok_line(tmp_path: Path, capsys: Any) -> None:
    f = write(tmp_path / "k.yaml", BASE)
    empty = tmp_path / "none"
    empty.mkdir()
    assert main(["validate", "-f", str(f), "--samples", str(empty)]) == EXIT_OK
    assert capsys.readouterr().out == (
        "OK jobset (jobset.x-k8s.io/v1alpha2 JobSet): no samples found; checked structure and jq only\n"
        + CARRIED
    )


def test_require_samples_makes_no_samples_invalid(tmp_path: Path, capsys: Any) -> None:
    f = write(tmp_path / "k.yaml", BASE)
    empty = tmp_path / "none"
    empty.mkdir()
    code = main(["validate", "-f", str(f), "--samples", str(empty), "--require-samples"])
    assert code == EXIT_FINDING
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "INVALID jobset"
    assert "no sample of jobset.x-k8s.io/v1alpha2 JobSet found" in lines[1]


def test_samples_from_several_dirs(tmp_path: Path, samples: Path, capsys: Any) -> None:
    other = tmp_path / "other"
    other.mkdir()
    write(other / "second.yaml", SAMPLE)
    f = write(tmp_path / "k.yaml", BASE)
    assert main(["validate", "-f", str(f), "--samples", str(samples), "--samples", str(other)]) == 0
    assert "checked against 2 sample(s)" in capsys.readouterr().out


def test_non_karta_document_is_an_error_line(tmp_path: Path, samples: Path, capsys: Any) -> None:
    f = write(tmp_path / "k.yaml", SAMPLE, BASE)
    assert main(["validate", "-f", str(f), "--samples", str(samples)]) == EXIT_FINDING
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"INVALID {f}#0: not a Karta (apiVersion 'jobset.x-k8s.io/v1alpha2'")
    assert lines[1].startswith("OK jobset ")


def test_stdin(monkeypatch: Any, samples: Path, capsys: Any) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(yaml.safe_dump(broken())))
    assert main(["validate", "-f", "-", "--samples", str(samples)]) == EXIT_FINDING
    assert capsys.readouterr().out.startswith("INVALID broken")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "cannot read"), ("a: [\n", "not valid YAML/JSON")],
)
def test_unreadable_input_exits_2(
    tmp_path: Path, content: str | None, fragment: str, capsys: Any
) -> None:
    f = tmp_path / "k.yaml"
    if content is not None:
        f.write_text(content)
    assert main(["validate", "-f", str(f)]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert str(f) in err and fragment in err and "Traceback" not in err


def test_missing_samples_dir_exits_2(tmp_path: Path, capsys: Any) -> None:
    f = write(tmp_path / "k.yaml", BASE)
    assert main(["validate", "-f", str(f), "--samples", str(tmp_path / "nope")]) == EXIT_INPUT
    assert "nope" in capsys.readouterr().err


def test_unreadable_sample_is_a_warning(tmp_path: Path, samples: Path, capsys: Any) -> None:
    (samples / "bad.yaml").write_text("a: [\n")
    f = write(tmp_path / "k.yaml", BASE)
    assert main(["validate", "-f", str(f), "--samples", str(samples)]) == EXIT_OK
    captured = capsys.readouterr()
    assert "bad.yaml" in captured.err and "checked against 1 sample(s)" in captured.out


def test_subprocess_exit_codes(tmp_path: Path, samples: Path) -> None:
    good = write(tmp_path / "good.yaml", BASE)
    bad = write(tmp_path / "bad.yaml", broken())

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "webhook", "validate", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )

    ok = run("-f", str(good), "--samples", str(samples))
    assert ok.returncode == 0, ok.stderr
    invalid = run("-f", str(bad), "--samples", str(samples))
    assert invalid.returncode == 1
    assert invalid.stdout.startswith("INVALID broken")
    missing = run("-f", str(tmp_path / "missing.yaml"))
    assert missing.returncode == 2
    assert "missing.yaml" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.parametrize(
    "spec",
    [["a list"], "a string", {"structureDefinition": "a string"}, {"structureDefinition": []}],
)
def test_spec_of_the_wrong_shape_is_invalid_not_a_traceback(
    tmp_path: Path, samples: Path, spec: Any, capsys: Any
) -> None:
    d = copy.deepcopy(BASE)
    d["spec"] = spec
    f = write(tmp_path / "k.yaml", d)
    assert main(["validate", "-f", str(f), "--samples", str(samples)]) == EXIT_FINDING
    out = capsys.readouterr().out
    assert out.startswith("INVALID jobset\n") and "spec" in out


# --------------------------------------------------------------------------- --crd

VOLCANO = REPO / "examples" / "volcano"
CRDS = REPO / "tests" / "crds"


def volcano_typo(tmp_path: Path) -> Path:
    d = yaml.safe_load((VOLCANO / "karta.yaml").read_text())
    child = d["spec"]["structureDefinition"]["childComponents"][0]
    child["specDefinition"]["podTemplateSpecPath"] = ".spec.task[].template"
    return write(tmp_path / "typo.yaml", d)


def test_crd_finds_a_typo_no_sample_could(tmp_path: Path, capsys: Any) -> None:
    f = volcano_typo(tmp_path)
    empty = tmp_path / "none"  # the catalog ships Volcano samples since issue 48: none here
    empty.mkdir()
    no_samples = ["--samples", str(empty)]
    assert main(["validate", "-f", str(f), *no_samples]) == EXIT_OK  # nothing to tell
    capsys.readouterr()
    crd = ["--crd", str(VOLCANO / "crd.yaml")]
    assert main(["validate", "-f", str(f), *no_samples, *crd]) == EXIT_FINDING
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "INVALID batch-volcano-sh-job-v1alpha1"
    assert lines[1] == (
        "  spec.structureDefinition.childComponents[0].specDefinition.podTemplateSpecPath: "
        '.spec.task[].template: .spec has no field "task"; did you mean "tasks"? (the Job schema)'
    )
    assert "  note: schema: CustomResourceDefinition jobs.batch.volcano.sh" in "\n".join(lines)


def test_crd_files_lists_and_directories(tmp_path: Path, capsys: Any) -> None:
    karta = VOLCANO / "karta.yaml"
    [(_, crd)] = read_documents(VOLCANO / "crd.yaml")
    other = yaml.safe_load((CRDS / "kubeflow.org_tfjobs.yaml").read_text())
    as_list = write(tmp_path / "list.yaml", {"apiVersion": "v1", "kind": "List", "items": [crd]})
    multi = write(tmp_path / "multi.yaml", other, crd)
    nested = tmp_path / "dir" / "deeper"
    nested.mkdir(parents=True)
    write(nested / "crd.yaml", crd)
    empty = tmp_path / "none"  # the catalog ships Volcano samples since issue 48: none here
    empty.mkdir()
    for given in (as_list, multi, tmp_path / "dir"):
        code = main(["validate", "-f", str(karta), "--samples", str(empty), "--crd", str(given)])
        assert code == EXIT_OK
        out = capsys.readouterr().out
        assert "checked against a sample synthesised from the schema" in out, out
    code = main(["validate", "-f", str(karta), "--crd", str(CRDS), "--crd", str(as_list)])
    assert code == EXIT_OK
    capsys.readouterr()


def test_a_kind_no_given_crd_serves_keeps_its_output_and_says_so(
    tmp_path: Path, capsys: Any
) -> None:
    f = write(tmp_path / "k.yaml", BASE)
    empty = tmp_path / "none"
    empty.mkdir()
    code = main(
        ["validate", "-f", str(f), "--samples", str(empty), "--crd", str(VOLCANO / "crd.yaml")]
    )
    assert code == EXIT_OK
    assert capsys.readouterr().out == (
        "OK jobset (jobset.x-k8s.io/v1alpha2 JobSet): no samples found; checked structure and jq only\n"
        "  note: no CustomResourceDefinition given serves jobset.x-k8s.io/v1alpha2 JobSet: paths "
        "not checked against a schema\n" + CARRIED
    )


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "no such file or directory (--crd)"),
        ("a: [\n", "not valid YAML/JSON"),
        ("apiVersion: v1\nkind: ConfigMap\n", "no served CustomResourceDefinition found"),
        (
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
            "metadata: {name: x.example.com}\nspec: {group: example.com}\n",
            "CustomResourceDefinition x.example.com: spec.names.kind",
        ),
    ],
)
def test_unusable_crd_exits_2_naming_it(
    tmp_path: Path, content: str | None, fragment: str, capsys: Any
) -> None:
    crd = tmp_path / "crd.yaml"
    if content is not None:
        crd.write_text(content)
    code = main(["validate", "-f", str(VOLCANO / "karta.yaml"), "--crd", str(crd)])
    assert code == EXIT_INPUT
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err


@pytest.mark.parametrize(
    "stem",
    ["jobset.x-k8s.io-jobset-v1alpha2", "kubeflow.org-tfjob-v1", "argoproj.io-workflow-v1alpha1"],
)
def test_bundled_definitions_with_a_crd_fixture_pass(stem: str, capsys: Any) -> None:
    f = catalog_dir() / f"{stem}.yaml"
    assert main(["validate", "-f", str(f), "--crd", str(CRDS)]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("OK ") and "checked against" in out
    assert "  note: schema: CustomResourceDefinition " in out
