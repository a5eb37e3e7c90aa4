"""README's first command and "Talk to the server", run as written (issue 38 item 2).

The first command is ``pip install . && karta-webhook serve --policy examples/policy.yaml``: the
package is installed in the test environment already (CI's ``.ci/run`` installs it with pip),
so the test runs what follows ``&&``, as this checkout's ``karta-webhook`` console script, in a
folder that holds the repository's ``examples/`` (the server makes ``./certs/`` there, as it
does for a reader). The one change: the port, 8443 in README, is a free one here (``--port``
added to the command and the URLs' ``:8443`` replaced), so that tests can run side by side.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

from docblocks import block, cli_env
from ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def _healthy(port: int, ca: Path) -> bool:
    try:
        ctx = ssl.create_default_context(cafile=str(ca))
        with urllib.request.urlopen(f"https://localhost:{port}/healthz", context=ctx, timeout=2):
            return True
    except (OSError, ssl.SSLError):
        return False


def test_readme_serve_and_talk_to_the_server(tmp_path: Path) -> None:
    first = block("README.md", "readme-serve").strip()
    assert first.startswith("pip install . && ")
    serve = first.removeprefix("pip install . && ")
    assert serve == "karta-webhook serve --policy examples/policy.yaml"
    port = free_port()
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    env = cli_env(tmp_path)
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {serve} --port {port}"],
            cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not _healthy(port, work / "certs" / "ca.crt"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "serve did not answer /healthz:\n" + log.read_text()
            time.sleep(0.2)
        talk = block("README.md", "readme-talk-to-the-server")
        assert talk.count(":8443/") == 3
        ran = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", talk.replace(":8443/", f":{port}/")],
            cwd=work, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr + ran.stdout
        text = ran.stdout
        # /healthz's answer, then the decoded patch, then the request counter
        patch_start = text.index("[")
        patch_end = text.rindex("]") + 1
        ops = json.loads(text[patch_start:patch_end])
        paths = {op["path"] for op in ops}
        assert "/spec/replicatedJobs/0/template/spec/template/spec/schedulerName" in paths
        assert any(p.endswith("/labels/kai.scheduler~1queue") for p in paths)
        assert all(op["op"] == "add" for op in ops)
        assert "karta_webhook_requests_total" in text[patch_end:]
        review = json.loads((ROOT / "examples" / "review-jobset.json").read_text())
        assert review["request"]["kind"]["kind"] == "JobSet"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
