"""docs/install.md section 10, "Develop against a cluster", followed word for word against a
fresh real kube-apiserver (issue 38 item 2): a newcomer's cluster has no ``karta-system`` and
no Karta CRD, and ``kubectl``'s current context is in ``~/.kube/config``.

First ``serve`` as the block runs it, before the block: it refuses to start, naming the missing
namespace (exit 2). Then the block as written, in a shell whose ``kubectl`` is the suite's,
``karta-webhook`` this checkout's console script and ``~`` a folder of its own; the one change
is the port (8443 in the doc, a free one here). It must end with every bundled Karta's status
conditions written by the server it started, and no failed status write in the server's log.

The control plane is this test's own (``fresh_plane``, not the session's): the block registers
cluster-wide webhook configurations and takes the namespace ``karta-system``, as it would on a
new cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import kapi
from docblocks import block
from hooks import serve_env


def newcomer_env(plane: kapi.ControlPlane, tmp: Path) -> dict[str, str]:
    """HOME with the cluster as kubectl's current context; PATH with kubectl and this
    checkout's ``karta-webhook`` (the console-script wrapper pip makes)."""
    home = tmp / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(plane.kubeconfig.read_text())
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").symlink_to(plane.kubectl_path)
    exe = bin_dir / "karta-webhook"
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nfrom webhook.cli.main import main\nsys.exit(main())\n"
    )
    exe.chmod(0o755)
    env = serve_env({"HOME": str(home), "KUBECACHEDIR": str(home / "kubectl-cache")})
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env.pop("KUBECONFIG", None)
    env.pop("POD_NAMESPACE", None)
    return env


def test_develop_against_a_cluster_word_for_word(
    fresh_plane: kapi.ControlPlane, tmp_path: Path
) -> None:
    plane = fresh_plane
    port = kapi.free_port()
    text = block("docs/install.md", "install-develop-against-a-cluster")
    assert text.count("8443") >= 3
    text = text.replace("8443", str(port))
    env = newcomer_env(plane, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "manifests").symlink_to(kapi.ROOT / "manifests")

    # Before the block: no karta-system yet, and serve says so at once.
    serve_line = next(ln for ln in text.splitlines() if ln.startswith("karta-webhook serve"))
    early = subprocess.run(
        ["bash", "-c", serve_line.removesuffix("&").strip()],
        cwd=work, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert early.returncode == 2, early.stderr
    assert (
        early.stderr.strip()
        .splitlines()[-1]
        .startswith('karta-webhook: serve: namespace "karta-system" does not exist: ')
    )
    assert "kubectl create namespace karta-system" in early.stderr

    log = tmp_path / "block.log"
    with log.open("wb") as out:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", text],
            cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        try:
            code = shell.wait(240)
        except subprocess.TimeoutExpired:
            raise AssertionError("the block did not finish in 240 s:\n" + log.read_text()) from None
        output = log.read_text(errors="replace")
        assert code == 0, output
        kartas = plane.get_json("kartas")["items"]
        assert len(kartas) >= 20, output
        for k in kartas:
            types = {c["type"] for c in k.get("status", {}).get("conditions", [])}
            assert types == {"Validated", "CRDExists", "Ready"}, (k["metadata"]["name"], types)
        ready = {
            k["metadata"]["name"]: next(
                c["status"] for c in k["status"]["conditions"] if c["type"] == "Ready"
            )
            for k in kartas
        }
        assert ready["batch-job-v1"] == "True"  # a built-in kind
        assert ready["jobset-x-k8s-io-jobset-v1alpha2"] == "False"  # no JobSet CRD here
        table = output[output.index("NAME ") :].splitlines()
        assert table[0].split()[:4] == ["NAME", "FRAMEWORK", "ROOT", "COMPONENT"]
        assert any(row.split()[:2] == ["batch-job-v1", "Job"] for row in table)
        assert "status.error" not in output and "karta.status-failed" not in output
        assert "karta.status" in output  # the server it started wrote them
    finally:
        end_group(shell.pid)


def end_group(pgid: int) -> None:
    """SIGTERM the block's process group (the server it started with ``&``: gunicorn's master,
    its workers and their sandbox children), SIGKILL what is left after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
