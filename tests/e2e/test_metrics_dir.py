"""A broken metrics directory never costs an admission, for real: gunicorn with two workers,
its ``PROMETHEUS_MULTIPROC_DIR`` deleted or made read-only while it runs; workers killed by
pid are replaced (the master marks the dead ones whatever the directory's state) and the new
ones, whose metrics files cannot be made, serve every request."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import jsonpatch
import pytest
import running
from helpers import JOBSET, POLICY, load, patch_of, review
from running import Server, ServerFailed, start


def _workers(server: Server) -> set[int]:
    """The master's child processes: its gunicorn workers."""
    pid = server.proc.pid
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return {int(p) for p in text.split()}


def _replaced(server: Server, gone: int, before: set[int]) -> set[int]:
    """Wait until ``gone`` has a successor answering (the master alive throughout)."""
    deadline = time.monotonic() + 60
    while True:
        assert server.proc.poll() is None, server.log.read_text()[-4000:]
        now = _workers(server)
        if gone not in now and len(now) == len(before):
            return now
        assert time.monotonic() < deadline, (before, now, server.log.read_text()[-4000:])
        time.sleep(0.1)


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """``path`` read-only for everyone, root included (a read-only bind mount; as another
    user, the mode bits suffice)."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(0o755)
        return
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount(8) to make a read-only directory as root")
    # bind and remount read-only in one command: no worker can open a file for writing through
    # the new mount in between (that would keep it busy, writable)
    subprocess.run([mount, "--bind", "-o", "ro", str(path), str(path)], check=True)
    try:
        # (again, for a mount(8) that takes no options with --bind)
        ro = subprocess.run([mount, "-o", "remount,bind,ro", str(path)], capture_output=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot make a read-only mount here: {ro.stderr.decode().strip()}")
        probe = path / "probe"
        with pytest.raises(OSError):
            probe.write_text("x")
        yield
    finally:
        # lazily: a worker may still hold a file it opened through the mount
        subprocess.run(["umount", "--lazy", str(path)], check=True)


def _admit_many(server: Server, n: int, threads: int = 4) -> None:
    """``n`` /mutate requests from ``threads`` clients at once; every one answered 200 with
    the policy's patch."""
    obj = load(JOBSET)
    errors: list[str] = []

    def client(count: int) -> None:
        for _ in range(count):
            try:
                r = server.admit("/mutate", review(obj))
                patched = jsonpatch.apply_patch(obj, patch_of(r))
                for rj in patched["spec"]["replicatedJobs"]:
                    assert rj["template"]["spec"]["template"]["spec"]["schedulerName"] == (
                        "kai-scheduler"
                    )
            except Exception as e:  # reported below, with the server's log
                errors.append(f"{type(e).__name__}: {e}")

    pool = [threading.Thread(target=client, args=(n // threads,)) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, (errors[:5], len(errors), server.log.read_text()[-4000:])


@pytest.mark.parametrize("fault", ["deleted", "read-only"])
def test_a_broken_metrics_directory_costs_no_admission_and_no_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    prom = tmp_path / "metrics"
    prom.mkdir()
    env = running.serve_env()
    monkeypatch.setattr(
        running, "serve_env", lambda: {**env, "PROMETHEUS_MULTIPROC_DIR": str(prom)}
    )
    try:
        server = start(tmp_path, POLICY, ["--workers=2"])
    except ServerFailed as e:
        pytest.fail(str(e))
    try:
        _admit_many(server, 8)
        first = _workers(server)
        assert len(first) == 2 and list(prom.glob("*.db"))
        with contextlib.ExitStack() as broken:
            if fault == "deleted":
                shutil.rmtree(prom)
            else:
                broken.enter_context(_read_only(prom))
            now = first
            for pid in sorted(first):  # every worker that could write its files, replaced
                os.kill(pid, signal.SIGKILL)
                now = _replaced(server, pid, now)
            assert not now & first
            _admit_many(server, 200)
            status, body = server.request("GET", "/metrics")
            assert status == 200
            assert b'karta_webhook_metrics_failures_total{write="definitions"}' in body, body
            # a worker that never had a file is replaced too
            victim = min(now)
            os.kill(victim, signal.SIGKILL)
            now = _replaced(server, victim, now)
            _admit_many(server, 40)
        log = server.log.read_text()
        assert "Traceback" not in log, log[-4000:]
        said = [
            (line["pid"], line["write"])
            for line in (json.loads(t) for t in log.splitlines() if t.startswith("{"))
            if line.get("msg", "").startswith("writing metrics failed")
        ]
        assert said, log[-4000:]
        assert len(said) == len(set(said)), said  # once per process and kind of write
    finally:
        server.stop()


def test_an_unusable_metrics_directory_at_start_is_one_line_and_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    env = running.serve_env()
    unusable = {**env, "PROMETHEUS_MULTIPROC_DIR": str(blocker / "metrics")}
    monkeypatch.setattr(running, "serve_env", lambda: unusable)
    try:
        server = start(tmp_path, POLICY, ["--workers=2"])
    except ServerFailed as e:
        pytest.fail(str(e))
    try:
        _admit_many(server, 8)
        status, body = server.request("GET", "/metrics")
        assert status == 200 and b"karta_webhook_definitions_loaded" in body, body  # multiprocess
        log = server.log.read_text()
        assert f"PROMETHEUS_MULTIPROC_DIR={blocker / 'metrics'} is unusable" in log
        assert "Traceback" not in log, log[-4000:]
    finally:
        server.stop()
