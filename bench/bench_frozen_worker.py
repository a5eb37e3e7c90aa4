"""A burst of new connections while one of two workers is frozen (issue 26 item 7).

Starts ``karta-webhook serve`` on 127.0.0.1 (2 workers, 4 threads), then, ``--rounds``
times: opens ``--burst`` TLS connections at once, each sending ``GET /healthz`` and keeping
its connection until all are answered, and times the burst (first connect to last answer),
with both workers running and with one stopped (``SIGSTOP``; ``SIGCONT`` after). Printed:
the median and the worst burst of each, in milliseconds.

``--root DIR`` serves the ``webhook`` package of another tree (e.g. ``git archive <rev>
webhook | tar -x -C DIR``) to compare with an earlier version; the test clients are this
tree's. Before the fix each connection waited up to 50 ms for the frozen worker to take it.

Run: ``python bench/bench_frozen_worker.py [--burst N] [--rounds R] [--root DIR]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "e2e")]

import running  # noqa: E402
from helpers import POLICY  # noqa: E402


def burst(srv: running.Server, n: int) -> float:
    """Seconds from the first connect of ``n`` concurrent clients to the last answer."""
    ctx = srv.context()
    start = threading.Barrier(n + 1)
    answered = threading.Barrier(n + 1)
    failures: list[str] = []

    def client() -> None:
        conn = running.TLSConn(srv.port, ctx, 30)
        try:
            start.wait(60)
            conn.request("GET", "/healthz")
            if conn.getresponse().read() != b"ok\n":
                failures.append("unexpected answer")
        except Exception as e:  # counted, printed
            failures.append(repr(e))
        finally:
            answered.wait(120)
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(n)]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    start.wait(60)
    answered.wait(120)
    took = time.perf_counter() - t0
    for t in threads:
        t.join()
    if failures:
        raise SystemExit(f"{len(failures)} failed: {failures[:3]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--burst", type=int, default=30, help="connections at once")
    ap.add_argument("--rounds", type=int, default=7, help="bursts per case")
    ap.add_argument("--root", type=Path, help="serve the webhook package of this tree")
    args = ap.parse_args()
    if args.root is not None:
        running.ROOT = args.root.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        srv = running.start(Path(tmp), POLICY, ["--workers=2", "--threads=4"])
        try:
            master = srv.proc.pid
            kids = [
                int(k) for k in Path(f"/proc/{master}/task/{master}/children").read_text().split()
            ]
            frozen = kids[0]
            burst(srv, args.burst)  # warm up
            results: dict[str, list[float]] = {"both running": [], "one frozen": []}
            for _ in range(args.rounds):
                results["both running"].append(burst(srv, args.burst))
                time.sleep(0.2)
                os.kill(frozen, signal.SIGSTOP)
                try:
                    time.sleep(0.1)
                    results["one frozen"].append(burst(srv, args.burst))
                finally:
                    os.kill(frozen, signal.SIGCONT)
                time.sleep(0.2)
        finally:
            for pid in kids:
                os.kill(pid, signal.SIGCONT)
            srv.stop()
    print(f"burst of {args.burst} new TLS connections, {args.rounds} rounds ({running.ROOT})")
    for case, times in results.items():
        print(
            f"  {case:13}  median {1000 * statistics.median(times):7.1f} ms"
            f"   worst {1000 * max(times):7.1f} ms"
        )


if __name__ == "__main__":
    main()
