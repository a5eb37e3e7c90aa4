"""What the chain costs (issue 45 item 6): workload create -> all its pods bound, with our webhook
and without, on the scheduling plane of the end-to-end suite.

Starts the plane (``tests/e2e/apiserver/schedplane.py``: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, the JobSet and LWS managers with their pod webhooks,
4 GPU nodes tainted ``nvidia.com/gpu:NoSchedule`` and 2 CPU nodes, all built by
``hack/build-tools.sh``) and ``karta-webhook serve --no-kube`` with a policy that stamps every
pod template (``schedulerName: default-scheduler``, the queue label, an annotation), registered
as ``karta-webhook manifests --url`` prints it (failurePolicy Fail) but narrowed to namespaces
labelled ``karta-bench/setup=webhook``. Two workloads:

* ``jobset-12gpu``: README's leader/worker JobSet (1 leader + 2 workers, 4 GPUs a pod), with
  the GPU toleration and nodeSelector in its own templates so it binds with or without us:
  JobSet controller -> 2 Jobs -> Job controller -> 3 pods -> scheduler;
* ``job-100``: a Job of 100 pods (parallelism = completions = 100) on the CPU nodes.

Each round creates each workload once per setup (``none``, ``webhook``) in a fresh namespace,
the setups in an order that alternates round by round; the time is from sending the create to
the watch event that shows the last pod's ``spec.nodeName`` (a watch opened before the create).
Then the namespace's pods are force-deleted (no kubelet) and the namespace dropped. Printed per
workload and setup: rounds, median, mean, min, max; and the goal: added median <= 10 % of the
chain without the webhook. Run: ``python bench/bench_plane.py [--rounds 10] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "e2e" / "apiserver")]

import kapi  # noqa: E402
import schedplane  # noqa: E402
from hooks import configurations, register, start_webhook, wait_until  # noqa: E402

SAMPLE = ROOT / "catalog" / "samples" / "jobset.x-k8s.io-jobset-v1alpha2" / "leader-workers.yaml"
SETUP_LABEL = "karta-bench/setup"
QUEUE = "kai.scheduler/queue"
POLICY = f"""\
rules:
- name: kai
  schedulerName: default-scheduler
  labels: {{{QUEUE}: research}}
  annotations: {{example.com/owner: "$(workload.name)"}}
