"""The cluster adapters against recorded API responses served on loopback.

There is no API server here: :class:`FakeAPI` is a tiny ``http.server`` speaking the real
Kubernetes REST/JSON shapes (lists with ``metadata.resourceVersion``, a chunked watch stream of
``{"type": ..., "object": ...}`` lines, ``Status`` objects for errors, optimistic concurrency on
``resourceVersion``), and the real ``kubernetes`` client talks to it over HTTP. What a real
cluster adds (RBAC, TLS, the API server's own defaulting) is covered by ``hack/e2e-kind.sh``.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from helpers import ENGINE
from kubernetes import client

from webhook import handlers
from webhook.admission import Request
from webhook.gvk import GVK
from webhook.handlers import conflicting_karta
from webhook.kartasync import ClusterSync, load_cluster_karta
from webhook.keeper import Discovery, WebhookConfigKeeper, plural_from_discovery
from webhook.kube import start
from webhook.leader import LeaseElector
from webhook.manifests import (
    catalog_rules,
    default_plural,
    webhook_configurations,
    webhook_rules,
)
from webhook.policy import parse_policy
from webhook.registry import State, load_registry

ROOT = Path(__file__).resolve().parent.parent
KARTAS = "/apis/run.ai/v1alpha1/kartas"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/karta-system/leases"
MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/karta-webhook"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/karta-webhook"
TRAINER = GVK("example.com", "v1", "Trainer")
POLICY = parse_policy({"rules": [{"name": "kai", "schedulerName": "kai-scheduler"}]})


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeAPI:
    """Recorded API responses. ``watches`` is a queue of scripted watch streams: each item is a
    list of events, or an int (an HTTP status for the watch request itself). A watch with no
    script waits briefly and ends, as the API server does at ``timeoutSeconds``."""

    def __init__(self) -> None:
        self.kartas: dict[str, dict[str, Any]] = {}
        self.objects: dict[str, dict[str, Any]] = {}  # path -> object (leases, configurations)
        self.discovery: dict[str, dict[str, Any]] = {}
        self.watches: queue.Queue[list[dict[str, Any]] | int] = queue.Queue()
        self.requests: list[tuple[str, str]] = []
        self.rv = 100
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else None

            def do_GET(self) -> None:
                fake.handle(self, "GET")

            def do_PUT(self) -> None:
                fake.handle(self, "PUT")

            def do_POST(self) -> None:
                fake.handle(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def api(self) -> client.ApiClient:
        cfg = client.Configuration(host=self.host)
        return client.ApiClient(cfg)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def next_rv(self) -> str:
        with self.lock:
            self.rv += 1
            return str(self.rv)

    def seen(self, method: str, path: str) -> int:
        return sum(1 for m, p in list(self.requests) if m == method and p == path)

    # -- dispatch

    def handle(self, h: Any, method: str) -> None:
        url = urlparse(h.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path
        kind = "WATCH" if query.get("watch") in ("true", "True", "1") else method
        self.requests.append((kind, path))
        body = h._body() if method in ("PUT", "POST") else None
        if path == KARTAS and kind == "WATCH":
            return self.watch(h)
        if path == KARTAS:
            items = [copy.deepcopy(k) for _, k in sorted(self.kartas.items())]
            return h._send(
                200,
                {
                    "apiVersion": "run.ai/v1alpha1",
                    "kind": "KartaList",
                    "metadata": {"resourceVersion": str(self.rv)},
                    "items": items,
                },
            )
        if method == "GET" and path in self.discovery:
            return h._send(200, self.discovery[path])
        if method == "GET" and path in self.objects:
            return h._send(200, self.objects[path])
        if method == "PUT" and path in self.objects:
            current = self.objects[path]
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return h._send(409, status(409, "Conflict", "the object has been modified"))
            body["metadata"]["resourceVersion"] = self.next_rv()
            self.objects[path] = body
            return h._send(200, body)
        if method == "POST" and path == LEASES:
            target = f"{LEASES}/{body['metadata']['name']}"
            if target in self.objects:
                return h._send(409, status(409, "AlreadyExists", "leases already exists"))
            body["metadata"]["resourceVersion"] = self.next_rv()
            self.objects[target] = body
            return h._send(201, body)
        h._send(404, status(404, "NotFound", f"{path} not found"))

    def watch(self, h: Any) -> None:
        try:
            script = self.watches.get(timeout=0.2)
        except queue.Empty:
            script = []
        if isinstance(script, int):
            return h._send(script, status(script, "Expired", "too old resource version"))
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for event in script:
            line = json.dumps(event).encode() + b"\n"
            h.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()


@pytest.fixture
def fake() -> Iterator[FakeAPI]:
    f = FakeAPI()
    yield f
    f.close()


def karta(name: str, path: str = ".spec.template", kind: GVK = TRAINER, rv: str = "1") -> dict:
    return {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {
            "name": name,
            "resourceVersion": rv,
            "creationTimestamp": "2026-05-01T00:00:00Z",
        },
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "name": "trainer",
                    "kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
                    "specDefinition": {"podTemplateSpecPath": path},
                    "statusDefinition": {
                        "statusMappings": {
                            "running": [
                                {
                                    "byExpression": {
                                        "expression": '.status.phase == "Running"',
                                        "expectedResult": "true",
                                    }
                                }
                            ]
                        }
                    },
                }
            }
        },
    }


def trainer() -> dict:
    pod = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}
    return {
        "apiVersion": "example.com/v1",
        "kind": "Trainer",
        "metadata": {"name": "t", "namespace": "team-a"},
        "spec": {"template": copy.deepcopy(pod), "other": copy.deepcopy(pod)},
    }


def mutate(state: State, obj: dict) -> handlers.MutateResult:
    req = Request(
        uid="u",
        operation="CREATE",
        kind=GVK.of(obj),
        resource={},
        sub_resource="",
        name=obj["metadata"]["name"],
        namespace=obj["metadata"]["namespace"],
        object=obj,
        old_object=None,
        dry_run=False,
    )
    snap = state.snapshot
    return handlers.mutate(req, snap.registry, POLICY, ENGINE)


def event(kind: str, obj: dict) -> dict:
    return {"type": kind, "object": obj}


def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


# --------------------------------------------------------------------------- watch


def test_watch_add_modify_delete_changes_mutation(fake: FakeAPI) -> None:
    state = State(watch_cluster=True)
    assert not state.ready
    sync = ClusterSync(state, fake.api(), ENGINE)
    rv = sync.relist()
    assert state.ready and rv == "100"
    assert mutate(state, trainer()).outcome == "skipped"

    fake.watches.put([event("ADDED", karta("trainer", rv="101"))])
    rv = sync.watch_once(rv, 5)
    assert rv == "101"
    result = mutate(state, trainer())
    assert result.outcome == "patched"
    assert {op["path"] for op in result.response.patch} == {"/spec/template/spec/schedulerName"}
    assert [o["metadata"]["name"] for o in sync.objects()] == ["trainer"]

    fake.watches.put(
        [
            {
                "type": "BOOKMARK",
                "object": {"kind": "Karta", "metadata": {"resourceVersion": "102"}},
            },
            event("MODIFIED", karta("trainer", ".spec.other", rv="103")),
        ]
    )
    rv = sync.watch_once(rv, 5)
    assert rv == "103"
    result = mutate(state, trainer())
    assert {op["path"] for op in result.response.patch} == {"/spec/other/spec/schedulerName"}

    fake.watches.put([event("DELETED", karta("trainer", ".spec.other", rv="104"))])
    sync.watch_once(rv, 5)
    result = mutate(state, trainer())
    assert result.outcome == "skipped" and not result.response.patch
    assert sync.objects() == []
    # the bundled catalog is still there
    assert state.snapshot.registry.lookup(GVK("batch", "v1", "Job")) is not None


def test_watch_sends_resource_version_and_timeout(fake: FakeAPI) -> None:
    seen: list[str] = []
    original = fake.handle

    def spy(h: Any, method: str) -> None:
        seen.append(h.path)
        original(h, method)

    fake.handle = spy  # type: ignore[method-assign]
    sync = ClusterSync(State(watch_cluster=True), fake.api(), ENGINE)
    sync.watch_once("42", 7)
    (path,) = [p for p in seen if "watch=" in p]
    query = parse_qs(urlparse(path).query)
    assert query["resourceVersion"] == ["42"]
    assert query["timeoutSeconds"] == ["7"]
    assert query["allowWatchBookmarks"] == ["true"]


@pytest.mark.parametrize("gone", ["event", "status"])
def test_410_gone_relists(fake: FakeAPI, gone: str) -> None:
    state = State(watch_cluster=True)
    sync = ClusterSync(state, fake.api(), ENGINE, backoff_base=0.01)
    if gone == "event":
        fake.watches.put([{"type": "ERROR", "object": status(410, "Expired", "too old")}])
    else:
        fake.watches.put(410)
    fake.kartas["trainer"] = karta("trainer")
    sync.start()
    try:
        assert wait_for(lambda: fake.seen("GET", KARTAS) >= 2)
        assert state.snapshot.registry.lookup(TRAINER) is not None
    finally:
        sync.stop(timeout=2)
    assert not sync._thread.is_alive()


def test_other_errors_back_off_and_recover(fake: FakeAPI) -> None:
    state = State(watch_cluster=True)
    sync = ClusterSync(state, fake.api(), ENGINE, backoff_base=0.01, backoff_cap=0.05)
    fake.watches.put(500)
    sync.start()
    try:
        assert wait_for(lambda: fake.seen("GET", KARTAS) >= 2)
        assert state.ready
    finally:
        sync.stop(timeout=2)


@pytest.mark.parametrize("ending", ["empty stream", "410"])
def test_watches_that_end_at_once_back_off(fake: FakeAPI, ending: str) -> None:
    """A proxy that cuts every watch stream, or a 410 on every watch, must not turn the sync
    into a loop of requests as fast as the network allows."""
    for _ in range(1000):
        fake.watches.put([] if ending == "empty stream" else 410)
    sync = ClusterSync(State(watch_cluster=True), fake.api(), ENGINE, backoff_base=0.5)
    sync.start()
    try:
        time.sleep(1.0)
    finally:
        sync.stop(timeout=2)
    assert 1 <= fake.seen("WATCH", KARTAS) <= 8  # jittered 0-1 s, 0-2 s, ...: a few at most


def test_periodic_resync_relists(fake: FakeAPI) -> None:
    sync = ClusterSync(State(watch_cluster=True), fake.api(), ENGINE, resync_seconds=0.1)
    sync.start()
    try:
        assert wait_for(lambda: fake.seen("GET", KARTAS) >= 2)
    finally:
        sync.stop(timeout=2)


def test_unsafe_karta_is_never_loaded(fake: FakeAPI, caplog: pytest.LogCaptureFixture) -> None:
    fake.kartas["evil"] = karta("evil", ".spec.template | env.HOME")
    fake.kartas["other"] = karta("other", kind=GVK("example.com", "v1", "Other"))
    state = State(watch_cluster=True)
    sync = ClusterSync(state, fake.api(), ENGINE)
    with caplog.at_level(logging.WARNING, logger="karta_webhook.kube"):
        rv = sync.relist()
        fake.watches.put([event("MODIFIED", karta("evil", "env.HOME", rv="105"))])
        sync.watch_once(rv, 5)
    assert state.ready
    assert state.snapshot.registry.lookup(TRAINER) is None
    assert state.snapshot.registry.lookup(GVK("example.com", "v1", "Other")) is not None
    lines = [r.fields for r in caplog.records]  # type: ignore[attr-defined]
    skipped = [x for x in lines if x["event"] == "karta.skipped"]
    assert [x["name"] for x in skipped] == ["evil", "evil"]
    assert all("env" in " ".join(x["errors"]) for x in skipped)
    karta_obj, errors = load_cluster_karta(karta("evil", "env.HOME"), ENGINE)
    assert karta_obj is None and errors


def test_duplicate_root_kind_in_cluster_keeps_the_oldest(fake: FakeAPI) -> None:
    old = karta("old", ".spec.template")
    new = karta("new", ".spec.other")
    new["metadata"]["creationTimestamp"] = "2026-05-02T00:00:00Z"
    fake.kartas.update({"old": old, "new": new})
    state = State(watch_cluster=True)
    ClusterSync(state, fake.api(), ENGINE).relist()
    assert state.snapshot.registry.lookup(TRAINER).name == "old"


# --------------------------------------------------------------------------- one per kind


def test_conflicting_karta() -> None:
    ray = karta("ray", kind=GVK("ray.io", "v1", "RayCluster"))
    mine = karta("my-ray", kind=GVK("ray.io", "v1", "RayCluster"))
    assert conflicting_karta(mine, [ray]) == (
        'a Karta for group "ray.io" version "v1" kind "RayCluster" already exists ("ray"); '
        "only one Karta per group/version/kind is allowed"
    )
    assert conflicting_karta(ray, [ray]) is None  # updating itself
    assert conflicting_karta(karta("v2", kind=GVK("ray.io", "v2", "RayCluster")), [ray]) is None
    assert conflicting_karta(karta("x", kind=GVK("ray.io", "v1", "RayJob")), [ray]) is None
    assert conflicting_karta({"kind": "Karta", "metadata": {"name": "y"}}, [ray]) is None
    core = karta("pods", kind=GVK("", "v1", "Pod"))
    assert 'group "" version "v1" kind "Pod"' in conflicting_karta(
        karta("p2", kind=GVK("", "v1", "Pod")), [core]
    )


# --------------------------------------------------------------------------- discovery, rules


def discovery_doc(group_version: str, resources: list[tuple[str, str, bool]]) -> dict:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {"name": n, "singularName": "", "namespaced": ns, "kind": k, "verbs": ["get"]}
            for n, k, ns in resources
        ],
    }


def test_discovery_plurals(fake: FakeAPI) -> None:
    fake.discovery["/api/v1"] = discovery_doc(
        "v1",
        [("pods", "Pod", True), ("pods/status", "Pod", True), ("namespaces", "Namespace", False)],
    )
    fake.discovery["/apis/example.com/v1"] = discovery_doc(
        "example.com/v1",
        [("trainerz/status", "Trainer", True), ("trainerz", "Trainer", True)],
    )
    plural = plural_from_discovery(fake.api())
    assert plural(GVK("", "v1", "Pod")) == "pods"
    assert plural(TRAINER) == "trainerz"  # the CRD's own plural, not a guess; no subresource
    assert plural(GVK("milvus.io", "v1beta1", "Milvus")) == "milvuses"  # not installed: default
    d = Discovery(fake.api())
    assert d.scope(GVK("", "v1", "Namespace")) == "Cluster"
    assert d.scope(TRAINER) == "Namespaced"
    assert d.scope(GVK("milvus.io", "v1beta1", "Milvus")) is None
    assert fake.seen("GET", "/apis/example.com/v1") == 2  # one per Discovery (cached in it)
    rules = webhook_rules(
        [GVK("", "v1", "Namespace"), GVK("", "v1", "Pod"), TRAINER], d.plural, scope=d.scope
    )
    assert [(r["apiGroups"], r["resources"], r["scope"]) for r in rules] == [
        ([""], ["namespaces", "pods"], "*"),  # mixed scopes: "*"
        (["example.com"], ["trainerz"], "Namespaced"),
    ]


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Milvus", "milvuses"),
        ("Policy", "policies"),
        ("Service", "services"),
        ("Gateway", "gateways"),
        ("Box", "boxes"),
        ("Batch", "batches"),
        ("PyTorchJob", "pytorchjobs"),
        ("Endpoints", "endpoints"),
    ],
)
def test_default_plural(kind: str, plural: str) -> None:
    assert default_plural(GVK("g", "v1", kind)) == plural


def test_rules_shape() -> None:
    kinds = [
        GVK("ray.io", "v1", "RayJob"),
        GVK("apps", "v1", "StatefulSet"),
        GVK("ray.io", "v1", "RayCluster"),
        GVK("apps", "v1", "Deployment"),
        GVK("run.ai", "v1alpha1", "Karta"),
    ]
    rules = webhook_rules(kinds, default_plural, operations=("CREATE", "UPDATE"))
    assert rules == [
        {
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "resources": ["deployments", "statefulsets"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "*",
        },
        {
            "apiGroups": ["ray.io"],
            "apiVersions": ["v1"],
            "resources": ["rayclusters", "rayjobs"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "*",
        },
    ]


def static_webhooks() -> list[dict]:
    return [d for d in yaml.safe_load_all((ROOT / "manifests/base/webhooks.yaml").read_text()) if d]


def test_catalog_rules_equal_manifests_and_static(fake: FakeAPI) -> None:
    kinds = load_registry().kinds()
    static = static_webhooks()
    assert webhook_configurations(kinds) == static
    static_rules = static[0]["webhooks"][0]["rules"]
    assert catalog_rules(kinds) == static_rules
    # the keeper, with discovery from a cluster where every catalog kind is installed
    by_gv: dict[str, list[tuple[str, str, bool]]] = {}
    for g in kinds:
        path = f"/apis/{g.group}/{g.version}" if g.group else f"/api/{g.version}"
        by_gv.setdefault(path, []).append((default_plural(g), g.kind, True))
    for path, resources in by_gv.items():
        fake.discovery[path] = discovery_doc(path, resources)
    keeper = WebhookConfigKeeper(State(), fake.api(), elector=None)
    assert keeper.wanted_rules() == static_rules


# --------------------------------------------------------------------------- keeper, lease


def install_configs(fake: FakeAPI) -> None:
    mwc, vwc = copy.deepcopy(static_webhooks())
    mwc["metadata"]["resourceVersion"] = "7"
    vwc["metadata"]["resourceVersion"] = "8"
    fake.objects[MWC], fake.objects[VWC] = mwc, vwc
    fake.discovery["/apis/example.com/v1"] = discovery_doc(
        "example.com/v1", [("trainerz", "Trainer", True)]
    )


def trainer_state() -> State:
    state = State(bundled=False, watch_cluster=True)
    trainer_karta, _ = load_cluster_karta(karta("trainer"), ENGINE)
    state.set_cluster([trainer_karta])
    return state


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_keeper_writes_only_while_leading(fake: FakeAPI, tmp_path: Path) -> None:
    install_configs(fake)
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    clock = Clock()
    fake.objects[f"{LEASES}/karta-webhook-leader"] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "karta-webhook-leader",
            "namespace": "karta-system",
            "resourceVersion": "3",
        },
        "spec": {
            "holderIdentity": "other-pod_1",
            "leaseDurationSeconds": 15,
            "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }
    api = fake.api()
    elector = LeaseElector(api, "karta-system", holder="me_1", clock=clock)
    state = trainer_state()
    keeper = WebhookConfigKeeper(state, api, elector=elector, ca_file=ca, resync_seconds=0)

    keeper.step()  # another holder's lease is fresh: no write
    clock.t += 10
    keeper.step()
    assert not elector.is_leader()
    assert fake.seen("PUT", MWC) == fake.seen("PUT", VWC) == 0
    assert fake.objects[f"{LEASES}/karta-webhook-leader"]["spec"]["holderIdentity"] == "other-pod_1"

    clock.t += 6  # unchanged for longer than its 15 s: expired, take it over
    keeper.step()
    assert elector.is_leader()
    lease = fake.objects[f"{LEASES}/karta-webhook-leader"]["spec"]
    assert lease["holderIdentity"] == "me_1" and lease["leaseTransitions"] == 1
    assert lease["renewTime"].endswith("Z") and "." in lease["renewTime"]
    assert fake.seen("PUT", MWC) == 1 and fake.seen("PUT", VWC) == 1
    mwc = fake.objects[MWC]
    want_ca = base64.b64encode(ca.read_bytes()).decode()
    assert mwc["webhooks"][0]["rules"] == [
        {
            "apiGroups": ["example.com"],
            "apiVersions": ["v1"],
            "resources": ["trainerz"],
            "operations": ["CREATE"],
            "scope": "Namespaced",
        }
    ]
    assert mwc["webhooks"][1]["rules"] == static_webhooks()[0]["webhooks"][1]["rules"]
    assert all(h["clientConfig"]["caBundle"] == want_ca for h in mwc["webhooks"])
    assert fake.objects[VWC]["webhooks"][0]["clientConfig"]["caBundle"] == want_ca

    keeper.step()  # in line: renew only, no write
    assert fake.seen("PUT", MWC) == 1

    # a new kind in the registry: the listener marks it, the next step writes
    state.listeners.append(keeper.on_snapshot)
    gpu, _ = load_cluster_karta(karta("gpu", kind=GVK("example.com", "v1", "GPUThing")), ENGINE)
    trainer_karta = state.snapshot.registry.lookup(TRAINER)
    state.set_cluster([trainer_karta, gpu])
    keeper.step()
    assert fake.objects[MWC]["webhooks"][0]["rules"][0]["resources"] == ["gputhings", "trainerz"]

    # someone else takes the lease (it was renewed by them): we stop writing
    lease = fake.objects[f"{LEASES}/karta-webhook-leader"]
    lease["spec"]["holderIdentity"] = "other-pod_1"
    lease["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    puts = fake.seen("PUT", MWC)
    state.set_cluster([trainer_karta])
    keeper.step()
    assert not elector.is_leader()
    assert fake.seen("PUT", MWC) == puts


def test_lease_absent_is_created(fake: FakeAPI) -> None:
    elector = LeaseElector(fake.api(), "karta-system", holder="me_1")
    assert elector.try_acquire_or_renew()
    assert fake.seen("POST", LEASES) == 1
    assert elector.try_acquire_or_renew()  # renew
    other = LeaseElector(fake.api(), "karta-system", holder="other_2")
    assert not other.try_acquire_or_renew()
    elector.release()
    # released: the record changed (no holder), the other one takes it at once
    assert other.try_acquire_or_renew()


def test_keeper_retries_on_conflict(fake: FakeAPI) -> None:
    install_configs(fake)
    api = fake.api()
    keeper = WebhookConfigKeeper(trainer_state(), api, elector=None)
    original = fake.handle
    conflicts = [1]

    def racing(h: Any, method: str) -> None:
        if method == "PUT" and conflicts and urlparse(h.path).path == MWC:
            conflicts.pop()
            fake.objects[MWC]["metadata"]["resourceVersion"] = "99"  # someone wrote meanwhile
        original(h, method)

    fake.handle = racing  # type: ignore[method-assign]
    assert keeper.reconcile()
    assert fake.seen("PUT", MWC) == 2
    assert fake.objects[MWC]["webhooks"][0]["rules"][0]["resources"] == ["trainerz"]


def test_start_runs_sync_and_keeper_threads(fake: FakeAPI) -> None:
    install_configs(fake)
    fake.kartas["trainer"] = karta("trainer")
    state = State(bundled=False, watch_cluster=True)
    cluster = start(state, ENGINE, api=fake.api(), namespace="karta-system")
    try:
        assert wait_for(lambda: state.ready and state.snapshot.registry.lookup(TRAINER) is not None)
        assert wait_for(lambda: fake.seen("PUT", MWC) >= 1)
        assert [o["metadata"]["name"] for o in cluster.objects()] == ["trainer"]
    finally:
        cluster.stop()


def test_start_offline_runs_on_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    state = State(watch_cluster=True)
    assert start(state, ENGINE) is None
    assert state.ready and len(state.snapshot.registry) > 0


def test_validate_webhook_denies_a_second_karta_per_kind(fake: FakeAPI) -> None:
    from webhook.server import create_app

    fake.kartas["trainer"] = karta("trainer")
    state = State(watch_cluster=True)
    sync = ClusterSync(state, fake.api(), ENGINE)
    sync.relist()  # the Kartas the sync saw reach /validate through the state's snapshot
    app = create_app(state, engine=ENGINE).test_client()

    def review(obj: dict) -> dict:
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "run.ai", "version": "v1alpha1", "kind": "Karta"},
                "resource": {"group": "run.ai", "version": "v1alpha1", "resource": "kartas"},
                "operation": "CREATE",
                "name": obj["metadata"]["name"],
                "object": obj,
                "userInfo": {"username": "me"},
            },
        }
        return app.post("/validate", json=body).get_json()["response"]

    denied = review(karta("trainer-2"))
    assert denied["allowed"] is False
    assert 'kind "Trainer" already exists ("trainer")' in denied["status"]["message"]
    assert review(karta("trainer"))["allowed"] is True  # updating itself
    assert review(karta("v2", kind=GVK("example.com", "v2", "Trainer")))["allowed"] is True


def test_serve_flags() -> None:
    from webhook.cli import build_parser

    args = build_parser().parse_args(["serve", "--kubeconfig", "kc", "--no-kube"])
    assert args.kubeconfig == "kc" and args.no_kube


def test_keeper_follows_policy_operations_and_leaves_injected_ca_alone(
    fake: FakeAPI, tmp_path: Path
) -> None:
    install_configs(fake)
    fake.objects[MWC]["metadata"]["annotations"] = {
        "cert-manager.io/inject-ca-from": "karta-system/karta-webhook-serving"
    }
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules: [{name: s, schedulerName: kai-scheduler}]\n")
    state = State(bundled=False, policy_path=policy)
    state.set_cluster([load_cluster_karta(karta("trainer"), ENGINE)[0]])
    keeper = WebhookConfigKeeper(state, fake.api(), elector=None, ca_file=ca)
    state.listeners.append(keeper.on_snapshot)
    assert keeper.reconcile()
    mwc = fake.objects[MWC]
    assert mwc["webhooks"][0]["rules"][0]["operations"] == ["CREATE"]
    assert all("caBundle" not in h.get("clientConfig", {}) for h in mwc["webhooks"])

    policy.write_text(
        "operations: [CREATE, UPDATE]\nrules: [{name: s, schedulerName: kai-scheduler}]\n"
    )
    os.utime(policy, (time.time() + 5, time.time() + 5))
    state.reload_files()
    assert keeper.reconcile()
    assert fake.objects[MWC]["webhooks"][0]["rules"][0]["operations"] == ["CREATE", "UPDATE"]
