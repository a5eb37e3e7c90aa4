"""Create latency through a real kube-apiserver: no webhook, ours, the Go floor, a MutatingAdmissionPolicy.

Starts etcd and kube-apiserver on loopback (``tests/e2e/apiserver/kapi.py``, built by
``hack/build-tools.sh``), installs the JobSet CRD and ``karta-webhook serve --no-kube`` (a policy
that sets ``schedulerName: kai-scheduler`` and the label ``kai.scheduler/queue: research`` on
every pod template), builds and starts the Go floor, and sets up four namespaces, one per setup,
all live at once:

* ``none``: nothing registered for the namespace;
* ``webhook``: our webhook, registered with what ``karta-webhook manifests --url`` prints
  (failurePolicy Fail, so a failed call is an error), its namespaceSelector narrowed to this
  namespace's label;
* ``gofloor``: ``bench/gofloor`` (Go's ``net/http`` over TLS, built with the local toolchain,
  ``GOTOOLCHAIN=local``): it decodes the whole review and answers the same patch as ours,
  computed from each object; registered as ours is (a copy of our workloads webhook, its URL
  and namespace label changed), with our certificate: the floor of any webhook;
* ``baseline`` (with ``--baseline DIR``): ``serve`` from another checkout of this project
  (``git archive COMMIT | tar -x -C DIR``), registered as ours is: an A/B of two builds in the
  same run;
* ``MAP``: a ``MutatingAdmissionPolicy`` (admissionregistration.k8s.io/v1) whose CEL JSONPatch
  sets the same schedulerName and label on every replicated job's pod template
  (``spec.replicatedJobs[*].template.spec.template``), bound to this namespace only: the
  in-process floor of the same mutation.

Each setup is checked once first: a created JobSet is read back and its templates must carry
both (``webhook``, ``gofloor``, ``MAP``) or neither (``none``). Then, after a warm-up that is not measured
(``--warmup`` creates per setup at each concurrency), ``--rounds`` rounds each run
``--creates / --rounds`` creates per setup and concurrency, the setups in an order that rotates
round by round, so drift on the machine falls on all four alike.

A create is one ``POST /apis/jobset.x-k8s.io/v1alpha2/namespaces/NS/jobsets`` of the
``leader-workers`` sample (two replicated jobs), timed by the client from sending to the last
byte of the answer, over keep-alive HTTPS connections (``http.client``), one per client thread.
The objects stay (no namespace controller runs here): 2,000 per setup and concurrency is some
tens of MB in etcd, far below its 2 GiB quota.

Printed per setup and concurrency: creates, errors (answers other than 201, and broken
connections), p50 and p99 latency over all rounds, what each adds over ``none`` at the same
concurrency, creates per second, and CPU per create of the API server, of the webhook's
processes (ours: gunicorn's master, its workers and their sandbox children; the Go floor's one
process) and of this client, and the machine's load average before and after. Goals (issue
37), printed at the end: our webhook's CPU per create <= 0.4 ms; its added p50 within 0.5 ms
of the Go floor's at concurrency 1 and within 1.5 x the Go floor's at 32; its creates/s at 32
>= 0.8 x the Go floor's. Also shown: turn 3's goal (added p50 <= 1 ms and p99 <= 5 ms at 32)
next to what the MutatingAdmissionPolicy adds. On 2 cores the API server is saturated well
below 32 (creates/s barely grows from 1 to 32): latency there is queueing, and what a setup
adds is roughly its added CPU per create times the queue, which the last note works out from
the rates.

Run: ``python bench/bench_apiserver.py [--creates 2000] [--concurrency 1,32] [--rounds 10]
[--json FILE] [--serve-arg=--workers=1 ...] [--policy-objects N --baseline DIR]``. With
``--policy-objects 50 --baseline DIR`` (DIR: this same checkout), ``webhook`` serves the policy
as a KartaPolicy beside 50 that do not apply and ``baseline`` beside none: what they cost a
create through the API server (issue 49). Without ``go`` on PATH the Go floor is left out
(said so). Loopback only; everything started is stopped on the way out.
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
import subprocess
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
from kapi import free_port  # noqa: E402
from proctree import cpu  # noqa: E402

SAMPLE = ROOT / "catalog" / "samples" / "jobset.x-k8s.io-jobset-v1alpha2" / "leader-workers.yaml"
CRD = ROOT / "tests" / "crds" / "jobset.x-k8s.io_jobsets.yaml"
GROUP_VERSION = "jobset.x-k8s.io/v1alpha2"

SETUPS = ("none", "webhook", "baseline", "gofloor", "MAP")
#: The setups that call a webhook server, whose processes' CPU is measured.
SERVERS = ("webhook", "baseline", "gofloor")
#: The namespace label each setup's registration selects on.
SETUP_LABEL = "karta-bench/setup"
SCHEDULER, LABEL, QUEUE = "kai-scheduler", "kai.scheduler/queue", "research"

POLICY = f"""\
rules:
- name: kai
  schedulerName: {SCHEDULER}
  labels: {{{LABEL}: {QUEUE}}}
