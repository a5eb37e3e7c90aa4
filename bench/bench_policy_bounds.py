"""What a policy costs at its bounds (docs/policy-bounds.md; issue 39).

Three tables:

* ``load``: seconds to load (read, expand and check, or refuse) the alias-amplified policy
  file (about 50 KB that YAML aliases expand to 1,000 rules x 950 labels) and the two largest
  policies within the bounds (``tests/policies.py``); median of ``--repeat`` loads.
* ``rules``: the same settings reached through one rule or through one rule each
  (``1x64``: one rule of 64 labels; ``64x1``: 64 rules of one label), CPU µs per /mutate review
  in process (as ``bench_mutate.py`` measures), on the JobSet sample (the stamp lane) and on
  the same JobSet with a toleration in each rule (the general path).
* ``kinds``: the ``most entries`` policy on every bundled sample, CPU µs per review in
  process, the slowest first (``--top`` of them), with its ops and response size;
* ``serve``: ``karta-webhook serve`` (2 workers, 4 threads, the default limits, as
  ``bench_hostile.py`` starts it) with the example policy and with each largest policy within
  the bounds; a JobSet review every 20 ms on a kept-alive connection and every fifth on a new
  one for ``--seconds``: /mutate p50 and p99 (ms), the patch's size, and the peak RSS of a
  worker, of a sandbox child and of all processes together (sampled every 100 ms), beside the
  documented bounds (``WORKER_PEAK_MIB`` per worker, ``memory_limit_mib`` per pod). The objects
  (``--objects``): ``jobset`` (the sample, 2 pod templates), ``jobset:N`` (N replicated jobs),
  or a bundled sample by its path under ``catalog/samples`` (by default the one the largest
  policy costs most: a Milvus cluster with every component, 29 pod templates).

Run: ``python bench/bench_policy_bounds.py [--table load,rules,kinds,serve] [--seconds S]``. Goals:
the amplified file refused well under a second; /mutate p99 under 100 ms and memory within
the documented limit with the largest policy within the bounds.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "e2e"), str(ROOT / "bench")]

import yaml  # noqa: E402
from bench_mutate import best_us  # noqa: E402
from bench_mutate import review as raw_review  # noqa: E402
from helpers import JOBSET, POLICY, load, review  # noqa: E402
from policies import amplified, most_bytes, most_entries  # noqa: E402
from serverrun import measure, pct, sampled_server  # noqa: E402

from webhook.admission import handlers  # noqa: E402
from webhook.admission import review as admission  # noqa: E402
from webhook.admission.registry import load_registry  # noqa: E402
from webhook.base.errors import InputError  # noqa: E402
from webhook.base.limits import CHILD_PEAK_MIB, WORKER_PEAK_MIB, memory_limit_mib  # noqa: E402
from webhook.jq.engine import Engine  # noqa: E402
from webhook.mutation.policyfile import load_policy, parse_policy  # noqa: E402

MiB = 1 << 20
POLICIES: dict[str, Callable[[], str]] = {
    "example": lambda: POLICY,
    "most entries": lambda: yaml.safe_dump(most_entries()),
    "most bytes": lambda: yaml.safe_dump(most_bytes()),
}


# --------------------------------------------------------------------------------- load


def table_load(repeat: int) -> None:
    print("| policy file | size | load (s), median | outcome |")
    print("|---|---:|---:|---|")
    with tempfile.TemporaryDirectory() as d:
        files = {"amplified (1,000 x 950 labels)": amplified()}
        files |= {name: text() for name, text in POLICIES.items() if name != "example"}
        for name, text in files.items():
            f = Path(d) / "policy.yaml"
            f.write_text(text)
            times, outcome = [], ""
            for _ in range(repeat):
                t = time.perf_counter()
                try:
                    p = load_policy(f)
                    outcome = f"loaded, {len(p.rules)} rules"
                except InputError as e:
                    outcome = "refused: " + str(e).splitlines()[-1].strip()
                times.append(time.perf_counter() - t)
            print(f"| {name} | {len(text):,} B | {statistics.median(times):.3f} | {outcome} |")


# --------------------------------------------------------------------------------- rules


def table_rules(seconds: float) -> None:
    registry, engine = load_registry(), Engine()
    n = 64
    lanes = {"JobSet sample, stamp lane": False, "same, a toleration per rule: general path": True}
    print("| object | policy | µs per review | ops |")
    print("|---|---|---:|---:|")
    for lane, toleration in lanes.items():
        body = raw_review(load(JOBSET))
        # n settings: n - 1 labels and a toleration, or n labels
        labels = [(f"e.io/l{i}", "v") for i in range(n - 1 if toleration else n)]
        tolerations = [{"key": "t", "operator": "Exists"}] if toleration else []
        for shape in (f"1x{n}", f"{n}x1"):
            rules: list[dict[str, Any]]
            if shape.startswith("1x"):
                rules = [{"name": "one", "labels": dict(labels)}]
                if tolerations:
                    rules[0]["tolerations"] = tolerations
            else:
                rules = [{"name": f"r{i}", "labels": dict([kv])} for i, kv in enumerate(labels)]
                if tolerations:
                    rules.append({"name": "t", "tolerations": tolerations})
            policy = parse_policy({"rules": rules})
            out: list[int] = []

            def once(policy: Any = policy, out: list[int] = out, body: bytes = body) -> None:
                result = handlers.mutate(admission.decode(body), registry, policy, engine)
                admission.encode(result.response)
                out[:] = [result.ops]

            us = best_us(once, seconds)
            print(f"| {lane} | {shape} | {us:.0f} | {out[0]} |")


# --------------------------------------------------------------------------------- kinds


def table_kinds(seconds: float, top: int) -> None:
    from helpers import SAMPLES

    from webhook.base.documents import read_documents

    registry, engine = load_registry(), Engine()
    policy = parse_policy(most_entries())
    rows = []
    for path in sorted(SAMPLES.glob("*/*.yaml")):
        for _, obj in read_documents(path):
            body = raw_review(obj)
            out: list[int] = []

            def once(body: bytes = body, out: list[int] = out) -> None:
                result = handlers.mutate(admission.decode(body), registry, policy, engine)
                out[:] = [result.ops, len(admission.encode(result.response))]

            rows.append((best_us(once, seconds), f"{path.parent.name}/{path.name}", out))
    rows.sort(reverse=True)
    print(
        f"| sample (most entries; the {top} slowest of {len(rows)}) | µs per review | ops | response |"
    )
    print("|---|---:|---:|---:|")
    for us, name, (ops, size) in rows[:top]:
        print(f"| {name} | {us:,.0f} | {ops:,} | {size / 1024:,.0f} KiB |")


# --------------------------------------------------------------------------------- serve


def served(spec: str) -> dict[str, Any]:
    """The object ``spec`` names (see ``--objects``)."""
    if not spec.startswith("jobset"):
        return load(ROOT / "catalog" / "samples" / spec)
    obj = load(JOBSET)
    jobs = int(spec.partition(":")[2] or 0)
    if jobs:
        last = obj["spec"]["replicatedJobs"][-1]
        obj["spec"]["replicatedJobs"] = [
            copy.deepcopy(last) | {"name": f"workers-{i}"} for i in range(jobs)
        ]
    return obj


def table_serve(seconds: float, objects: list[str]) -> None:
    print(
        f"| policy | object | /mutate p50 / p99 (ms) | failed | response | peak RSS worker /"
        f" sandbox child / all (MiB; bounds {WORKER_PEAK_MIB} / {CHILD_PEAK_MIB} /"
        f" {memory_limit_mib(2)}) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, text in POLICIES.items():
        for spec in objects:
            obj = served(spec)
            body = json.dumps(review(obj, resource=obj["kind"].lower() + "s")).encode()
            with sampled_server("bench-policy-bounds-", text()) as (srv, mem):
                srv.admit("/mutate", review(obj, resource=obj["kind"].lower() + "s"))  # warm
                calls = measure(srv, body, seconds)
                if srv.proc.poll() is not None:
                    raise SystemExit(f"the server exited:\n{srv.log.read_text()[-3000:]}")
            times = calls.keep + calls.new
            print(
                f"| {name} | {spec} | {pct(times, 50)} / {pct(times, 99)} | {calls.failed} |"
                f" {calls.size / 1024:.0f} KiB | {mem.worker / MiB:.0f} / {mem.child / MiB:.0f} /"
                f" {mem.total / MiB:.0f} |",
                flush=True,
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--table", default="load,rules,kinds,serve", help="tables to run (comma-separated)"
    )
    ap.add_argument("--top", type=int, default=5, help="samples shown in the kinds table")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured time per server run")
    ap.add_argument("--repeat", type=int, default=5, help="loads per policy file")
    ap.add_argument(
        "--objects",
        default="jobset,milvus.io-milvus-v1beta1/cluster-all-components.yaml",
        help="objects served (comma-separated): jobset, jobset:N, or a sample's path",
    )
    args = ap.parse_args()
    tables = args.table.split(",")
    if "load" in tables:
        table_load(args.repeat)
        print()
    if "rules" in tables:
        table_rules(min(args.seconds, 2.0))
        print()
    if "kinds" in tables:
        table_kinds(0.2, args.top)
        print()
    if "serve" in tables:
        table_serve(args.seconds, args.objects.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
