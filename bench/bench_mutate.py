"""Microseconds of CPU per AdmissionReview on the /mutate hot path, in-process on one core.

Measures decode (bytes → Request), definition lookup, workload resolution, the mutation plan
and encode (Response → bytes) — everything the HTTP handler does except the socket. Three
tables:

* ``cases``: a ~10 KB JobSet (budget: 150 µs per review), a PyTorchJob, a ~3 MB JobSet;
* ``growth``: JobSets of 1 → 3,000 replicated jobs, the object growing from 10 KB to 3 MB
  (goal: µs per template at 3,000 ≤ 1.5 x µs per template at 10), beside the floor — orjson
  decode + encode + base64 of the same body — (goal: 3 MB JobSet ≤ 1.3 x the floor);
* ``kinds``: every bundled catalog sample, µs per review (goal: every kind ≤ 150 µs);
* ``cold``: the JobSet sample and the null path (a kind with no definition), each measured
  warm and with the CPU caches emptied before every review (by writing a buffer larger than
  the L2 cache), as a worker under load meets them: between two of its requests the core ran
  TLS, the kernel, the client and other workers. Cold, Python code costs 2-3 times as much,
  and the server's CPU per request follows the cold numbers, not the warm ones.

Run: ``python bench/bench_mutate.py [--seconds S] [--table cases,growth,kinds,cold]``. CPU time
(``time.process_time``), best of several rounds, so other load on the machine disturbs it
little. The loaded definitions are frozen out of the collector's way first, as the server's
master does before it forks a worker (``webhook.server.run.freeze_heap``).
"""

from __future__ import annotations

import argparse
import base64
import copy
import gc
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from webhook.admission import handlers  # noqa: E402
from webhook.admission import review as admission  # noqa: E402
from webhook.admission.registry import load_registry  # noqa: E402
from webhook.jq.engine import Engine  # noqa: E402
from webhook.mutation.policyfile import parse_policy  # noqa: E402

SAMPLES = ROOT / "catalog" / "samples"
POLICY = parse_policy(
    {
        "rules": [
            {
                "name": "kai",
                "schedulerName": "kai-scheduler",
                "labels": {"kai.scheduler/queue": "research"},
                "annotations": {"example.com/owner": "$(workload.name)"},
            }
        ]
    }
)


def _load(stem: str, name: str) -> dict[str, Any]:
    return yaml.safe_load((SAMPLES / stem / name).read_text())


def _env(n: int, width: int) -> list[dict[str, str]]:
    return [{"name": f"VAR_{i:03d}", "value": "x" * width} for i in range(n)]


def jobset(target_bytes: int, jobs: int) -> dict[str, Any]:
    """A JobSet of ``jobs`` replicated jobs whose containers carry environment variables until
    the object is about ``target_bytes`` of JSON (real templates are mostly env and args)."""
    base = _load("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml")
    template_job = base["spec"]["replicatedJobs"][-1]
    base["spec"]["replicatedJobs"] = []
    for i in range(jobs):
        job = copy.deepcopy(template_job)
        job["name"] = f"workers-{i}"
        base["spec"]["replicatedJobs"].append(job)
    size = len(json.dumps(base))
    per_job = max(0, (target_bytes - size) // jobs)
    per_var = len(json.dumps({"name": "VAR_000", "value": "x" * 40})) + 2
    for job in base["spec"]["replicatedJobs"]:
        job["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = _env(
            per_job // per_var, 40
        )
    return base


def review(obj: dict[str, Any]) -> bytes:
    api_version = obj["apiVersion"]
    group, _, version = api_version.rpartition("/")
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": group, "version": version, "kind": obj["kind"]},
                "resource": {
                    "group": group,
                    "version": version,
                    "resource": obj["kind"].lower() + "s",
                },
                "requestKind": {"group": group, "version": version, "kind": obj["kind"]},
                "namespace": obj["metadata"].get("namespace", "default"),
                "operation": "CREATE",
                "userInfo": {"username": "bench"},
                "object": obj,
                "oldObject": None,
                "dryRun": False,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
            },
        }
    ).encode()


def best_us(once: Any, seconds: float) -> float:
    """Best CPU µs per call of ``once`` over rounds of doubling size for about ``seconds``."""
    once()
    best = float("inf")
    deadline = time.monotonic() + seconds
    n = 1
    while time.monotonic() < deadline or best == float("inf"):
        start = time.process_time()
        for _ in range(n):
            once()
        spent = time.process_time() - start
        if spent < 0.05:
            n *= 2
            continue
        best = min(best, spent / n)
    return best * 1e6


def per_review_us(body: bytes, registry: Any, engine: Engine, seconds: float) -> tuple[float, int]:
    ops: list[int] = []

    def once() -> None:
        req = admission.decode(body)
        result = handlers.mutate(req, registry, POLICY, engine)
        admission.encode(result.response)
        ops[:] = [result.ops]

    us = best_us(once, seconds)
    return us, ops[0]