"""


def policy_objects(others: int) -> str:
    """:data:`POLICY` as a KartaPolicy, and ``others`` KartaPolicies that do not apply to the
    bench's JobSets (issue 49): for other kinds and for JobSets in other namespaces, with
    objectSelectors and values read from the workload's labels, as a platform's teams have them."""
    kinds = ("PyTorchJob", "RayCluster", "LeaderWorkerSet", "Deployment", "StatefulSet", "Job")
    docs = [{"apiVersion": "policies.karta-webhook.run.ai/v1alpha1", "kind": "KartaPolicy",
             "metadata": {"name": "aa-kai"}, "spec": yaml.safe_load(POLICY)}]  # fmt: skip
    for i in range(others):
        match: dict[str, Any] = (
            {"kinds": [kinds[i % len(kinds)]]}
            if i % 2 == 0
            else {"kinds": ["JobSet"], "namespaces": [f"team-{i}"]}
        )
        match["objectSelector"] = {"matchLabels": {"team": f"t{i}"}}
        rule = {"name": "r", "match": match, "labels": {f"example.com/p{i}": "v"},
                "annotations": {f"example.com/a{i}": "$(workload.labels['team'])"}}  # fmt: skip
        docs.append({"apiVersion": "policies.karta-webhook.run.ai/v1alpha1",
                     "kind": "KartaPolicy", "metadata": {"name": f"p-{i:04d}"},
                     "spec": {"rules": [rule]}})  # fmt: skip
    return yaml.safe_dump_all(docs)


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
    # manifests --policy reads a policy document (its operations); policy objects: CREATE
    plain = "kind: KartaPolicy" not in hook.policy.read_text()
    docs = configurations(hook, policy=hook.policy if plain else None, failure_policy="Fail")
    for doc in docs:
        if doc["kind"] != "MutatingWebhookConfiguration":
            continue
        for hook_def in doc["webhooks"]:
            if hook_def["name"].startswith("workloads."):
                hook_def["namespaceSelector"] = {"matchLabels": {SETUP_LABEL: namespace_label}}
    return docs


def baseline_docs(hook: Webhook, namespace_label: str) -> list[dict[str, Any]]:
    """Another build's workloads webhook, registered as ours is, under a name of its own."""
    conf = next(d for d in webhook_docs(hook, namespace_label)
                if d["kind"] == "MutatingWebhookConfiguration")  # fmt: skip
    conf["metadata"] = {"name": "karta-bench-baseline"}
    conf["webhooks"] = [h for h in conf["webhooks"] if h["name"].startswith("workloads.")]
    return [conf]


