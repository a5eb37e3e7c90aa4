"""A benchmark's ``karta-webhook serve`` (``bench_hostile.py``, ``bench_policy_bounds.py``):
started with its memory sampled (:func:`sampled_server`), and timed ``/mutate`` calls as the
API server makes them (:func:`measure`: a review every 20 ms on a kept-alive connection, every
fifth one on a new connection, TLS handshake included).

Imported by the benchmarks, which put ``tests`` and ``tests/e2e`` on ``sys.path`` first.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from running import Server, free_port, start

INTERVAL = 0.02  # between two measured /mutate calls
NEW_EVERY = 5  # every fifth call on a new connection
CALL_TIMEOUT = 10.0


# --------------------------------------------------------------------------------- memory


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out.setdefault(ppid, []).append(int(entry))
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Memory:
    """Peak RSS, per process and in total, of the workers and their sandbox children."""

    master: int
    worker: int = 0
    child: int = 0
    total: int = 0
    children_seen: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        tree = _children()
        workers = tree.get(self.master, [])
        kids = [k for w in workers for k in tree.get(w, [])]
        w_rss = [_rss(p) for p in workers]
        c_rss = [_rss(p) for p in kids]
        self.worker = max([self.worker, *w_rss])
        self.child = max([self.child, *c_rss])
        self.total = max(self.total, _rss(self.master) + sum(w_rss) + sum(c_rss))
        self.children_seen = max(self.children_seen, len(kids))

    def run(self) -> None:
        while not self._stop.wait(0.1):
            self.sample()

    def stop(self) -> None:
        self._stop.set()


@contextlib.contextmanager
def sampled_server(prefix: str, policy: str) -> Iterator[tuple[Server, Memory]]:
    """``karta-webhook serve`` on 127.0.0.1 (2 workers, 4 threads, the default limits, a
    metrics port) with ``policy``, in a new folder named ``prefix...``; its memory sampled
    every 100 ms until both are stopped at the end."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    srv = start(tmp, policy, ["--workers=2", "--threads=4"], metrics_port=free_port())
    mem = Memory(srv.proc.pid)
    sampler = threading.Thread(target=mem.run, daemon=True)
    sampler.start()
    try:
        yield srv, mem
    finally:
        mem.stop()
        srv.stop()


# --------------------------------------------------------------------------------- the client


@dataclass
class Calls:
    keep: list[float] = field(default_factory=list)
    new: list[float] = field(default_factory=list)
    failed: int = 0
    size: int = 0  # bytes of the last response read


def measure(srv: Server, body: bytes, seconds: float) -> Calls:
    """``/mutate`` with ``body`` for ``seconds``: the seconds of each successful call, by
    connection, and how many failed."""
    headers = {"Content-Type": "application/json"}
    calls = Calls()
    keep = srv.connect(CALL_TIMEOUT)
    until = time.monotonic() + seconds
    n = 0
    while time.monotonic() < until:
        n += 1
        fresh = n % NEW_EVERY == 0
        conn = srv.connect(CALL_TIMEOUT) if fresh else keep
        t = time.perf_counter()
        try:
            conn.request("POST", "/mutate", body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            ok = resp.status == 200 and b'"patch"' in data
            calls.size = len(data)
        except OSError:
            ok = False
        elapsed = time.perf_counter() - t
        if fresh:
            conn.close()
        if not ok:
            calls.failed += 1
            if not fresh:  # start over with a new kept-alive connection
                keep.close()
                keep = srv.connect(CALL_TIMEOUT)
        else:
            (calls.new if fresh else calls.keep).append(elapsed)
        time.sleep(INTERVAL)
    keep.close()
    return calls


def pct(values: list[float], q: float) -> str:
    """The ``q``-th percentile of ``values`` (seconds) in ms, ``-`` when there are none."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0] * 1000:.1f}"
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return f"{cuts[int(q) - 1] * 1000:.1f}"
