"""Create latency through a real kube-apiserver: no webhook, our webhook, a MutatingAdmissionPolicy.

Starts etcd and kube-apiserver on loopback (``tests/e2e/apiserver/kapi.py``, built by
``hack/build-tools.sh``), installs the JobSet CRD and ``karta-webhook serve --no-kube`` (a policy
that sets ``schedulerName: kai-scheduler`` and the label ``kai.scheduler/queue: research`` on
every pod template), and sets up three namespaces, one per setup, all live at once:

* ``none``: nothing registered for the namespace;
* ``webhook``: our webhook, registered with what ``karta-webhook manifests --url`` prints
  (failurePolicy Fail, so a failed call is an error), its namespaceSelector narrowed to this
  namespace's label;
* ``MAP``: a ``MutatingAdmissionPolicy`` (admissionregistration.k8s.io/v1) whose CEL JSONPatch
  sets the same schedulerName and label on every replicated job's pod template
  (``spec.replicatedJobs[*].template.spec.template``), bound to this namespace only: the
  in-process floor of the same mutation.

Each setup is checked once first: a created JobSet is read back and its templates must carry
both (``webhook``, ``MAP``) or neither (``none``). Then, after a warm-up that is not measured
(``--warmup`` creates per setup at each concurrency), ``--rounds`` rounds each run
``--creates / --rounds`` creates per setup and concurrency, the setups in an order that rotates
round by round, so drift on the machine falls on all three alike.

A create is one ``POST /apis/jobset.x-k8s.io/v1alpha2/namespaces/NS/jobsets`` of the
``leader-workers`` sample (two replicated jobs), timed by the client from sending to the last
byte of the answer, over keep-alive HTTPS connections (``http.client``), one per client thread.
The objects stay (no namespace controller runs here): 2,000 per setup and concurrency is some
tens of MB in etcd, far below its 2 GiB quota.

Printed per setup and concurrency: creates, errors (answers other than 201, and broken
connections), p50 and p99 latency over all rounds, what each adds over ``none`` at the same
concurrency, creates per second, and CPU per create of the API server, of the webhook's
processes and of this client. Goals, printed at the end: our webhook adds p50 <= 1 ms and p99
<= 5 ms at concurrency 32, shown next to what the MutatingAdmissionPolicy adds. On 2 cores the
API server is saturated well below 32 (creates/s barely grows from 1 to 32): latency there is
queueing, and what a setup adds is roughly its added CPU per create times the queue, which the
last note works out from the rates.

Run: ``python bench/bench_apiserver.py [--creates 2000] [--concurrency 1,32] [--rounds 10]
[--json FILE]``. Loopback only; everything started is stopped on the way out.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import shutil
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "e2e" / "apiserver")]

import kapi  # noqa: E402
from hooks import Webhook, configurations, register, start_webhook, wait_until  # noqa: E402
from proctree import cpu  # noqa: E402

SAMPLE = ROOT / "catalog" / "samples" / "jobset.x-k8s.io-jobset-v1alpha2" / "leader-workers.yaml"
CRD = ROOT / "tests" / "crds" / "jobset.x-k8s.io_jobsets.yaml"
GROUP_VERSION = "jobset.x-k8s.io/v1alpha2"

SETUPS = ("none", "webhook", "MAP")
#: The namespace label each setup's registration selects on.
SETUP_LABEL = "karta-bench/setup"
SCHEDULER, LABEL, QUEUE = "kai-scheduler", "kai.scheduler/queue", "research"

POLICY = f"""\
rules:
- name: kai
  schedulerName: {SCHEDULER}
  labels: {{{LABEL}: {QUEUE}}}