def gofloor_docs(
    ours: list[dict[str, Any]], url: str, namespace_label: str
) -> list[dict[str, Any]]:
    """The Go floor registered as ours is: a copy of our workloads webhook (rules, failure
    policy, timeout, CA bundle: the floor serves our certificate), its name, URL and
    namespace label changed."""
    conf = next(d for d in ours if d["kind"] == "MutatingWebhookConfiguration")
    hook_def = json.loads(
        json.dumps(next(h for h in conf["webhooks"] if h["name"].startswith("workloads.")))
    )
    hook_def["name"] = "gofloor.karta-bench.example.com"
    hook_def["clientConfig"] = {"url": url, "caBundle": hook_def["clientConfig"]["caBundle"]}
    hook_def["namespaceSelector"] = {"matchLabels": {SETUP_LABEL: namespace_label}}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "karta-bench-gofloor"},
            "webhooks": [hook_def],
        }
    ]


class GoFloor:
    """``bench/gofloor`` built with the local Go toolchain and started on our certificate,
    stamping what :data:`POLICY` stamps."""

    def __init__(self, tmp: Path, certs: Path) -> None:
        go = shutil.which("go")
        if go is None:
            raise FileNotFoundError("go")
        exe = tmp / "gofloor"
        env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
        subprocess.run(
            [go, "build", "-o", str(exe), "."], cwd=ROOT / "bench" / "gofloor", env=env,
            check=True, timeout=600,
        )  # fmt: skip
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}/mutate"
        self.log = (tmp / "gofloor.log").open("ab")
        self.proc = subprocess.Popen(
            [str(exe), f"-addr=127.0.0.1:{self.port}", f"-cert={certs / 'tls.crt'}",
             f"-key={certs / 'tls.key'}", f"-scheduler={SCHEDULER}", f"-label={LABEL}={QUEUE}"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))

        def up() -> bool:
            if self.proc.poll() is not None:
                raise SystemExit(f"the Go floor exited {self.proc.returncode}; see {tmp}")
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=2)
                conn.request("GET", "/healthz")
                return conn.getresponse().status == 200
            except OSError:
                return False

        wait_until("the Go floor answers /healthz", up)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


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
    webhook_cpu_s: float = 0.0  #: of the setup's own server (ours, or the Go floor)
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
    """One JobSet created in each setup's namespace and read back: stamped by ``webhook``,
    ``gofloor`` and ``MAP``, untouched in ``none``; and the mutated ones alike."""
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
    for other in ("baseline", "gofloor", "MAP"):
        if other not in specs:
            continue
        if specs["webhook"] != specs[other]:
            raise SystemExit(
                f"the stored specs differ, webhook: {specs['webhook']}, {other}: {specs[other]}"
            )
        print(f"check: the webhook and the {other} store the same spec")


def set_up(
    plane: kapi.ControlPlane,
    hook: Webhook,
    baseline: Webhook | None,
    floor: GoFloor | None,
    bodies: Bodies,
) -> dict[str, str]:
    """A namespace per setup, labelled for it; the webhook (and the baseline), the Go floor
    and the MAP registered, in effect and checked (:func:`verify`). Returns the namespaces by
    setup."""
    suffix = os.urandom(3).hex()
    present = {"gofloor": floor is not None, "baseline": baseline is not None}
    namespaces = {s: f"bench-{s.lower()}-{suffix}" for s in SETUPS if present.get(s, True)}
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
    ours = webhook_docs(hook, "webhook")
    register(plane, ours)
    if baseline is not None:
        plane.apply(baseline_docs(baseline, "baseline"))
    if floor is not None:
        plane.apply(gofloor_docs(ours, floor.url, "gofloor"))
    plane.apply(map_docs("map"))
    for setup in namespaces:
        if setup == "none":
            continue
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


def summarize(
    batches: list[Batch], concurrencies: list[int], setups: tuple[str, ...]
) -> list[dict[str, Any]]:
    by: dict[tuple[str, int], list[Batch]] = defaultdict(list)
    for b in batches:
        by[(b.setup, b.concurrency)].append(b)
    rows: list[dict[str, Any]] = []
    base: dict[int, tuple[float, float]] = {}
    for c in concurrencies:
        for setup in setups:
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
        hook = f"{r['webhook_cpu_us']:>10.0f}" if r["setup"] in SERVERS else f"{'-':>10}"
        print(
            f"{r['setup']:<8} {r['concurrency']:>4} {r['creates']:>7} {r['errors']:>6} "
            f"{r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {added} {r['creates_per_s']:>8.0f} "
            f"{r['apiserver_cpu_us']:>12.0f} {hook} {r['client_cpu_us']:>9.0f}"
        )
    print(
        "(+p50/+p99: over `none` at the same concurrency; µs: CPU per create of the API server, "
        "the setup's webhook server (all its processes), this client)"
    )


