"""Microseconds of CPU per AdmissionReview on the /mutate hot path, in-process on one core.

Measures decode (bytes → Request), definition lookup, workload resolution, the mutation plan
and encode (Response → bytes) — everything the HTTP handler does except the socket — for:

* a ~10 KB JobSet (budget: 150 µs per review),
* a PyTorchJob with Master and Worker,
* a ~3 MB JobSet (many replicated jobs with large environment lists).

Run: ``python bench/bench_mutate.py [--seconds S]``. CPU time (``time.process_time``), best
of several rounds, so other load on the machine disturbs it little.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from webhook import admission, handlers  # noqa: E402
from webhook.jqexpr import Engine  # noqa: E402
from webhook.policy import parse_policy  # noqa: E402
from webhook.registry import load_registry  # noqa: E402

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


def per_review_us(
    body: bytes, registry: Any, engine: Engine, seconds: float
) -> tuple[float, int]:
    def once() -> int:
        req = admission.decode(body)
        result = handlers.mutate(req, registry, POLICY, engine)
        admission.encode(result.response)
        return result.ops

    ops = once()
    best = float("inf")
    deadline = time.monotonic() + seconds
    n = 1
    while time.monotonic() < deadline:
        start = time.process_time()
        for _ in range(n):
            once()
        spent = time.process_time() - start
        if spent < 0.05:
            n *= 2
            continue
        best = min(best, spent / n)
    return best * 1e6, ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="time per case")
    args = ap.parse_args()
    registry = load_registry()
    engine = Engine()
    cases = {
        "JobSet ~10 KB": jobset(10_000, jobs=3),
        "PyTorchJob": _load("kubeflow.org-pytorchjob-v1", "master-workers-running.yaml"),
        "JobSet ~3 MB": jobset(3_000_000, jobs=100),
    }
    print(f"{'case':<16} {'bytes':>9} {'ops':>5} {'µs/review':>10}")
    for name, obj in cases.items():
        body = review(obj)
        us, ops = per_review_us(body, registry, engine, args.seconds)
        print(f"{name:<16} {len(body):>9} {ops:>5} {us:>10.1f}")


if __name__ == "__main__":
    main()
