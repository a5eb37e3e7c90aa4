"""Memory of ``karta-webhook serve`` as a function of the number of definitions.

For each N, N distinct definitions (copies of the bundled JobSet definition, each for its own
API group ``benchI.example.com``) are written to a ``--catalog`` folder; ``serve --workers 2
--no-kube`` is started on it and, once it answers, the memory of its processes is read from
``/proc/PID/smaps_rollup``: the PSS (each shared page divided among the processes that map it,
so the sum is what the processes take together: what a pod's cgroup is charged, near enough)
and the RSS of the gunicorn master and workers, and the PSS of the jq sandbox children apart.
Then two reloads, each measured once both workers have logged it:

* ``one file``: one definition's file is edited (the usual change);
* ``all files``: every file is written anew with the same content (a ConfigMap update: the
  kubelet swaps in a new directory of files);
* ``all changed`` (with ``--all-changed``): every file's bytes changed, so every definition is
  read and checked again in each worker: the most a reload can cost.

Run: ``python bench/bench_memory.py [--sizes 0,500,1000,2000] [--workers 2]``. The figures
are in MiB; a busy machine changes timings, not these sizes much.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))  # the e2e suite's server runner
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from proctree import tree  # noqa: E402
from running import Server, start  # noqa: E402

POLICY = (ROOT / "examples" / "policy.yaml").read_text()
SOURCE = ROOT / "catalog" / "jobset.x-k8s.io-jobset-v1alpha2.yaml"
MiB = 1024 * 1024


def write_definitions(folder: Path, n: int) -> list[Path]:
    """``n`` copies of the JobSet definition, each for its own group (a distinct kind)."""
    base = yaml.safe_load(SOURCE.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(n):
        doc = json.loads(json.dumps(base))
        doc["metadata"]["name"] = f"bench{i}-jobset"
        doc["spec"]["structureDefinition"]["rootComponent"]["kind"]["group"] = (
            f"bench{i}.example.com"
        )
        f = folder / f"bench{i}.yaml"
        f.write_text(yaml.safe_dump(doc, sort_keys=False))
        files.append(f)
    return files


def rollup(pid: int) -> dict[str, int]:
    """Rss, Pss and the private bytes of one process (0s when it has gone)."""
    out = {"Rss": 0, "Pss": 0, "Private": 0}
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            kb = int(parts[0]) * 1024
            if name in ("Rss", "Pss"):
                out[name] += kb
            elif name in ("Private_Clean", "Private_Dirty"):
                out["Private"] += kb
    return out


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def measure(srv: Server) -> dict[str, float]:
    """PSS and RSS of the master and workers, and PSS of the sandbox children, in MiB."""
    master = srv.proc.pid
    workers = [int(p) for p in Path(f"/proc/{master}/task/{master}/children").read_text().split()]
    server_pids = [master, *workers]
    children = [p for p in tree(master) if p not in server_pids]
    rolls = {p: rollup(p) for p in server_pids}
    return {
        "pss": sum(r["Pss"] for r in rolls.values()) / MiB,
        "rss": sum(r["Rss"] for r in rolls.values()) / MiB,
        "master_pss": rolls[master]["Pss"] / MiB,
        "worker_private": max((rolls[w]["Private"] for w in workers), default=0) / MiB,
        "sandbox_pss": sum(rollup(p)["Pss"] for p in children) / MiB,
        "total_pss": (
            sum(r["Pss"] for r in rolls.values()) + sum(rollup(p)["Pss"] for p in children)
        )
        / MiB,
    }


def wait_reloaded(srv: Server, before: int, workers: int, timeout: float = 600) -> None:
    """Until ``workers`` more 'reloaded definitions' lines are in the log than ``before``."""
    deadline = time.monotonic() + timeout
    while reloads(srv) < before + workers:
        if time.monotonic() > deadline:
            raise SystemExit(f"no reload seen in {timeout} s:\n{srv.log.read_text()[-3000:]}")
        time.sleep(0.25)
    time.sleep(1.0)  # the old snapshot's last references go with the requests that held it


def reloads(srv: Server) -> int:
    return srv.log.read_text(errors="replace").count("reloaded definitions and policy")


def run(n: int, workers: int, all_changed: bool = False) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f"karta-mem-{n}-"))
    try:
        files = write_definitions(tmp / "defs", n)
        t0 = time.monotonic()
        srv = start(tmp, POLICY, [f"--workers={workers}", f"--catalog={tmp / 'defs'}"], wait=1200)
        started = time.monotonic() - t0
        try:
            time.sleep(2.0)  # sandbox children warmed, first flushes done
            _, body = srv.request("GET", "/readyz")
            loaded = json.loads(body)["definitions"]
            row: dict[str, Any] = {"n": n, "definitions": loaded, "start_s": round(started, 1)}
            row["start"] = measure(srv)
            if files:
                seen = reloads(srv)
                text = files[0].read_text()
                files[0].write_text(text.replace("bench0-jobset", "bench0-jobset-edited"))
                wait_reloaded(srv, seen, workers)
                row["one_file"] = measure(srv)
                for f in files:  # a ConfigMap update: every file anew, the same content
                    content = f.read_bytes()
                    f.unlink()
                    f.write_bytes(content)
                # Nothing changed, so nothing is logged or swapped: wait for both workers'
                # next looks (settled after 0.5 s, looked at once a second) and a margin.
                time.sleep(5.0)
                row["all_files"] = measure(srv)
                if all_changed:  # every definition new: the worst case a reload can be
                    seen = reloads(srv)
                    for f in files:
                        f.write_text(f.read_text() + "# changed\n")
                    wait_reloaded(srv, seen, workers, timeout=1800)
                    row["all_changed"] = measure(srv)
            return row
        finally:
            srv.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0,500,1000,2000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--all-changed",
        action="store_true",
        help="then a third reload with every file's bytes changed (slow: all are read again)",
    )
    args = ap.parse_args()
    print(
        f"{'N':>5} {'phase':>10} {'PSS':>7} {'RSS':>7} {'master':>7} "
        f"{'wk priv':>7} {'sandbox':>7} {'total':>7}   (MiB; PSS/RSS: master + workers)"
    )
    for n in (int(x) for x in args.sizes.split(",")):
        row = run(n, args.workers, args.all_changed)
        for phase in ("start", "one_file", "all_files", "all_changed"):
            m = row.get(phase)
            if m is None:
                continue
            print(
                f"{n:>5} {phase:>10} {m['pss']:7.1f} {m['rss']:7.1f} {m['master_pss']:7.1f} "
                f"{m['worker_private']:7.1f} {m['sandbox_pss']:7.1f} {m['total_pss']:7.1f}"
            )
        print(f"      loaded {row['definitions']} definitions, started in {row['start_s']} s")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