def print_goals(rows: list[dict[str, Any]], concurrencies: list[int]) -> None:
    goal_c = 32 if 32 in concurrencies else max(concurrencies)
    get = {(r["setup"], r["concurrency"]): r for r in rows}
    hook, mp = get[("webhook", goal_c)], get[("MAP", goal_c)]
    lo = min(concurrencies)
    mark = {True: "✓", False: "✗"}
    for c in concurrencies:
        cpu_us = get[("webhook", c)]["webhook_cpu_us"]
        print(f"goal: webhook CPU per create at concurrency {c} <= 400 µs: {cpu_us:.0f} µs "
              f"{mark[cpu_us <= 400]}")  # fmt: skip
    if ("gofloor", goal_c) in get:
        floor_lo, hook_lo = get[("gofloor", lo)], get[("webhook", lo)]
        gap = hook_lo["added_p50_ms"] - floor_lo["added_p50_ms"]
        by_round = ", ".join(
            f"{a - b:+.2f}"
            for a, b in zip(hook_lo["round_added_p50_ms"], floor_lo["round_added_p50_ms"],
                            strict=True)
        )  # fmt: skip
        print(f"goal: added p50 at concurrency {lo} within 0.5 ms of the Go floor's: "
              f"{hook_lo['added_p50_ms']:+.2f} against {floor_lo['added_p50_ms']:+.2f} ms, "
              f"{gap:+.2f} ms {mark[gap <= 0.5]} (by round: {by_round})")  # fmt: skip
        floor_hi = get[("gofloor", goal_c)]
        ratio = hook["added_p50_ms"] / floor_hi["added_p50_ms"]
        by_round = ", ".join(
            f"{a / b:.2f}" if b > 0 else "-"
            for a, b in zip(hook["round_added_p50_ms"], floor_hi["round_added_p50_ms"],
                            strict=True)
        )  # fmt: skip
        print(f"goal: added p50 at concurrency {goal_c} <= 1.5 x the Go floor's: "
              f"{hook['added_p50_ms']:+.2f} against {floor_hi['added_p50_ms']:+.2f} ms, "
              f"{ratio:.2f} x {mark[0 < ratio <= 1.5]} (by round: {by_round})")  # fmt: skip
        tput = hook["creates_per_s"] / floor_hi["creates_per_s"]
        print(f"goal: creates/s at concurrency {goal_c} >= 0.8 x the Go floor's: "
              f"{hook['creates_per_s']:.0f} against {floor_hi['creates_per_s']:.0f}, "
              f"{tput:.2f} x {mark[tput >= 0.8]}")  # fmt: skip
    for c in concurrencies:
        if ("baseline", c) not in get:
            break
        new, old = get[("webhook", c)], get[("baseline", c)]
        saved = 1 - new["webhook_cpu_us"] / old["webhook_cpu_us"]
        print(f"A/B at concurrency {c}: webhook CPU per create {new['webhook_cpu_us']:.0f} µs "
              f"against the baseline's {old['webhook_cpu_us']:.0f} ({saved:+.0%} saved); added "
              f"p50 {new['added_p50_ms']:+.2f} against {old['added_p50_ms']:+.2f} ms; creates/s "
              f"{new['creates_per_s']:.0f} against {old['creates_per_s']:.0f}")  # fmt: skip
    by_round = ", ".join(f"{x:+.2f}" for x in hook["round_added_p50_ms"])
    for what, key, limit in (("p50", "added_p50_ms", 1.0), ("p99", "added_p99_ms", 5.0)):
        ok = "✓" if hook[key] <= limit else "✗"
        print(
            f"turn 3: webhook added {what} at concurrency {goal_c} <= {limit:g} ms: "
            f"{hook[key]:+.2f} ms {ok} (MAP adds {mp[key]:+.2f} ms)"
        )
    print(f"      webhook added p50 by round: {by_round}")
    if goal_c != lo:
        # Closed loop: mean latency = concurrency / rate. When the rate does not grow with
        # the concurrency, the API server is saturated and latency there is queueing.
        r_lo, r_hi = get[("none", lo)]["creates_per_s"], get[("none", goal_c)]["creates_per_s"]
        little = {
            s: 1e3 * goal_c * (1 / get[(s, goal_c)]["creates_per_s"] - 1 / r_hi)
            for s in ("webhook", "gofloor", "MAP")
            if (s, goal_c) in get
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
            + ", ".join(f"{v:+.1f} ms for {k}" for k, v in little.items())
        )
    errors = sum(r["errors"] for r in rows)
    print(f"goal: no errors: {errors} {'✓' if errors == 0 else '✗'}")


