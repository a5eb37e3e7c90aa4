"""docs/cli.md's contract for every subcommand, as a table: the exit code (0 ok, 1 a finding, 2
unusable input) and what stderr says, run as a user runs it (``python -m webhook`` in a
subprocess, so an exception nobody caught shows as it would), and never a traceback.

Every row is one command line; ``{tmp}`` is a folder of prepared inputs (see :func:`inputs`),
``{sample}`` the bundled JobSet sample, ``{karta}`` its definition, ``{suite}`` the Volcano
test suite. ``serve`` start-up errors are here; ``serve`` running and stopping (exit 0) is the
last test.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from helpers import JOBSET, JOBSET_KARTA, broken_karta

from webhook.server.certs import write_certs

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "examples" / "volcano"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("contract")
    (tmp / "alias.yaml").write_text("a: &x\n  b: *x\n")
    (tmp / "string.yaml").write_text("just a string\n")
    (tmp / "list.yaml").write_text("- 1\n- 2\n")
    (tmp / "empty.yaml").write_text("")
    (tmp / "bad.yaml").write_text("a: [\n")
    (tmp / "binary.yaml").write_bytes(b"\xff\xfe\x00garbage")
    (tmp / "widget.yaml").write_text(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
    )
    sample = JOBSET.read_text()
    (tmp / "two.yaml").write_text(sample + "\n---\n" + sample)
    (tmp / "sample-and-widget.yaml").write_text(
        sample + "\n---\n" + (tmp / "widget.yaml").read_text()
    )
    (tmp / "broken-karta.yaml").write_text(yaml.safe_dump(broken_karta()))
    (tmp / "policy.yaml").write_text("rules:\n- name: kai\n  schedulerName: kai-scheduler\n")
    (tmp / "bad-policy.yaml").write_text("rules: [{name: x, bogus: 1}]\n")
    (tmp / "garbage.pem").write_text("garbage\n")
    (tmp / "samples-empty").mkdir()
    certs = write_certs(tmp / "certs", "karta-webhook", "karta-system")
    assert certs.cert.exists()
    (tmp / "kubeconfig-unreachable").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": f"https://127.0.0.1:{_closed_port()}"}}
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
                "users": [{"name": "u", "user": {"token": "t"}}],
            }
        )
    )
    failing = tmp / "failing-suite"
    shutil.copytree(SUITE, failing)
    text = (failing / "karta-test.yaml").read_text()
    (failing / "karta-test.yaml").write_text(text.replace("gpus: 8", "gpus: 9", 1))
    (tmp / "suite-string.yaml").write_text("a string\n")
    (tmp / "a-file").write_text("")
    return tmp


# (id, argv, exit code, a piece of stderr; "" when stderr may say nothing)
CASES: list[tuple[str, Sequence[str], int, str]] = [
    # ------------------------------------------------------------------ mutate
    ("mutate-ok", ["mutate", "-f", "{sample}", "--policy", "{tmp}/policy.yaml"], 0, ""),
    ("mutate-patch-two", ["mutate", "-f", "{tmp}/two.yaml", "-o", "patch"], 0, ""),
    ("mutate-empty", ["mutate", "-f", "{tmp}/empty.yaml"], 0, ""),
    ("mutate-no-definition", ["mutate", "-f", "{tmp}/widget.yaml"], 1, "no definition for"),
    ("mutate-one-without", ["mutate", "-f", "{tmp}/sample-and-widget.yaml"], 1, "no definition"),
    ("mutate-string", ["mutate", "-f", "{tmp}/string.yaml"], 2, "not a Kubernetes object"),
    (
        "mutate-list",
        ["mutate", "-f", "{tmp}/list.yaml", "-o", "json"],
        2,
        "not a Kubernetes object",
    ),
    ("mutate-alias", ["mutate", "-f", "{tmp}/alias.yaml", "-o", "json"], 2, "recursive alias"),
    ("mutate-bad-yaml", ["mutate", "-f", "{tmp}/bad.yaml"], 2, "not valid YAML/JSON"),
    ("mutate-binary", ["mutate", "-f", "{tmp}/binary.yaml"], 2, "cannot read"),
    ("mutate-missing", ["mutate", "-f", "{tmp}/nope.yaml"], 2, "nope.yaml"),
    ("mutate-directory", ["mutate", "-f", "{tmp}"], 2, ""),
    (
        "mutate-bad-policy",
        ["mutate", "-f", "{sample}", "--policy", "{tmp}/bad-policy.yaml"],
        2,
        "bad-policy.yaml",
    ),
    ("mutate-bad-catalog", ["mutate", "-f", "{sample}", "--catalog", "{tmp}/nope"], 2, "nope"),
    ("mutate-bad-output", ["mutate", "-f", "{sample}", "-o", "xml"], 2, "invalid choice"),
    ("mutate-no-file", ["mutate"], 2, "-f/--file"),
    # ------------------------------------------------------------------ describe, file mode
    ("describe-ok", ["describe", "-f", "{sample}"], 0, ""),
    ("describe-json-two", ["describe", "-f", "{tmp}/two.yaml", "-o", "json"], 0, ""),
    ("describe-yaml", ["describe", "-f", "{sample}", "-o", "yaml"], 0, ""),
    ("describe-no-definition", ["describe", "-f", "{tmp}/widget.yaml"], 1, "no definition for"),
    (
        "describe-one-without",
        ["describe", "-f", "{tmp}/sample-and-widget.yaml", "-o", "json"],
        1,
        "no definition",
    ),
    ("describe-string", ["describe", "-f", "{tmp}/string.yaml"], 2, "not a Kubernetes object"),
    ("describe-alias", ["describe", "-f", "{tmp}/alias.yaml"], 2, "recursive alias"),
    ("describe-bad-yaml", ["describe", "-f", "{tmp}/bad.yaml", "-o", "json"], 2, "not valid"),
    ("describe-binary", ["describe", "-f", "{tmp}/binary.yaml"], 2, "cannot read"),
    ("describe-missing", ["describe", "-f", "{tmp}/nope.yaml"], 2, "nope.yaml"),
    ("describe-nothing", ["describe"], 2, "give KIND[/NAME]"),
    ("describe-both", ["describe", "jobset/x", "-f", "{sample}"], 2, "not both"),
    ("describe-file-with-ns", ["describe", "-f", "{sample}", "-n", "x"], 2, "apply to KIND"),
    # ------------------------------------------------------------------ describe, live mode
    (
        "describe-live-unreachable",
        ["describe", "jobset/x", "--kubeconfig", "{tmp}/kubeconfig-unreachable"],
        2,
        "cannot reach the cluster",
    ),
    (
        "describe-live-list-unreachable",
        ["describe", "jobsets", "-A", "--kubeconfig", "{tmp}/kubeconfig-unreachable", "-o", "json"],
        2,
        "cannot reach the cluster",
    ),
    (
        "describe-live-no-context",
        ["describe", "jobset/x", "--kubeconfig", "{tmp}/kubeconfig-unreachable", "--context", "n"],
        2,
        "kubeconfig",
    ),
    (
        "describe-live-kubeconfig-missing",
        ["describe", "jobset/x", "--kubeconfig", "{tmp}/nope"],
        2,
        "kubeconfig",
    ),
    (
        "describe-live-kubeconfig-string",
        ["describe", "jobset/x", "--kubeconfig", "{tmp}/string.yaml"],
        2,
        "kubeconfig",
    ),
    ("describe-live-bad-target", ["describe", "a/b/c"], 2, "want KIND/NAME or KIND"),
    ("describe-live-name-and-all", ["describe", "jobset/x", "-A"], 2, "give KIND, not KIND/NAME"),
    # ------------------------------------------------------------------ validate
    ("validate-ok", ["validate", "-f", "{karta}"], 0, ""),
    ("validate-invalid", ["validate", "-f", "{tmp}/broken-karta.yaml"], 1, ""),
    ("validate-not-a-karta", ["validate", "-f", "{sample}"], 1, ""),
    ("validate-no-documents", ["validate", "-f", "{tmp}/empty.yaml"], 1, "no documents"),
    ("validate-alias", ["validate", "-f", "{tmp}/alias.yaml"], 2, "recursive alias"),
    ("validate-binary", ["validate", "-f", "{tmp}/binary.yaml"], 2, "cannot read"),
    ("validate-missing", ["validate", "-f", "{tmp}/nope.yaml"], 2, "nope.yaml"),
    ("validate-crd-missing", ["validate", "-f", "{karta}", "--crd", "{tmp}/nope"], 2, "--crd"),
    ("validate-crd-string", ["validate", "-f", "{karta}", "--crd", "{tmp}/string.yaml"], 2, ""),
    (
        "validate-samples-missing",
        ["validate", "-f", "{karta}", "--samples", "{tmp}/nope"],
        2,
        "--samples",
    ),
    # ------------------------------------------------------------------ test
    ("init-ok", ["init", "--crd", "{suite}/crd.yaml"], 0, ""),
    ("init-no-kind", ["init", "--crd", "{suite}/crd.yaml", "--kind", "Nope"], 2, "of kind Nope"),
    ("init-missing", ["init", "--crd", "{tmp}/nope.yaml"], 2, "nope.yaml"),
    ("test-ok", ["test", "{suite}"], 0, ""),
    ("test-json", ["test", "{suite}", "-o", "json"], 0, ""),
    ("test-failing", ["test", "{tmp}/failing-suite"], 1, ""),
    ("test-missing", ["test", "{tmp}/nope"], 2, "no such file"),
    ("test-empty", ["test", "{tmp}/empty.yaml"], 2, "unusable test suite"),
    ("test-string", ["test", "{tmp}/suite-string.yaml"], 2, "unusable test suite"),
    ("test-alias", ["test", "{tmp}/alias.yaml"], 2, "recursive alias"),
    # ------------------------------------------------------------------ certs
    (
        "certs-ok",
        ["certs", "--out", "{tmp}/new-certs", "--service", "s", "--namespace", "n"],
        0,
        "",
    ),
    (
        "certs-out-is-a-file",
        ["certs", "--out", "{tmp}/a-file", "--service", "s", "--namespace", "n"],
        2,
        "a-file",
    ),
    (
        "certs-bad-service",
        ["certs", "--out", "{tmp}/c1", "--service", "Bad_Name", "--namespace", "n"],
        2,
        "DNS-1123",
    ),
    (
        "certs-bad-namespace",
        ["certs", "--out", "{tmp}/c2", "--service", "s", "--namespace", "-x"],
        2,
        "",
    ),
    (
        "certs-zero-days",
        ["certs", "--out", "{tmp}/c3", "--service", "s", "--namespace", "n", "--days", "0"],
        2,
        "at least 1 day",
    ),
    (
        "certs-days-past-9999",
        ["certs", "--out", "{tmp}/c4", "--service", "s", "--namespace", "n", "--days", "9999999"],
        2,
        "at most",
    ),
    (
        "certs-days-not-a-number",
        ["certs", "--out", "x", "--service", "s", "--namespace", "n", "--days", "x"],
        2,
        "invalid int",
    ),
    ("certs-missing-flags", ["certs", "--out", "{tmp}/c5"], 2, "required"),
    # ------------------------------------------------------------------ manifests
    ("manifests-ok", ["manifests"], 0, ""),
    ("manifests-catalog", ["manifests", "--catalog"], 0, ""),
    (
        "manifests-ca-bundle",
        ["manifests", "--ca-bundle", "{tmp}/certs/ca.crt", "--namespace", "team"],
        0,
        "",
    ),
    ("manifests-bad-namespace", ["manifests", "--namespace", "Bad_NS"], 2, "--namespace"),
    ("manifests-ca-missing", ["manifests", "--ca-bundle", "{tmp}/nope"], 2, "--ca-bundle"),
    ("manifests-ca-garbage", ["manifests", "--ca-bundle", "{tmp}/garbage.pem"], 2, "--ca-bundle"),
    ("manifests-bad-url", ["manifests", "--url", "ftp://x"], 2, "--url"),
    ("manifests-policy-missing", ["manifests", "--policy", "{tmp}/nope"], 2, "nope"),
    ("manifests-policy-alias", ["manifests", "--policy", "{tmp}/alias.yaml"], 2, "recursive"),
    ("manifests-policy-bad", ["manifests", "--policy", "{tmp}/bad-policy.yaml"], 2, "bad-policy"),
    # ------------------------------------------------------------------ serve (start errors)
    ("serve-port-range", ["serve", "--no-kube", "--port", "70000"], 2, "--port 70000"),
    (
        "serve-cert-alone",
        ["serve", "--no-kube", "--tls-cert", "{tmp}/certs/tls.crt"],
        2,
        "together",
    ),
    (
        "serve-cert-missing",
        ["serve", "--no-kube", "--tls-cert", "{tmp}/nope.crt", "--tls-key", "{tmp}/certs/tls.key"],
        2,
        "--tls-cert",
    ),
    (
        "serve-cert-garbage",
        [
            "serve",
            "--no-kube",
            "--tls-cert",
            "{tmp}/garbage.pem",
            "--tls-key",
            "{tmp}/certs/tls.key",
        ],
        2,
        "--tls-cert",
    ),
    ("serve-bad-policy", ["serve", "--no-kube", "--policy", "{tmp}/bad-policy.yaml"], 2, "policy"),
    ("serve-policy-missing", ["serve", "--no-kube", "--policy", "{tmp}/nope"], 2, "nope"),
    # a free port: the catalog is read after the bind, and 8443 may be taken on a shared machine
    (
        "serve-catalog-missing",
        ["serve", "--no-kube", "--port", "{port}", "--catalog", "{tmp}/nope"],
        2,
        "nope",
    ),
    ("serve-workers", ["serve", "--no-kube", "--workers", "0"], 2, "--workers"),
    ("serve-kubeconfig", ["serve", "--kubeconfig", "{tmp}/nope"], 2, "--kubeconfig"),
    ("serve-bad-flag", ["serve", "--no-such-flag"], 2, "unrecognized"),
    # ------------------------------------------------------------------ the command itself
    ("no-subcommand", [], 2, "required"),
    ("unknown-subcommand", ["frobnicate"], 2, "invalid choice"),
]


def run(argv: Sequence[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=_env(),
    )


def _env() -> dict[str, str]:
    import os

    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PROMETHEUS_MULTIPROC_DIR")
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["KUBECONFIG"] = "/nonexistent-kubeconfig"  # never the machine's own cluster
    return env


@pytest.mark.parametrize(
    ("argv", "code", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_exit_code_and_message_as_readme_says(
    inputs: Path, argv: Sequence[str], code: int, says: str
) -> None:
    names = {
        "tmp": str(inputs),
        "sample": str(JOBSET),
        "karta": str(JOBSET_KARTA),
        "suite": str(SUITE),
        "port": str(_closed_port()),
    }
    args = [a.format(**names) for a in argv]
    done = run(args, inputs)
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr
    assert done.returncode == code, (args, done.returncode, done.stderr[-2000:])
    assert says in done.stderr, done.stderr
    if code == 2 and args and args[0] != "test":
        # unusable input: said on stderr, in a line or two (argparse adds its usage line)
        assert done.stderr.strip() and done.stderr.count("\n") <= 3, done.stderr
    if code == 0 and args and args[0] in ("mutate", "describe") and "json" in args:
        json.loads(done.stdout)  # one JSON value, whatever the number of documents


def test_every_subcommand_is_in_the_table() -> None:
    from webhook.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    covered = {c[1][0] for c in CASES if c[1]}
    assert commands <= covered, commands - covered
    described = {c[0] for c in CASES}
    assert any(i.startswith("describe-live") for i in described)
    for command in commands - {"serve"}:  # serve's 0 is below: it runs until stopped
        codes = {c[2] for c in CASES if c[1] and c[1][0] == command}
        assert {0, 2} <= codes, (command, codes)


def test_multi_document_output_shapes(inputs: Path) -> None:
    """What docs/cli.md says several documents print: ``mutate -o json`` a v1 List, ``-o patch`` a
    list of patches in order, ``describe -o json`` ``{items, count}``; one document its own."""
    two, one = str(inputs / "two.yaml"), str(JOBSET)
    listed = json.loads(run(["mutate", "-f", two, "-o", "json"], inputs).stdout)
    assert listed["kind"] == "List" and len(listed["items"]) == 2
    patches = json.loads(run(["mutate", "-f", two, "-o", "patch"], inputs).stdout)
    assert len(patches) == 2 and all(isinstance(p, list) for p in patches)
    assert json.loads(run(["mutate", "-f", one, "-o", "json"], inputs).stdout)["kind"] == "JobSet"
    views = json.loads(run(["describe", "-f", two, "-o", "json"], inputs).stdout)
    assert views["count"] == 2 and [v["kind"] for v in views["items"]] == ["JobSet", "JobSet"]
    assert json.loads(run(["describe", "-f", one, "-o", "json"], inputs).stdout)["kind"] == "JobSet"


def test_serve_runs_until_stopped_then_exits_0(inputs: Path) -> None:
    """serve's 0: it serves, and a SIGTERM (what Kubernetes sends) ends it cleanly."""
    import http.client
    import ssl

    port = _closed_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--no-kube",
            "--workers=1",
            f"--port={port}",
            f"--tls-cert={inputs / 'certs' / 'tls.crt'}",
            f"--tls-key={inputs / 'certs' / 'tls.key'}",
        ],
        cwd=inputs,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        ctx = ssl.create_default_context(cafile=str(inputs / "certs" / "ca.crt"))
        ctx.check_hostname = False
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=ctx)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "serve did not answer /healthz in 60 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, out
    assert "Traceback" not in out, out
