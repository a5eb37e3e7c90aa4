"""A fake Kubernetes API server for the cluster tests: recorded API responses on loopback.

There is no API server here: :class:`FakeAPI` is a tiny ``http.server`` speaking the real
Kubernetes REST/JSON shapes (lists with ``metadata.resourceVersion``, a chunked watch stream of
``{"type": ..., "object": ...}`` lines, ``Status`` objects for errors, optimistic concurrency on
``resourceVersion``), and the real ``kubernetes`` client talks to it over HTTP. What a real
cluster adds (RBAC, TLS, the API server's own defaulting) is covered by ``hack/e2e-kind.sh``.
The tests of each cluster module (``test_kartasync.py``, ``test_keeper.py``, ``test_leader.py``,
``test_kube.py``) share it and the Karta and workload builders below.
"""

from __future__ import annotations

import copy
import json
import queue
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml
from helpers import ENGINE
from kubernetes import client

from webhook import handlers
from webhook.admission import Request
from webhook.gvk import GVK
from webhook.kartasync import load_cluster_karta
from webhook.policy import parse_policy
from webhook.registry import State

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


def mutate(state: State, obj: dict) -> handlers.Result:
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


def static_webhooks() -> list[dict]:
    return [d for d in yaml.safe_load_all((ROOT / "manifests/base/webhooks.yaml").read_text()) if d]


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