def scrape(hook: Webhook) -> dict[str, float]:
    """Our server's own account of what it spent (``/metrics``): mutate admissions, the
    workers' CPU seconds, the answering threads' CPU seconds on mutate."""
    ctx = ssl.create_default_context(cafile=str(hook.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", hook.port, context=ctx, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {"admissions": 0.0, "server_cpu_s": 0.0, "handling_cpu_s": 0.0}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("karta_webhook_requests_total{") and 'webhook="mutate"' in name:
            out["admissions"] += float(value)
        elif name == "karta_webhook_server_cpu_seconds_total":
            out["server_cpu_s"] += float(value)
        elif name == 'karta_webhook_request_cpu_seconds_total{webhook="mutate"}':
            out["handling_cpu_s"] += float(value)
    return out


# -- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--creates", type=int, default=2000, help="per setup and concurrency")
    ap.add_argument("--concurrency", default="1,32", help="client threads, comma-separated")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    ap.add_argument("--warmup", type=int, default=50, help="per setup and concurrency, unmeasured")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the raw figures here")
    ap.add_argument("--keep", action="store_true", help="keep the state folder (logs, etcd)")
    ap.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for `serve` (repeatable), e.g. --serve-arg=--workers=1",
    )
    ap.add_argument("--no-gofloor", action="store_true", help="leave the Go floor out")
    ap.add_argument("--policy-objects", type=int, metavar="N",
                    help="serve the policy as a KartaPolicy beside N that do not apply (the "
                         "baseline: beside none)")  # fmt: skip
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="also serve from this checkout (setup `baseline`): an A/B")  # fmt: skip
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
    floor: GoFloor | None = None
    baseline: Webhook | None = None
    load_before = os.getloadavg()
    clients: list[Client] = []
    batches: list[Batch] = []
    try:
        plane = kapi.start(tmp / "kapi", tools)
        print(f"control plane up in {time.monotonic() - started:.1f} s ({tmp})")
        plane.kubectl("apply", "--server-side", "-f", str(CRD))
        plane.wait_established("jobsets.jobset.x-k8s.io")
        served = POLICY if args.policy_objects is None else policy_objects(args.policy_objects)
        hook = start_webhook(tmp / "serve", served, ["--no-kube", *args.serve_arg])
        if args.baseline is not None:
            # with --policy-objects, the baseline has the one policy that applies and no other
            same = POLICY if args.policy_objects is None else policy_objects(0)
            baseline = start_webhook(
                tmp / "baseline", same, ["--no-kube", *args.serve_arg],
                env={"PYTHONPATH": str(args.baseline.resolve())},
            )  # fmt: skip
        if not args.no_gofloor:
            try:
                floor = GoFloor(tmp, hook.dir / "certs")
            except FileNotFoundError:
                print("note: no `go` on PATH: the Go floor is left out")
        bodies = Bodies()
        namespaces = set_up(plane, hook, baseline, floor, bodies)
        setups = tuple(namespaces)

        ctx = ssl.create_default_context(cafile=str(plane.ca))
        clients = [Client(plane, ctx) for _ in range(max(concurrencies))]
        api_pid = plane.procs["kube-apiserver"].pid
        server_pid = {"webhook": hook.proc.pid}
        if baseline is not None:
            server_pid["baseline"] = baseline.proc.pid
        if floor is not None:
            server_pid["gofloor"] = floor.proc.pid

        def one(setup: str, c: int, n: int, rnd: int, pos: int) -> Batch:
            path = f"/apis/{GROUP_VERSION}/namespaces/{namespaces[setup]}/jobsets"
            b = Batch(setup, c, rnd, pos)
            pid = server_pid.get(setup)
            a0, h0, c0 = cpu(api_pid), cpu(pid) if pid else 0.0, time.process_time()
            run_batch(clients, path, bodies, n, b)
            b.apiserver_cpu_s = cpu(api_pid) - a0
            b.webhook_cpu_s = cpu(pid) - h0 if pid else 0.0
            b.client_cpu_s = time.process_time() - c0
            return b

        for c in concurrencies:
            for setup in setups:
                w = one(setup, c, args.warmup, -1, 0)
                if w.errors:
                    raise SystemExit(f"warm-up {setup} at {c}: {w.errors} errors: "
                                     f"{w.error_samples}")  # fmt: skip
        measured = time.monotonic()
        for rnd, n in enumerate(per_round):
            k = rnd % len(setups)
            order = setups[k:] + setups[:k]
            for c in concurrencies:
                for pos, setup in enumerate(order):
                    batches.append(one(setup, c, n, rnd, pos))
            done = sum(per_round[: rnd + 1])
            print(f"round {rnd + 1}/{args.rounds}: {done} creates per setup and concurrency, "
                  f"{time.monotonic() - measured:.0f} s", flush=True)  # fmt: skip
        measured_s = time.monotonic() - measured
        time.sleep(2 * 0.5)  # the workers' metrics flush every 0.5 s
        own = scrape(hook)
        own["proc_cpu_s"] = cpu(hook.proc.pid)
        etcd_mb = (
            sum(f.stat().st_size for f in (tmp / "kapi").glob("etcd-*/member/snap/db")) / 2**20
        )
    finally:
        for client in clients:
            client.close()
        if floor is not None:
            floor.stop()
        if baseline is not None:
            baseline.stop()
        if hook is not None:
            hook.stop()
        if plane is not None:
            plane.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    wall = time.monotonic() - started
    load_after = os.getloadavg()

    rows = summarize(batches, concurrencies, setups)
    print()
    print(f"{args.creates} creates per setup and concurrency in {args.rounds} interleaved rounds "
          f"(after {args.warmup} warm-up creates each); JobSet {SAMPLE.name}")  # fmt: skip
    print_table(rows)
    print_goals(rows, concurrencies)
    for b in batches:
        for sample in b.error_samples:
            print(f"error ({b.setup}, {b.concurrency}): {sample}")
    if own["admissions"]:
        n = own["admissions"]
        print(f"our /metrics: {n:.0f} mutate admissions over the whole run (warm-up and checks "
              f"included); server CPU {1e6 * own['server_cpu_s'] / n:.0f} µs per admission "
              f"(workers only), its handling {1e6 * own['handling_cpu_s'] / n:.0f} µs; /proc "
              f"says {1e6 * own['proc_cpu_s'] / n:.0f} µs (master, workers and sandbox children, "
              "start-up included)")  # fmt: skip
    print(f"measured {measured_s:.0f} s, wall {wall:.0f} s; etcd database {etcd_mb:.0f} MB")
    loads = "load average (1, 5, 15 min) before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f}"
    print(loads.format(*load_before, *load_after) + f" ({os.cpu_count()} cores)")
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
                    "serve_args": args.serve_arg,
                    "own_metrics": own,
                    "baseline": str(args.baseline) if args.baseline else None,
                    "load_before": load_before,
                    "load_after": load_after,
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