def floor_us(body: bytes, ops: int, seconds: float) -> float:
    """What any webhook must spend on this body: decode it, encode an answer with a patch of
    ``ops`` small adds (base64 included)."""
    patch = [
        {"op": "add", "path": f"/spec/x/{i}/metadata", "value": {"a": "b"}} for i in range(ops)
    ]

    def once() -> None:
        review = orjson.loads(body)
        uid = review["request"]["uid"]
        out = {"uid": uid, "allowed": True, "patch": base64.b64encode(orjson.dumps(patch)).decode()}
        orjson.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": out}
        )

    return best_us(once, seconds)


def table_cases(registry: Any, engine: Engine, seconds: float) -> None:
    cases = {
        "JobSet ~10 KB": jobset(10_000, jobs=3),
        "PyTorchJob": _load("kubeflow.org-pytorchjob-v1", "master-workers-running.yaml"),
        "JobSet ~3 MB": jobset(3_000_000, jobs=100),
    }
    print(f"{'case':<16} {'bytes':>9} {'ops':>5} {'µs/review':>10} {'floor µs':>9} {'x floor':>7}")
    for name, obj in cases.items():
        body = review(obj)
        us, ops = per_review_us(body, registry, engine, seconds)
        floor = floor_us(body, ops, seconds)
        print(f"{name:<16} {len(body):>9} {ops:>5} {us:>10.1f} {floor:>9.1f} {us / floor:>7.2f}")


def table_growth(registry: Any, engine: Engine, seconds: float) -> None:
    print(
        f"{'templates':>9} {'bytes':>9} {'ops':>5} {'µs/review':>10} {'µs/template':>11} "
        f"{'floor µs':>9} {'x floor':>7}"
    )
    for jobs in (1, 10, 100, 1000, 3000):
        body = review(jobset(max(10_000, jobs * 1000), jobs=jobs))
        us, ops = per_review_us(body, registry, engine, seconds)
        floor = floor_us(body, ops, seconds)
        print(
            f"{jobs:>9} {len(body):>9} {ops:>5} {us:>10.1f} {us / jobs:>11.1f} "
            f"{floor:>9.1f} {us / floor:>7.2f}"
        )


#: written before each cold review: larger than any L2 cache this runs on (a few MB)
_EVICT = bytearray(16 << 20)
_STRIDE = bytes(len(range(0, len(_EVICT), 64)))


def cold_us(once: Any, seconds: float) -> float:
    """Mean wall µs per call of ``once`` with the caches emptied before each call (best of
    three runs of about ``seconds`` / 3 each)."""
    once()
    best = float("inf")
    for _ in range(3):
        total = calls = 0
        deadline = time.monotonic() + seconds / 3
        while time.monotonic() < deadline or calls < 50:
            _EVICT[::64] = _STRIDE
            start = time.perf_counter_ns()
            once()
            total += time.perf_counter_ns() - start
            calls += 1
        best = min(best, total / calls / 1000)
    return best


def table_cold(registry: Any, engine: Engine, seconds: float) -> None:
    js = _load("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml")
    same = copy.deepcopy(js)
    same["apiVersion"], same["kind"] = "example.com/v1", "Widget"
    other = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    cases = {"JobSet": js, "null path": other, "null, same body": same}
    print(f"{'case':<16} {'bytes':>6} {'warm µs':>8} {'cold µs':>8}")
    got = {}
    for name, obj in cases.items():
        body = review(obj)

        def once(body: bytes = body) -> None:
            result = handlers.mutate(admission.decode(body), registry, POLICY, engine)
            admission.encode(result.response)

        got[name] = (best_us(once, seconds), cold_us(once, seconds))
        print(f"{name:<16} {len(body):>6} {got[name][0]:>8.1f} {got[name][1]:>8.1f}")
    warm, cold = (got["JobSet"][i] - got["null path"][i] for i in (0, 1))
    print(f"{'JobSet - null':<16} {'':>6} {warm:>8.1f} {cold:>8.1f}")


def table_kinds(registry: Any, engine: Engine, seconds: float) -> None:
    print(f"{'sample':<70} {'bytes':>7} {'ops':>4} {'µs/review':>10}")
    for path in sorted(SAMPLES.glob("*/*.yaml")):
        body = review(yaml.safe_load(path.read_text()))
        us, ops = per_review_us(body, registry, engine, seconds)
        name = f"{path.parent.name}/{path.name}"
        print(f"{name:<70} {len(body):>7} {ops:>4} {us:>10.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="time per case")
    ap.add_argument(
        "--table", default="cases,growth,kinds,cold", help="tables to print, comma-separated"
    )
    args = ap.parse_args()
    registry = load_registry()
    engine = Engine()
    gc.freeze()  # as the server's master does before forking a worker (serving.freeze_heap)
    tables = {
        "cases": table_cases,
        "growth": table_growth,
        "kinds": table_kinds,
        "cold": table_cold,
    }
    for name in args.table.split(","):
        print(f"\n## {name}")
        tables[name](registry, engine, args.seconds)
    engine.close()


if __name__ == "__main__":
    main()