"""

#: The same mutation as the policy above, in CEL: per replicated job, one op for the
#: schedulerName and one for the label (the labels map, or the metadata, made when missing).
_T = "object.spec.replicatedJobs[i].template.spec.template"
_P = '"/spec/replicatedJobs/" + string(i) + "/template/spec/template'
MAP_EXPRESSION = f"""\
lists.range(size(object.spec.replicatedJobs)).map(i, JSONPatch{{
  op: "add", path: {_P}/spec/schedulerName", value: "{SCHEDULER}"
}}) +
lists.range(size(object.spec.replicatedJobs)).map(i,
  has({_T}.metadata) && has({_T}.metadata.labels)
  ? JSONPatch{{
      op: "add",
      path: {_P}/metadata/labels/" + jsonpatch.escapeKey("{LABEL}"),
      value: "{QUEUE}"
    }}
  : has({_T}.metadata)
  ? JSONPatch{{op: "add", path: {_P}/metadata/labels", value: {{"{LABEL}": "{QUEUE}"}}}}
  : JSONPatch{{op: "add", path: {_P}/metadata", value: {{"labels": {{"{LABEL}": "{QUEUE}"}}}}}}
)
"""


def map_docs(namespace_label: str) -> list[dict[str, Any]]:
    """The MutatingAdmissionPolicy and its binding to the namespaces labelled for ``MAP``."""
    name = "karta-bench-kai"
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["jobset.x-k8s.io"],
                            "apiVersions": ["v1alpha2"],
                            "operations": ["CREATE"],
                            "resources": ["jobsets"],
                        }
                    ]
                },
                "mutations": [
                    {"patchType": "JSONPatch", "jsonPatch": {"expression": MAP_EXPRESSION}}
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {SETUP_LABEL: namespace_label}}
                },
            },
        },
    ]


def webhook_docs(hook: Webhook, namespace_label: str) -> list[dict[str, Any]]:
    """What ``manifests --url`` prints, failurePolicy Fail, the workloads webhook narrowed to
    the namespaces labelled for ``webhook``."""
    docs = configurations(hook, policy=hook.policy, failure_policy="Fail")
    for doc in docs:
        if doc["kind"] != "MutatingWebhookConfiguration":
            continue
        for hook_def in doc["webhooks"]:
            if hook_def["name"].startswith("workloads."):
                hook_def["namespaceSelector"] = {"matchLabels": {SETUP_LABEL: namespace_label}}
    return docs


# -- the client


class Client:
    """One keep-alive HTTPS connection to the API server, as cluster-admin."""

    def __init__(self, plane: kapi.ControlPlane, ctx: ssl.SSLContext) -> None:
        self.port, self.ctx = plane.port, ctx
        self.headers = {
            "Authorization": f"Bearer {kapi.ADMIN_TOKEN}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        self.conn = self._connection()
        self.conn.connect()

    def _connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=60)

    def post(self, path: str, body: bytes) -> tuple[int, bytes, float]:
        """Status, body and wall seconds of one POST; status 0 when the connection broke (the
        next POST connects anew, and its time holds the handshake)."""
        t0 = time.perf_counter()
        try:
            self.conn.request("POST", path, body, self.headers)
            resp = self.conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            elapsed = time.perf_counter() - t0
            self.conn.close()
            self.conn = self._connection()
            return 0, repr(e).encode(), elapsed
        return resp.status, data, time.perf_counter() - t0

    def close(self) -> None:
        self.conn.close()


@dataclass
class Batch:
    """One run of creates in one setup at one concurrency."""

    setup: str
    concurrency: int
    round: int
    position: int
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    apiserver_cpu_s: float = 0.0
    webhook_cpu_s: float = 0.0
    client_cpu_s: float = 0.0


class Bodies:
    """The sample JobSet as request bytes, each with a name of its own."""

    def __init__(self) -> None:
        doc = yaml.safe_load(SAMPLE.read_text())
        doc["metadata"] = {"name": "@NAME@"}
        self.head, self.tail = json.dumps(doc, separators=(",", ":")).encode().split(b"@NAME@")
        self.serial = itertools.count()

    def next(self) -> bytes:
        return b"%sjs-%d%s" % (self.head, next(self.serial), self.tail)


def run_batch(clients: list[Client], path: str, bodies: Bodies, n: int, batch: Batch) -> None:
    """``n`` creates through ``batch.concurrency`` threads, each with its own connection."""
    todo = itertools.count()  # next() on it is atomic under the GIL
    lock = threading.Lock()

    def work(client: Client) -> None:
        lat: list[float] = []
        errs: list[str] = []
        while next(todo) < n:
            body = bodies.next()
            status, data, secs = client.post(path, body)
            lat.append(secs * 1e3)
            if status != 201:
                errs.append(f"{status}: {data[:300].decode(errors='replace')}")
        with lock:
            batch.latencies_ms.extend(lat)
            batch.errors += len(errs)
            batch.error_samples.extend(errs[: max(0, 3 - len(batch.error_samples))])

    threads = [threading.Thread(target=work, args=(c,)) for c in clients[: batch.concurrency]]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batch.wall_s = time.perf_counter() - t0


# -- CPU of processes we started


# -- set-up checks


def templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [rj["template"]["spec"]["template"] for rj in obj["spec"]["replicatedJobs"]]


def stamped(tmpl: dict[str, Any]) -> tuple[bool, bool]:
    """Whether a pod template carries the schedulerName, and the label."""
    labels = (tmpl.get("metadata") or {}).get("labels") or {}
    return tmpl.get("spec", {}).get("schedulerName") == SCHEDULER, labels.get(LABEL) == QUEUE


def dry_run_stamped(plane: kapi.ControlPlane, namespace: str, bodies: Bodies) -> bool:
    status, obj = plane.request(
        "POST",
        f"/apis/{GROUP_VERSION}/namespaces/{namespace}/jobsets?dryRun=All",
        json.loads(bodies.next()),
    )
    return status == 201 and all(all(stamped(t)) for t in templates(obj))


def verify(plane: kapi.ControlPlane, namespaces: dict[str, str], bodies: Bodies) -> None:
    """One JobSet created in each setup's namespace and read back: stamped by ``webhook``
    and ``MAP``, untouched in ``none``; and the two mutated ones alike."""
    specs: dict[str, Any] = {}
    for setup, ns in namespaces.items():
        body = json.loads(bodies.next())
        name = body["metadata"]["name"]
        status, created = plane.request(
            "POST", f"/apis/{GROUP_VERSION}/namespaces/{ns}/jobsets", body
        )
        if status != 201:
            raise SystemExit(f"{setup}: create answered {status}: {created}")
        status, stored = plane.request(
            "GET", f"/apis/{GROUP_VERSION}/namespaces/{ns}/jobsets/{name}"
        )
        marks = [stamped(t) for t in templates(stored)]
        want = setup != "none"
        if any(m != (want, want) for m in marks):
            raise SystemExit(
                f"{setup}: stored templates (schedulerName, label) are {marks}, want all "
                f"{(want, want)}"
            )
        specs[setup] = stored["spec"]
        print(f"check {setup:<8} ns {ns}: {len(marks)} templates, stamped: {want}")
    if specs["webhook"] != specs["MAP"]:
        print(f"note: the stored specs differ, webhook: {specs['webhook']}, MAP: {specs['MAP']}")
    else:
        print("check: the webhook and the MAP store the same spec")


def set_up(plane: kapi.ControlPlane, hook: Webhook, bodies: Bodies) -> dict[str, str]:
    """A namespace per setup, labelled for it; the webhook and the MAP registered, in effect
    and checked (:func:`verify`). Returns the namespaces by setup."""
    suffix = os.urandom(3).hex()
    namespaces = {s: f"bench-{s.lower()}-{suffix}" for s in SETUPS}
    plane.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {SETUP_LABEL: setup.lower()}},
            }
            for setup, ns in namespaces.items()
        ]
    )
    register(plane, webhook_docs(hook, "webhook"))
    plane.apply(map_docs("map"))
    for setup in ("webhook", "MAP"):
        ns = namespaces[setup]

        def in_effect(ns: str = ns) -> bool:
            return dry_run_stamped(plane, ns, bodies)

        wait_until(f"{setup} stamps a dry-run JobSet in {ns}", in_effect)
    verify(plane, namespaces, bodies)
    return namespaces


# -- results


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile, nearest rank."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def summarize(batches: list[Batch], concurrencies: list[int]) -> list[dict[str, Any]]:
    by: dict[tuple[str, int], list[Batch]] = defaultdict(list)
    for b in batches:
        by[(b.setup, b.concurrency)].append(b)
    rows: list[dict[str, Any]] = []
    base: dict[int, tuple[float, float]] = {}
    for c in concurrencies:
        for setup in SETUPS:
            bs = by[(setup, c)]
            lat = [x for b in bs for x in b.latencies_ms]
            n = len(lat)
            p50, p99 = pct(lat, 50), pct(lat, 99)
            if setup == "none":
                base[c] = (p50, p99)
            rows.append(
                {
                    "setup": setup,
                    "concurrency": c,
                    "creates": n,
                    "errors": sum(b.errors for b in bs),
                    "p50_ms": p50,
                    "p99_ms": p99,
                    "mean_ms": statistics.fmean(lat) if lat else float("nan"),
                    "added_p50_ms": p50 - base[c][0],
                    "added_p99_ms": p99 - base[c][1],
                    "creates_per_s": n / sum(b.wall_s for b in bs),
                    "apiserver_cpu_us": 1e6 * sum(b.apiserver_cpu_s for b in bs) / n,
                    "webhook_cpu_us": 1e6 * sum(b.webhook_cpu_s for b in bs) / n,
                    "client_cpu_us": 1e6 * sum(b.client_cpu_s for b in bs) / n,
                    # each round's own p50 minus the ``none`` p50 of the same round
                    "round_p50_ms": [statistics.median(b.latencies_ms) for b in bs],
                }
            )
    for row in rows:
        none = next(
            r for r in rows if r["setup"] == "none" and r["concurrency"] == row["concurrency"]
        )
        row["round_added_p50_ms"] = [
            a - b for a, b in zip(row["round_p50_ms"], none["round_p50_ms"], strict=True)
        ]
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'setup':<8} {'conc':>4} {'creates':>7} {'errors':>6} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'+p50 ms':>8} {'+p99 ms':>8} {'create/s':>8} {'apiserver µs':>12} {'webhook µs':>10} "
        f"{'client µs':>9}"
    )
    for r in rows:
        added = (
            f"{'-':>8} {'-':>8}"
            if r["setup"] == "none"
            else f"{r['added_p50_ms']:>+8.2f} {r['added_p99_ms']:>+8.2f}"
        )
        hook = f"{r['webhook_cpu_us']:>10.0f}" if r["setup"] == "webhook" else f"{'-':>10}"
        print(
            f"{r['setup']:<8} {r['concurrency']:>4} {r['creates']:>7} {r['errors']:>6} "
            f"{r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {added} {r['creates_per_s']:>8.0f} "
            f"{r['apiserver_cpu_us']:>12.0f} {hook} {r['client_cpu_us']:>9.0f}"
        )
    print(
        "(+p50/+p99: over `none` at the same concurrency; µs: CPU per create of the API server, "
        "the webhook's processes, this client)"
    )


def print_goals(rows: list[dict[str, Any]], concurrencies: list[int]) -> None:
    goal_c = 32 if 32 in concurrencies else max(concurrencies)
    get = {(r["setup"], r["concurrency"]): r for r in rows}
    hook, mp = get[("webhook", goal_c)], get[("MAP", goal_c)]
    by_round = ", ".join(f"{x:+.2f}" for x in hook["round_added_p50_ms"])
    for what, key, limit in (("p50", "added_p50_ms", 1.0), ("p99", "added_p99_ms", 5.0)):
        ok = "✓" if hook[key] <= limit else "✗"
        print(
            f"goal: webhook added {what} at concurrency {goal_c} <= {limit:g} ms: "
            f"{hook[key]:+.2f} ms {ok} (MAP adds {mp[key]:+.2f} ms)"
        )
    print(f"      webhook added p50 by round: {by_round}")
    lo = min(concurrencies)
    if goal_c != lo:
        # Closed loop: mean latency = concurrency / rate. When the rate does not grow with
        # the concurrency, the API server is saturated and latency there is queueing.
        r_lo, r_hi = get[("none", lo)]["creates_per_s"], get[("none", goal_c)]["creates_per_s"]
        little = {
            s: 1e3 * goal_c * (1 / get[(s, goal_c)]["creates_per_s"] - 1 / r_hi)
            for s in ("webhook", "MAP")
        }
        saturated = (
            f"saturated: at {goal_c} the latency is mostly queueing, and a setup adds about "
            "its added CPU per create times the queue; "
            if r_hi < 2 * r_lo
            else ""
        )
        print(
            f"note: `none` makes {r_lo:.0f} creates/s at concurrency {lo} and {r_hi:.0f} at "
            f"{goal_c} ({r_hi / r_lo:.2f}x); {saturated}concurrency / rate predicts a mean of "
            f"{little['webhook']:+.1f} ms for the webhook, {little['MAP']:+.1f} ms for the MAP"
        )
    errors = sum(r["errors"] for r in rows)
    print(f"goal: no errors: {errors} {'✓' if errors == 0 else '✗'}")


# -- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--creates", type=int, default=2000, help="per setup and concurrency")
    ap.add_argument("--concurrency", default="1,32", help="client threads, comma-separated")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    ap.add_argument("--warmup", type=int, default=50, help="per setup and concurrency, unmeasured")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the raw figures here")
    ap.add_argument("--keep", action="store_true", help="keep the state folder (logs, etcd)")
    args = ap.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    per_round = [args.creates // args.rounds + (i < args.creates % args.rounds)
                 for i in range(args.rounds)]  # fmt: skip
    try:
        tools = kapi.tools_dir()
        kapi.kubectl_binary()
    except kapi.ToolsMissing as e:
        raise SystemExit(str(e)) from None

    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="karta-bench-apiserver-"))
    plane: kapi.ControlPlane | None = None
    hook: Webhook | None = None
    clients: list[Client] = []
    batches: list[Batch] = []
    try:
        plane = kapi.start(tmp / "kapi", tools)
        print(f"control plane up in {time.monotonic() - started:.1f} s ({tmp})")
        plane.kubectl("apply", "--server-side", "-f", str(CRD))
        plane.wait_established("jobsets.jobset.x-k8s.io")
        hook = start_webhook(tmp / "serve", POLICY, ["--no-kube"])
        bodies = Bodies()
        namespaces = set_up(plane, hook, bodies)

        ctx = ssl.create_default_context(cafile=str(plane.ca))
        clients = [Client(plane, ctx) for _ in range(max(concurrencies))]
        api_pid, hook_pid = plane.procs["kube-apiserver"].pid, hook.proc.pid

        def one(setup: str, c: int, n: int, rnd: int, pos: int) -> Batch:
            path = f"/apis/{GROUP_VERSION}/namespaces/{namespaces[setup]}/jobsets"
            b = Batch(setup, c, rnd, pos)
            a0, h0, c0 = cpu(api_pid), cpu(hook_pid), time.process_time()
            run_batch(clients, path, bodies, n, b)
            b.apiserver_cpu_s, b.webhook_cpu_s = cpu(api_pid) - a0, cpu(hook_pid) - h0
            b.client_cpu_s = time.process_time() - c0
            return b

        for c in concurrencies:
            for setup in SETUPS:
                w = one(setup, c, args.warmup, -1, 0)
                if w.errors:
                    raise SystemExit(f"warm-up {setup} at {c}: {w.errors} errors: "
                                     f"{w.error_samples}")  # fmt: skip
        measured = time.monotonic()
        for rnd, n in enumerate(per_round):
            order = SETUPS[rnd % 3 :] + SETUPS[: rnd % 3]
            for c in concurrencies:
                for pos, setup in enumerate(order):
                    batches.append(one(setup, c, n, rnd, pos))
            done = sum(per_round[: rnd + 1])
            print(f"round {rnd + 1}/{args.rounds}: {done} creates per setup and concurrency, "
                  f"{time.monotonic() - measured:.0f} s", flush=True)  # fmt: skip
        measured_s = time.monotonic() - measured
        etcd_mb = (
            sum(f.stat().st_size for f in (tmp / "kapi").glob("etcd-*/member/snap/db")) / 2**20
        )
    finally:
        for client in clients:
            client.close()
        if hook is not None:
            hook.stop()
        if plane is not None:
            plane.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    wall = time.monotonic() - started

    rows = summarize(batches, concurrencies)
    print()
    print(f"{args.creates} creates per setup and concurrency in {args.rounds} interleaved rounds "
          f"(after {args.warmup} warm-up creates each); JobSet {SAMPLE.name}")  # fmt: skip
    print_table(rows)
    print_goals(rows, concurrencies)
    for b in batches:
        for sample in b.error_samples:
            print(f"error ({b.setup}, {b.concurrency}): {sample}")
    print(f"measured {measured_s:.0f} s, wall {wall:.0f} s; etcd database {etcd_mb:.0f} MB")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "creates": args.creates,
                    "rounds": args.rounds,
                    "warmup": args.warmup,
                    "concurrency": concurrencies,
                    "wall_s": wall,
                    "measured_s": measured_s,
                    "etcd_mb": etcd_mb,
                    "map_expression": MAP_EXPRESSION,
                    "summary": rows,
                    "batches": [vars(b) for b in batches],
                },
                indent=1,
            )
        )
        print(f"raw figures in {args.json}")


if __name__ == "__main__":
    main()
