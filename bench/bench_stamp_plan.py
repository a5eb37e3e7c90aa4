"""CPU µs per call of :func:`webhook.mutation.stamp.plan` alone: the planning of one object
on the stamp lane, what the definition's expressions found evaluated once beforehand (so the
numbers are the planner's, without decode, evaluation or encode).

One table, an object by a policy in each row:

* objects: the JobSet sample (2 pod templates), a JobSet of 100 replicated jobs, the
  PyTorchJob sample;
* policies: ``bench`` (``bench_mutate.py``'s: 3 settings, one with a workload variable),
  ``variables`` (constants, workload and instance variables), ``1x64`` (one rule of 64
  labels), ``64x1`` (64 rules of one label: one run), ``64 runs`` (64 rules of one label,
  each a run of its own: overwrite and the namespaces, by name or pattern, alternate).

The policy is what the handler hands the planner: the rules that can apply to the object
(:func:`webhook.mutation.policyindex.applicable`).

Run: ``python bench/bench_stamp_plan.py [--seconds S] [--rounds N]`` (CPU time, best of
rounds of doubling size, ``N`` rounds interleaved over the rows). Made to compare two
checkouts (A/B) on one machine: run each in turn, several times.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_mutate import _load, best_us, jobset  # noqa: E402

from webhook.admission.registry import load_registry  # noqa: E402
from webhook.base.gvk import GVK  # noqa: E402
from webhook.jq.engine import Engine  # noqa: E402
from webhook.mutation import stamp  # noqa: E402
from webhook.mutation.policyfile import parse_policy  # noqa: E402
from webhook.mutation.policyindex import applicable  # noqa: E402
from webhook.workload.instances import identity  # noqa: E402
from webhook.workload.locator import locator  # noqa: E402

_LABELS = [(f"example.com/l{i}", f"v{i}") for i in range(64)]

POLICIES: dict[str, dict[str, Any]] = {
    "bench": {
        "rules": [
            {
                "name": "kai",
                "schedulerName": "kai-scheduler",
                "labels": {"kai.scheduler/queue": "research"},
                "annotations": {"example.com/owner": "$(workload.name)"},
            }
        ]
    },
    "variables": {
        "rules": [
            {
                "name": "constants",
                "schedulerName": "kai-scheduler",
                "labels": {"kai.scheduler/queue": "research"},
                "annotations": {"example.com/note": "plain $$(text)"},
            },
            {
                "name": "workload",
                "labels": {"owner": "$(workload.name)", "kind": "$(workload.kind)"},
                "annotations": {"example.com/ns": "in $(workload.namespace)"},
            },
            {
                "name": "instance",
                "match": {"components": ["replicatedjob", "worker", "master"]},
                "labels": {"role": "$(component)-$(instance)"},
                "nodeSelector": {"pool": "$(instance)"},
            },
        ]
    },
    "1x64": {"rules": [{"name": "one", "labels": dict(_LABELS)}]},
    "64x1": {"rules": [{"name": f"r{i}", "labels": dict([kv])} for i, kv in enumerate(_LABELS)]},
    "64 runs": {
        "rules": [
            {
                "name": f"r{i}",
                "labels": dict([kv]),
                "overwrite": i % 2 == 1,
                "match": {"namespaces": ["research", f"team-{i}"] if i % 4 < 2 else ["re*"]},
            }
            for i, kv in enumerate(_LABELS)
        ]
    },
}


def objects() -> dict[str, dict[str, Any]]:
    return {
        "JobSet": _load("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml"),
        "JobSet x100": jobset(100_000, jobs=100),
        "PyTorchJob": _load("kubeflow.org-pytorchjob-v1", "master-workers-running.yaml"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.5, help="time per row and round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best kept)")
    args = ap.parse_args()
    registry, engine = load_registry(), Engine()
    rows = []
    for oname, obj in objects().items():
        karta = registry.lookup(GVK.of(obj))
        assert karta is not None
        lane = stamp.lane(karta)
        assert lane is not None, oname
        found = locator(karta).find(obj, engine)
        assert not found.failed
        for pname, doc in POLICIES.items():
            gvk, _, namespace = identity(karta, obj)
            policy = applicable(parse_policy(doc), gvk, namespace, karta)
            got = stamp.plan(karta, lane, policy, obj, found.items)
            assert got is not None, (oname, pname)
            rows.append((oname, pname, len(got.ops), karta, lane, policy, obj, found.items))
    gc.freeze()
    best: dict[int, float] = {}
    for _ in range(args.rounds):
        for i, (_, _, _, karta, lane, policy, obj, items) in enumerate(rows):

            def once(args: tuple[Any, ...] = (karta, lane, policy, obj, items)) -> None:
                stamp.plan(*args)

            us = best_us(once, args.seconds)
            best[i] = min(best.get(i, us), us)
    print(f"{'object':<12} {'policy':<10} {'ops':>4} {'µs/plan':>8}")
    for i, (oname, pname, ops, *_) in enumerate(rows):
        print(f"{oname:<12} {pname:<10} {ops:>4} {best[i]:>8.2f}")
    engine.close()


if __name__ == "__main__":
    main()
