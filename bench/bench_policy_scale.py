"""What policy objects that do not match a request cost it (issue 49): CPU µs per ``/mutate``
review of a JobSet in-process (decode, mutate, encode), with 0, 50 and 500 ``KartaPolicy``
objects besides the two that apply to it, and 1,000 or 10,000 namespaces known.

The two policies that apply are the same in every row of a mix, so a row's cost over the
``0`` row of its mix is what the others cost. The others are for other kinds (a third),
the JobSet in other namespaces, by name (a third) and by pattern (a third). Mixes:

* ``plain``: no selector or metadata value anywhere;
* ``selectors``: the two that apply use ``namespaceSelector``, ``objectSelector``,
  ``$(namespace.labels['team'])`` and ``$(workload.labels['app'])``, and so does every other
  policy: the state issue 49 measured 1.8-1.9x in;
* ``namespace values``: the two that apply read ``$(namespace.annotations[...])`` only (the
  decision is kept per kind and namespace), the others as in ``selectors``.

The policies in force are what the server holds: those within the bounds of one policy
(``within_bounds``: 200 rules), the rest left out, as the ``in force`` column says.

Run: ``python bench/bench_policy_scale.py [--seconds S] [--rounds N] [--namespaces 1000,10000]``
(CPU time, best of ``N`` interleaved rounds). Goals:
50 objects within 10 % of 0, 500 within 25 % (the ``x 0`` column), in every mix.
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

from bench_mutate import _load, best_us, review  # noqa: E402

from webhook.admission import handlers  # noqa: E402
from webhook.admission import review as admission  # noqa: E402
from webhook.admission.registry import load_registry  # noqa: E402
from webhook.jq.engine import Engine  # noqa: E402
from webhook.mutation.policy import EMPTY, Policy  # noqa: E402
from webhook.mutation.policyobject import (  # noqa: E402
    API_VERSION,
    KIND,
    combine,
    parse_policy_object,
    within_bounds,
)
from webhook.mutation.scope import NamespaceMeta  # noqa: E402

KINDS = ("PyTorchJob", "RayCluster", "LeaderWorkerSet", "Deployment", "StatefulSet", "Job")


def _object(name: str, rule: dict[str, Any]) -> Policy:
    obj = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}}
    obj["spec"] = {"rules": [{"name": "r", **rule}]}
    return parse_policy_object(obj)


def applying(mix: str) -> list[Policy]:
    """The two policies that apply to the JobSet in ``research``."""
    if mix == "plain":
        first = {"match": {"kinds": ["JobSet"]}, "labels": {"kai.scheduler/queue": "research"}}
        second = {"schedulerName": "kai-scheduler", "annotations": {"example.com/owner": "x"}}
    elif mix == "selectors":
        first = {
            "match": {"kinds": ["JobSet"], "namespaceSelector": {"matchLabels": {"team": "ml"}}},
            "labels": {"kai.scheduler/queue": "$(namespace.labels['team'])"},
        }
        second = {
            "match": {
                "objectSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}
            },
            "schedulerName": "kai-scheduler",
            "annotations": {"example.com/app": "$(workload.labels['app'])"},
        }
    else:
        first = {
            "match": {"kinds": ["JobSet"]},
            "labels": {"kai.scheduler/queue": "$(namespace.annotations['queue'])"},
        }
        second = {"schedulerName": "kai-scheduler"}
    return [_object("aa-applies-1", first), _object("aa-applies-2", second)]


def others(n: int, mix: str) -> list[Policy]:
    """``n`` policies that do not apply to the JobSet in ``research``."""
    out = []
    for i in range(n):
        match: dict[str, Any]
        if i % 3 == 0:
            match = {"kinds": [KINDS[i % len(KINDS)]]}
        elif i % 3 == 1:
            match = {"kinds": ["JobSet"], "namespaces": [f"team-{i}"]}
        else:
            match = {"namespaces": [f"proj-{i}-*"]}
        rule: dict[str, Any] = {"match": match, "labels": {f"example.com/p{i}": "v"}}
        if mix != "plain":
            match["namespaceSelector"] = {"matchLabels": {"team": f"t{i}"}}
            rule["annotations"] = {f"example.com/a{i}": "$(namespace.labels['team'])"}
            if i % 2:
                match["objectSelector"] = {"matchLabels": {"app": f"a{i}"}}
                rule["annotations"] = {f"example.com/a{i}": "$(workload.labels['app'])"}
        out.append(_object(f"p-{i:04d}", rule))
    return out


def in_force(objects: list[Policy]) -> Policy:
    kept, _ = within_bounds(EMPTY, objects)
    return combine(EMPTY, kept)


def namespaces(n: int) -> dict[str, NamespaceMeta]:
    out = {
        f"ns-{i}": NamespaceMeta({"team": f"t{i}", "kubernetes.io/metadata.name": f"ns-{i}"})
        for i in range(n)
    }
    out["research"] = NamespaceMeta(
        {"team": "ml", "kubernetes.io/metadata.name": "research"}, {"queue": "research"}
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.5, help="time per case")
    ap.add_argument("--namespaces", default="1000,10000")
    ap.add_argument("--counts", default="0,50,500")
    ap.add_argument("--mixes", default="plain,selectors,namespace values")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per table")
    args = ap.parse_args()
    registry = load_registry()
    engine = Engine()
    obj = _load("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml")
    obj["metadata"]["labels"] = {"app": "trainer"}
    body = review(obj)
    gc.freeze()
    print("| mix | namespaces | other policies | rules in force | ops | µs/review | x 0 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mix in args.mixes.split(","):
        for n_ns in (int(x) for x in args.namespaces.split(",")):
            known = namespaces(n_ns)
            policies = {
                n: in_force([*applying(mix), *others(n, mix)])
                for n in map(int, args.counts.split(","))
            }
            # interleaved rounds: the best of each, so the machine's drift reaches every row
            best: dict[int, float] = {}
            ops: dict[int, int] = {}
            for _ in range(args.rounds):
                for n, policy in policies.items():

                    def once(
                        policy: Policy = policy,
                        n: int = n,
                        known: dict[str, NamespaceMeta] = known,
                        ops: dict[int, int] = ops,
                    ) -> None:
                        result = handlers.mutate(
                            admission.decode(body), registry, policy, engine, known
                        )
                        admission.encode(result.response)
                        ops[n] = result.ops

                    best[n] = min(
                        best.get(n, float("inf")), best_us(once, args.seconds / args.rounds)
                    )
            base = best[min(best)]
            for n, us in best.items():
                print(
                    f"| {mix} | {n_ns:,} | {n} | {len(policies[n].rules)} | {ops[n]} | "
                    f"{us:.1f} | {us / base:.2f} |"
                )
    engine.close()


if __name__ == "__main__":
    main()
