"""The offline CLI: mutate and describe, output formats and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from webhook.base import jsontext
from webhook.cli.main import main
from webhook.karta.loading import catalog_dir

JOBSET = catalog_dir() / "samples" / "jobset.x-k8s.io-jobset-v1alpha2" / "leader-workers.yaml"
POLICY = """
rules:
- name: kai
  schedulerName: kai-scheduler
  labels: {kai.scheduler/queue: research}
  annotations: {example.com/owner: "$(workload.name)"}
"""


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(POLICY)
    return p


def test_mutate_json_prints_one_object(
    policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mutate", "-f", str(JOBSET), "--policy", str(policy_file), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "JobSet"
    for rj in out["spec"]["replicatedJobs"]:
        tmpl = rj["template"]["spec"]["template"]
        assert tmpl["spec"]["schedulerName"] == "kai-scheduler"
        assert tmpl["metadata"]["labels"]["kai.scheduler/queue"] == "research"
        assert tmpl["metadata"]["annotations"]["example.com/owner"] == "trainer"


def test_mutate_patch_and_yaml(policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutate", "-f", str(JOBSET), "--policy", str(policy_file), "-o", "patch"]) == 0
    ops = json.loads(capsys.readouterr().out)
    assert len(ops) == 6 and all(op["op"] == "add" for op in ops)
    assert main(["mutate", "-f", str(JOBSET), "--policy", str(policy_file)]) == 0
    [doc] = list(yaml.safe_load_all(capsys.readouterr().out))
    assert doc["metadata"]["name"] == "trainer"


def test_mutate_without_policy_changes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutate", "-f", str(JOBSET), "-o", "patch"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_unreadable_input_or_policy_exits_2_naming_the_file(
    tmp_path: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mutate", "-f", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    assert main(["mutate", "-f", str(bad)]) == 2
    assert "bad.yaml: not valid YAML" in capsys.readouterr().err
    pol = tmp_path / "pol.yaml"
    pol.write_text("rules:\n- name: x\n  labels: {'bad key': v}\n")
    assert main(["mutate", "-f", str(JOBSET), "--policy", str(pol)]) == 2
    err = capsys.readouterr().err
    assert "pol.yaml" in err and "bad key" in err


def test_describe_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "-f", str(JOBSET), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"kind", "name", "namespace", "status", "gpus", "components"} <= out.keys()
    assert out["gpus"] == 12
    rj = next(c for c in out["components"] if c["name"] == "replicatedjob")
    assert [(i["id"], i["replicas"], i["gpus"]) for i in rj["instances"]] == [
        ("leader", 1, 4),
        ("workers", 2, 8),
    ]
    assert main(["describe", "-f", str(JOBSET)]) == 0
    text = capsys.readouterr().out
    assert "gpus:       12" in text and "instance workers: replicas 2" in text


def test_describe_multi_document_and_unknown_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "two.yaml"
    f.write_text(
        JOBSET.read_text() + "\n---\napiVersion: example.com/v1\nkind: Nope\nmetadata: {name: n}\n"
    )
    assert main(["describe", "-f", str(f), "-o", "json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["count"] == 1
    assert "no definition for example.com/v1 Nope" in captured.err


def test_catalog_flag_adds_definitions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "trainer.yaml").write_text(
        """
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: trainer}
spec:
  structureDefinition:
    rootComponent:
      name: trainer
      kind: {group: example.com, version: v1, kind: Trainer}
      specDefinition: {podTemplateSpecPath: .spec.template}
      statusDefinition: {statusMappings: {}}
