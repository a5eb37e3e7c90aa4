"""What a worker keeps after large and hostile objects (issue 49 item 6), against the
documented per-worker figure (``webhook.base.limits.WORKER_PEAK_MIB``, docs/install.md).

Starts ``serve --workers 2 --threads 4 --no-kube`` and reads each worker's RSS
(``/proc/PID/status``) at rest, then after each load, all on the same server:

* ``1 MB keys``: 30 DynamoGraphDeployments, each with one service under a unique 1 MB key
  (the case issue 49 measured 166 MiB per worker in), 8 at a time (every thread);
* ``3 MiB objects``: 30 JobSets of about 3 MiB, 8 at a time;
* ``more keys``: 60 more of the first (a plateau, or growth?).

Run: ``python bench/bench_worker_memory.py [--env K=V ...]``. Exit status 1 when a worker keeps
more than the documented figure after any load (the benchmark fails when it grows).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_mutate import jobset, review  # noqa: E402
from proctree import tree  # noqa: E402
from running import Server, start  # noqa: E402

from webhook.base.limits import WORKER_PEAK_MIB  # noqa: E402

DGD = ROOT / "catalog/samples/nvidia.com-dynamographdeployment-v1alpha1/agg.yaml"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def workers(srv: Server) -> list[int]:
    """The gunicorn workers: the master's children that are Python (not jq sandbox children)."""
    out = []
    for pid in tree(srv.proc.pid):
        if pid == srv.proc.pid:
            continue
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if ppid == srv.proc.pid:
            out.append(pid)
    return sorted(out)


def big_key(i: int) -> bytes:
    obj: Any = yaml.safe_load(DGD.read_text())
    _name, svc = next(iter(obj["spec"]["services"].items()))
    obj["spec"]["services"] = {f"{i:06d}" + "k" * (1 << 20): svc}
    return review(obj)


def load(srv: Server, bodies: list[bytes]) -> None:
    def one(body: bytes) -> None:
        status, _ = srv.request("POST", "/mutate", body, timeout=60)
        assert status == 200, status

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, bodies))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", action="append", default=[], help="K=V for the server")
    args = ap.parse_args()
    for kv in args.env:
        k, _, v = kv.partition("=")
        os.environ[k] = v
    big = jobset(3_000_000, jobs=100)
    js_body = review(big)
    with tempfile.TemporaryDirectory(prefix="bench-worker-memory-") as d:
        srv = start(Path(d), "rules: [{name: kai, schedulerName: kai, labels: {a: b}}]\n",
                    ["--workers=2", "--threads=4"])  # fmt: skip
        try:
            pids = workers(srv)
            print(f"| load | worker RSS (MiB) | documented {WORKER_PEAK_MIB} |")
            print("|---|---|---|")
            worst = 0.0
            for name, bodies in (
                ("at rest", []),
                ("30 x 1 MB keys", [big_key(i) for i in range(30)]),
                ("30 x 3 MiB JobSets", [js_body] * 30),
                ("60 more 1 MB keys", [big_key(100 + i) for i in range(60)]),
            ):
                load(srv, bodies)
                got = [rss_mib(p) for p in pids]
                worst = max(worst, *got)
                ok = "within" if max(got) <= WORKER_PEAK_MIB else "**over**"
                print(f"| {name} | {' / '.join(f'{x:.0f}' for x in got)} | {ok} |")
        finally:
            srv.stop()
    return 0 if worst <= WORKER_PEAK_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
