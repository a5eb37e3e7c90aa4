"""Workers independent (issue 26 item 7): with one worker of a real 2-worker server frozen
(``SIGSTOP``), the other takes and answers a burst of new connections without leaving any of
them to the frozen one.

Which worker holds a connection is read from ``/proc`` (the server side of the client's TCP
connection, by its inode, among each worker's descriptors); that no connection was left
waiting for the frozen worker is read from the server's log, where a worker reports the
workers that did not take connections it left to them. ``bench/bench_frozen_worker.py``
measures the time such a burst takes.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import POLICY
from running import Server, ServerFailed, TLSConn, start

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")

BURST = 30
MISSED = "did not take connections left to them"


def workers(master: int) -> list[int]:
    """The master's children (gunicorn's workers), once there are two."""
    deadline = time.monotonic() + 30
    while True:
        kids = [int(k) for k in Path(f"/proc/{master}/task/{master}/children").read_text().split()]
        if len(kids) == 2 or time.monotonic() > deadline:
            return kids
        time.sleep(0.1)


def state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    end = stat.rfind(b")")
    return stat[end + 2 : end + 3].decode()


def holder(server_port: int, client_port: int, pids: list[int]) -> int | None:
    """The pid among ``pids`` holding the server side of the TCP connection from
    ``client_port`` to ``server_port`` on 127.0.0.1."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if local.endswith(f":{server_port:04X}") and remote.endswith(f":{client_port:04X}"):
            inode = fields[9]
    if inode is None:
        return None
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[Server]:
    try:
        server = start(tmp_path, POLICY, ["--workers=2", "--threads=4"])
    except ServerFailed as e:
        pytest.fail(str(e))
    try:
        yield server
    finally:
        for pid in workers(server.proc.pid):  # never leave a worker stopped
            os.kill(pid, signal.SIGCONT)
        server.stop()


def test_a_frozen_worker_does_not_hold_up_the_connections_the_other_takes(srv: Server) -> None:
    pids = workers(srv.proc.pid)
    assert len(pids) == 2, pids
    frozen, running = pids
    logged = len(srv.log.read_bytes())
    os.kill(frozen, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 10
        while state(frozen) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state(frozen) == "T"

        # A burst of new connections, all open at once: each sends a request and keeps its
        # connection until all are answered, so the running worker holds ever more of them
        # while the frozen one holds none (it would be left every next one, were it waited for).
        ctx = srv.context()
        answers: list[bytes] = []
        holders: list[int | None] = []
        ready = threading.Barrier(BURST + 1)
        done = threading.Barrier(BURST + 1)
        lock = threading.Lock()

        def client() -> None:
            conn = TLSConn(srv.port, ctx, 30)
            try:
                ready.wait(60)
                conn.request("GET", "/healthz")
                body = conn.getresponse().read()
                assert conn.sock is not None
                port = conn.sock.getsockname()[1]
                who = holder(srv.port, port, pids)
                with lock:
                    answers.append(body)
                    holders.append(who)
            except (OSError, ssl.SSLError, threading.BrokenBarrierError) as e:
                with lock:
                    answers.append(repr(e).encode())
            finally:
                try:
                    done.wait(60)
                finally:
                    conn.close()

        threads = [threading.Thread(target=client) for _ in range(BURST)]
        for t in threads:
            t.start()
        ready.wait(60)
        done.wait(120)
        for t in threads:
            t.join(60)
    finally:
        os.kill(frozen, signal.SIGCONT)

    assert answers == [b"ok\n"] * BURST  # every connection answered while one worker was frozen
    assert holders == [running] * BURST  # by the running worker
    log = srv.log.read_bytes()[logged:].decode(errors="replace")
    assert MISSED not in log, log  # and none was left to the frozen worker to take


def test_the_workers_still_share_connections(srv: Server) -> None:
    """Leaving connections to a worker holding fewer still happens when both run: with
    connections held open one after another, each worker ends up holding some."""
    pids = workers(srv.proc.pid)
    held: list[socket.socket] = []
    owners = set()
    try:
        for _ in range(12):
            conn = srv.connect(30)
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() == b"ok\n"
            assert conn.sock is not None
            owners.add(holder(srv.port, conn.sock.getsockname()[1], pids))
            held.append(conn.sock)
            conn.sock = None  # keep the socket open past the HTTPConnection
    finally:
        for s in held:
            s.close()
    assert owners == set(pids)