"""
    )
    obj = tmp_path / "t.yaml"
    obj.write_text(
        "apiVersion: example.com/v1\nkind: Trainer\nmetadata: {name: t, namespace: n}\nspec: {template: {spec: {containers: []}}}\n"
    )
    pol = tmp_path / "p.yaml"
    pol.write_text("rules: [{name: s, schedulerName: kai-scheduler}]\n")
    assert (
        main(
            [
                "mutate",
                "-f",
                str(obj),
                "--catalog",
                str(tmp_path / "defs"),
                "--policy",
                str(pol),
                "-o",
                "patch",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [
        {"op": "add", "path": "/spec/template/spec/schedulerName", "value": "kai-scheduler"}
    ]


def test_python_dash_m_and_stdin(policy_file: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "mutate",
            "-f",
            "-",
            "--policy",
            str(policy_file),
            "-o",
            "json",
        ],
        input=JOBSET.read_text(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["kind"] == "JobSet"


def test_yaml_timestamps_are_text_not_a_traceback(
    tmp_path: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """YAML reads an unquoted ``2024-01-01`` as a date, which JSON cannot hold; the object goes
    to jq (status expressions) and to -o json as the text kubectl would send."""
    obj = yaml.safe_load(JOBSET.read_text())
    obj["metadata"]["annotations"] = {"created": "DATE"}
    obj["spec"]["replicatedJobs"][0]["replicas"] = "DATE"
    f = tmp_path / "dated.yaml"
    f.write_text(yaml.safe_dump(obj).replace("DATE", "2024-01-01"))
    assert main(["describe", "-f", str(f), "-o", "json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["status"] != "" and any("2024-01-01" in w for w in view["warnings"])
    assert main(["mutate", "-f", str(f), "--policy", str(policy_file), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"]["annotations"]["created"] == "2024-01-01"


def test_mutate_json_of_a_document_deeper_than_orjson_indents(
    policy_file: Path, tmp_path: Path
) -> None:
    """A free-form field 3,000 levels deep: the JSON output is still the whole mutated object
    (printed compact past orjson's depth), from a child process as a user runs it."""
    doc = yaml.safe_load(JOBSET.read_text())
    deep: dict[str, object] = {"leaf": 1}
    for _ in range(3000):
        deep = {"d": deep}
    doc["metadata"]["annotations"] = {"note": "x"}
    doc["spec"]["replicatedJobs"][0]["template"]["metadata"] = {"labels": {"a": "b"}}
    doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "x-deep"
    ] = deep
    src = tmp_path / "deep.json"
    src.write_bytes(jsontext.dumps(doc))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "mutate",
            "-f",
            str(src),
            "--policy",
            str(policy_file),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    out = jsontext.loads(r.stdout)
    tmpl = out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert tmpl["spec"]["schedulerName"] == "kai-scheduler"
    node = tmpl["spec"]["containers"][0]["x-deep"]
    for _ in range(3000):
        node = node["d"]
    assert node == {"leaf": 1}


@pytest.mark.parametrize(
    ("text", "code", "says"),
    [
        ("a: &x\n  b: *x\n", 2, "recursive alias *x"),
        ("just a string\n", 2, "not a Kubernetes object (a str)"),
        ("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n", 1, "no definition"),
    ],
    ids=["recursive-alias", "bare-string", "no-definition"],
)
def test_mutate_exit_codes_as_readme_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, code: int, says: str
) -> None:
    """docs/cli.md: 0 ok, 1 a finding (no definition for a document), 2 unusable input; never a
    traceback, whatever the output format."""
    f = tmp_path / "in.yaml"
    f.write_text(text)
    for output in ("yaml", "json", "patch"):
        assert main(["mutate", "-f", str(f), "-o", output]) == code
        err = capsys.readouterr().err
        assert says in err and str(f) in err and "Traceback" not in err


def _serve_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["serve", "--no-kube", f"--certs-dir={tmp_path / 'dev'}", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err  # one line
    return err


def test_serve_start_errors_are_one_line_naming_the_flag_or_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from webhook.server.certs import write_certs

    a = write_certs(tmp_path / "a", "karta-webhook", "karta-system")
    b = write_certs(tmp_path / "b", "karta-webhook", "karta-system")
    assert "--port 70000: a port is 0 (any free one) to 65535" in _serve_problem(
        tmp_path, capsys, "--port=70000"
    )
    assert "--metrics-port -1:" in _serve_problem(tmp_path, capsys, "--metrics-port=-1")
    err = _serve_problem(tmp_path, capsys, f"--tls-cert={a.key}", f"--tls-key={a.cert}")
    assert f"--tls-cert {a.key} holds a private key" in err and "swapped?" in err
    err = _serve_problem(
        tmp_path, capsys, f"--tls-cert={tmp_path / 'no.crt'}", f"--tls-key={a.key}"
    )
    assert f"--tls-cert {tmp_path / 'no.crt'}: cannot read" in err
    err = _serve_problem(tmp_path, capsys, f"--tls-cert={a.cert}", f"--tls-key={b.key}")
    assert f"--tls-key {b.key} is not the key of --tls-cert {a.cert}" in err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = _serve_problem(tmp_path, capsys, "--host=127.0.0.1", f"--port={port}")
    assert f"--port {port}: 127.0.0.1:{port} is in use by another process" in err
