"""Liveness never waits for loading (issue 49 item 7): with ``--catalog`` definitions to check,
``serve`` answers ``/healthz`` within 2 s of its start (``/readyz`` 503, ``loading``) and
serves once they are loaded; admission calls meanwhile are refused (503), never answered."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from running import NAMESPACE, SERVICE, Server, free_port, serve_env

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from bench_memory import write_definitions  # noqa: E402


def test_healthz_answers_while_the_definitions_load(tmp_path: Path) -> None:
    from webhook.server.certs import write_certs

    paths = write_certs(tmp_path / "certs", SERVICE, NAMESPACE)
    write_definitions(tmp_path / "catalog", 150)
    log = tmp_path / "server.log"
    port = free_port()
    cmd = [
        sys.executable, "-m", "webhook", "serve", "--host=127.0.0.1", f"--port={port}",
        f"--tls-cert={paths.cert}", f"--tls-key={paths.key}", "--no-kube",
        f"--catalog={tmp_path / 'catalog'}", "--workers=1", "--threads=2",
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=serve_env(), stdout=out, stderr=out)
    srv = Server(port, paths.ca_cert, tmp_path / "certs", tmp_path, log, proc, None, None)
    try:
        first = None
        while time.monotonic() - started < 30:
            assert proc.poll() is None, log.read_text()
            try:
                if srv.request("GET", "/healthz", timeout=2)[0] == 200:
                    first = time.monotonic() - started
                    break
            except OSError:
                pass
            time.sleep(0.05)
        status, body = srv.request("GET", "/readyz")
        assert (status, json.loads(body)) == (503, {"ready": False, "loading": True})
        status, body = srv.request("POST", "/mutate", b"{}")
        assert status == 503 and b"loading" in body
        # the goal is 2 s; on a loaded machine the interpreter's own start takes more, so what is
        # held here is what serve adds to a bare `karta-webhook --help` measured now
        floor = time.monotonic()
        subprocess.run([sys.executable, "-m", "webhook", "--help"], env=serve_env(), check=True,
                       capture_output=True)  # fmt: skip
        floor = time.monotonic() - floor
        assert first is not None, log.read_text()
        print(f"/healthz first answered {first:.2f} s after start (bare CLI start {floor:.2f} s)")
        assert first < max(2.0, floor + 1.0), log.read_text()
        deadline = time.monotonic() + 120
        while True:  # then the server itself, with the definitions
            try:
                status, body = srv.request("GET", "/readyz")
                if status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert json.loads(body)["definitions"] >= 150
        print(f"/readyz 200 {time.monotonic() - started:.1f} s after start (150 definitions)")
    finally:
        srv.stop()