"""
GPU = {
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"nvidia.com/gpu.present": "true"},
}


def jobset(ns: str) -> tuple[str, dict[str, Any], int]:
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["metadata"] = {"name": "trainer", "namespace": ns}
    for rj in doc["spec"]["replicatedJobs"]:
        rj["template"]["spec"]["template"]["spec"].update(GPU)
    return f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets", doc, 3


def job(ns: str, n: int = 100) -> tuple[str, dict[str, Any], int]:
    doc = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "wide", "namespace": ns},
        "spec": {"parallelism": n, "completions": n, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}},
    }  # fmt: skip
    return f"/apis/batch/v1/namespaces/{ns}/jobs", doc, n


WORKLOADS = {"jobset-12gpu": jobset, "job-100": job}


def create_to_bound(sp: schedplane.SchedulingPlane, ns: str, workload: str) -> float:
    """Seconds from sending the create to the event that shows the last pod bound."""
    path, body, count = WORKLOADS[workload](ns)
    ctx = ssl.create_default_context(cafile=str(sp.cp.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", sp.cp.port, context=ctx, timeout=120)
    headers = {"Authorization": f"Bearer {kapi.ADMIN_TOKEN}"}
    conn.request(
        "GET", f"/api/v1/namespaces/{ns}/pods?watch=1&allowWatchBookmarks=false", headers=headers
    )
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    start = time.monotonic()
    status, out = sp.cp.request("POST", path, body)
    assert status == 201, out
    bound: set[str] = set()
    try:
        while len(bound) < count:
            line = resp.readline()
            if not line:  # the API server ended the watch early: poll for the rest
                while sum(bool(p["spec"].get("nodeName")) for p in sp.pods(ns)) < count:
                    time.sleep(0.05)
                break
            ev = json.loads(line)
            pod = ev["object"]
            if ev["type"] in ("ADDED", "MODIFIED") and pod["spec"].get("nodeName"):
                bound.add(pod["metadata"]["name"])
        return time.monotonic() - start
    finally:
        conn.close()


def stamped(sp: schedplane.SchedulingPlane, ns: str) -> bool:
    pods = sp.pods(ns)
    return bool(pods) and all(
        p["metadata"].get("labels", {}).get(QUEUE) == "research" for p in pods
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the raw figures here")
    args = ap.parse_args()
    try:
        tools = schedplane.plane_tools()
        kapi.kubectl_binary()
    except kapi.ToolsMissing as e:
        raise SystemExit(str(e)) from None
    tmp = Path(tempfile.mkdtemp(prefix="karta-bench-plane-"))
    started = time.monotonic()
    sp = schedplane.start(tmp / "plane", tools)
    print(f"scheduling plane up in {time.monotonic() - started:.1f} s ({tmp})")
    hook = None
    load_before = os.getloadavg()
    times: dict[tuple[str, str], list[float]] = {}
    try:
        hook = start_webhook(tmp / "serve", POLICY, ["--no-kube"])
        docs = configurations(hook, policy=hook.policy, failure_policy="Fail")
        for hook_def in docs[0]["webhooks"]:
            if hook_def["name"].startswith("workloads."):
                hook_def["namespaceSelector"] = {"matchLabels": {SETUP_LABEL: "webhook"}}
        register(sp.cp, docs)
        probe = sp.namespace("probe", labels={SETUP_LABEL: "webhook"})

        def mutated() -> bool:
            status, out = sp.cp.request(
                "POST", f"/api/v1/namespaces/{probe}/pods?dryRun=All",
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            )  # fmt: skip
            return status == 201 and QUEUE in out["metadata"].get("labels", {})

        wait_until("the webhook registered", mutated)
        setups = ("none", "webhook")
        for rnd in range(-args.warmup, args.rounds):
            order = setups if rnd % 2 == 0 else setups[::-1]
            for workload in WORKLOADS:
                for setup in order:
                    ns = sp.namespace("bench", labels={SETUP_LABEL: setup})
                    t = create_to_bound(sp, ns, workload)
                    if stamped(sp, ns) != (setup == "webhook"):
                        raise SystemExit(f"{workload} in {setup}: pods stamped = {stamped(sp, ns)}")
                    sp.clean(ns)
                    if rnd >= 0:
                        times.setdefault((workload, setup), []).append(t)
                        print(f"round {rnd} {workload:13} {setup:8} {t * 1000:8.0f} ms", flush=True)
    finally:
        if hook is not None:
            hook.stop()
        sp.stop()
    load_after = os.getloadavg()
    print(f"\nload average before {load_before[0]:.1f}, after {load_after[0]:.1f}")
    print(
        f"{'workload':13} {'setup':8} {'n':>3} {'median':>8} {'mean':>8} {'min':>8} {'max':>8}  (ms)"
    )
    added: dict[str, float] = {}
    for (workload, setup), ts in times.items():
        ms = [t * 1000 for t in ts]
        print(f"{workload:13} {setup:8} {len(ms):3} {statistics.median(ms):8.0f} "
              f"{statistics.mean(ms):8.0f} {min(ms):8.0f} {max(ms):8.0f}")  # fmt: skip
    for workload in WORKLOADS:
        base = statistics.median(times[(workload, "none")])
        added[workload] = (statistics.median(times[(workload, "webhook")]) - base) / base
        verdict = "met" if added[workload] <= 0.10 else "NOT met"
        print(f"goal {workload}: added median {added[workload] * 100:+.1f} % of the chain "
              f"without the webhook (<= 10 %): {verdict}")  # fmt: skip
    if args.json:
        raw = {f"{w}/{s}": ts for (w, s), ts in times.items()}
        args.json.write_text(json.dumps({"times_s": raw, "added": added}, indent=1))


if __name__ == "__main__":
    main()
