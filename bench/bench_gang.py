"""Microseconds of CPU per AdmissionReview for the native gang, in-process on one core:

* ``workload``: README's JobSet CREATE at ``/mutate`` under a policy with a gang rule (it stamps
  the gang label) beside the same policy without ``gang`` (the label cost alone);
* ``pod``: one of its pods' CREATE at ``/gang`` (decode, the owner walk with the owners
  already cached as the server keeps them for 5 s, the pod placed, its group found, encode),
  for the workload's first pod (the JobSet resolved in full) and its others (resolved once
  per resourceVersion); the first pod of a workload also waits for two GETs (Job, JobSet),
  which cost the API server's round trips, not this process's CPU;
* ``off``: with no rule having ``gang`` the Pod webhook is not registered (``manifests``, the
  keeper): no pod reaches the server, 0 µs; shown beside, what a stray request would cost.

Run: ``python bench/bench_gang.py [--seconds S]``. CPU time (``time.process_time``); the cases
are measured in interleaved rounds (A, B, C, A, B, C, ...) and the best round of each is
kept, so that load on the shared machine shifts them alike.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webhook.admission import gangpod, handlers  # noqa: E402
from webhook.admission import review as admission  # noqa: E402
from webhook.admission.manifests import GANG_WEBHOOK, mutating_webhook_configuration  # noqa: E402
from webhook.admission.registry import load_registry  # noqa: E402
from webhook.jq.engine import Engine  # noqa: E402
from webhook.mutation.policyfile import parse_policy  # noqa: E402
from webhook.workload.gang import GANG_LABEL  # noqa: E402

SAMPLE = ROOT / "catalog/samples/jobset.x-k8s.io-jobset-v1alpha2/leader-workers.yaml"
GANG = parse_policy({"rules": [{"name": "g", "match": {"kinds": ["JobSet"]}, "gang": "native"}]})
LABEL = parse_policy(
    {"rules": [{"name": "l", "match": {"kinds": ["JobSet"]}, "labels": {GANG_LABEL: "native"}}]}
)
OFF = parse_policy({"rules": [{"name": "q", "labels": {"kai.scheduler/queue": "research"}}]})


def _review(obj: Mapping[str, Any], resource: str) -> bytes:
    api_version = str(obj["apiVersion"])
    group, _, version = api_version.rpartition("/")
    kind = {"group": group, "version": version, "kind": obj["kind"]}
    req = {
        "uid": str(uuid.uuid4()), "kind": kind, "resource": {**kind, "resource": resource},
        "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"],
        "operation": "CREATE", "userInfo": {"username": "bench"}, "object": obj,
        "oldObject": None, "dryRun": False,
    }  # fmt: skip
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
    ).encode()


def _ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    m = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
    }


def world() -> tuple[dict[str, Any], dict[str, Any], Callable[..., Any]]:
    js = yaml.safe_load(SAMPLE.read_text())
    js["metadata"]["uid"] = str(uuid.uuid4())
    js["metadata"]["resourceVersion"] = "1"  # as a GET gives it
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "trainer-workers-0", "namespace": "research", "uid": str(uuid.uuid4()), "ownerReferences": [_ref(js)]},
        "spec": copy.deepcopy(js["spec"]["replicatedJobs"][1]["template"]["spec"]),
    }  # fmt: skip
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "trainer-workers-0-0-x7k2p", "namespace": "research",
            "labels": {GANG_LABEL: "native", "jobset.sigs.k8s.io/replicatedjob-name": "workers"},
            "ownerReferences": [_ref(job)],
        },
        "spec": copy.deepcopy(js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]),
    }  # fmt: skip
    by_uid = {o["metadata"]["uid"]: o for o in (js, job)}
    return js, pod, lambda ns, ref, deadline: by_uid.get(ref["uid"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.3, help="per case per round")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    registry, engine = load_registry(), Engine()
    js, pod, owners = world()
    js_body, pod_body = _review(js, "jobsets"), _review(pod, "pods")

    def workload(policy: Any) -> Callable[[], Any]:
        return lambda: admission.encode(
            handlers.mutate(admission.decode(js_body), registry, policy, engine).response
        )

    def at_gang(policy: Any, first: bool = False) -> Callable[[], Any]:
        def run() -> Any:
            if first:  # the workload not resolved yet: the first of its pods
                gangpod._RESOLVED.clear()
            req = admission.decode(pod_body)
            return admission.encode(
                gangpod.mutate_pod(req, registry, policy, engine, owners).response
            )

        return run

    cases = {
        "workload CREATE, gang rule (/mutate)": workload(GANG),
        "workload CREATE, same label without gang": workload(LABEL),
        "pod CREATE (/gang), the workload's first pod": at_gang(GANG, first=True),
        "pod CREATE (/gang), its other pods": at_gang(GANG),
        "pod CREATE (/gang), feature off (never sent)": at_gang(OFF),
    }
    got = gangpod.mutate_pod(admission.decode(pod_body), registry, GANG, engine, owners)
    assert got.outcome == "patched", got
    gc.collect()
    gc.freeze()
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(args.rounds):
        for name, fn in cases.items():
            n, start, end = 0, time.process_time(), time.process_time() + args.seconds
            while time.process_time() < end:
                fn()
                n += 1
            best[name] = min(best[name], (time.process_time() - start) / n * 1e6)
    hooks = [h["name"] for h in mutating_webhook_configuration([])["webhooks"]]
    print(f"{'case':48} {'µs CPU/review':>14}")
    for name, us in best.items():
        print(f"{name:48} {us:14.0f}")
    print(f"feature off: Pod webhook registered: {GANG_WEBHOOK in hooks} (0 µs per pod)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
