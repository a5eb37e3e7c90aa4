"""A fake Kubernetes API server for the cluster tests: recorded API responses on loopback.

There is no API server here: :class:`FakeAPI` is a tiny ``http.server`` speaking the real
Kubernetes REST/JSON shapes (lists with ``metadata.resourceVersion``, a chunked watch stream of
``{"type": ..., "object": ...}`` lines, ``Status`` objects for errors, optimistic concurrency on
``resourceVersion``), and the real ``kubernetes`` client talks to it over HTTP. What a real
cluster adds (RBAC, TLS, the API server's own defaulting) is covered by ``hack/e2e-kind.sh``.
The tests of each cluster module (``test_kartasync.py``, ``test_keeper.py``, ``test_leader.py``,
``test_kube.py``, ``test_crdsync.py``, ``test_livesamples.py``, ``test_status.py``) share it
and the Karta, CRD and workload builders below.

Besides Kartas it serves any collection put in :attr:`FakeAPI.collections` (paged lists with
``limit``/``continue``, watches scripted per path), answers 403 for paths in ``forbidden``
with the API server's Forbidden ``Status``, and applies JSON merge patches to a Karta's
``status`` subresource with the resourceVersion precondition.
"""

from __future__ import annotations

import copy
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml
from helpers import ENGINE
from kubernetes import client

from webhook.admission import handlers
from webhook.admission.review import Request
from webhook.admission.state import State
from webhook.base.gvk import GVK
from webhook.cluster.kartasync import load_cluster_karta
from webhook.mutation.policyfile import parse_policy

ROOT = Path(__file__).resolve().parent.parent
KARTAS = "/apis/run.ai/v1alpha1/kartas"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TRAINERS = "/apis/example.com/v1/trainerz"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/karta-system/leases"
MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/karta-webhook"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/karta-webhook"
TRAINER = GVK("example.com", "v1", "Trainer")
POLICY = parse_policy({"rules": [{"name": "kai", "schedulerName": "kai-scheduler"}]})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def forbidden(path: str, verb: str) -> dict[str, Any]:
    """The API server's answer to a request RBAC does not allow (recorded shape)."""
    parts = path.strip("/").split("/")
    group, resource = (parts[1], parts[3]) if parts[0] == "apis" else ("", parts[2])
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": (
            f"{resource}{'.' + group if group else ''} is forbidden: User "
            '"system:serviceaccount:karta-system:karta-webhook" cannot '
            f'{"list" if verb == "get" else verb} resource "{resource}" in API group "{group}" '
            "at the cluster scope"
        ),
        "reason": "Forbidden",
        "details": {"group": group, "kind": resource},
        "code": 403,
    }


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
        #: path -> (apiVersion, list kind, objects by name): collections other than Kartas
        self.collections: dict[str, tuple[str, str, dict[str, dict[str, Any]]]] = {}
        # every API server serves namespaces (the policy's namespace watch lists them, and
        # /readyz waits for that list)
        self.collections["/api/v1/namespaces"] = ("v1", "NamespaceList", {})
        self.collection_watches: dict[str, queue.Queue[list[dict[str, Any]] | int]] = {}
        self.forbidden: set[str] = set()
        self.delays: dict[str, float] = {}  # path -> seconds before answering (a slow server)
        self.patches: list[tuple[str, str, Any]] = []  # (path, content type, body)
        self.queries: list[tuple[str, dict[str, str]]] = []
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

            def do_PATCH(self) -> None:
                fake.handle(self, "PATCH")

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
        self.queries.append((path, query))
        body = h._body() if method in ("PUT", "POST", "PATCH") else None
        if path in self.delays:
            time.sleep(self.delays[path])
        if path in self.forbidden:
            return h._send(403, forbidden(path, "watch" if kind == "WATCH" else method.lower()))
        if path == KARTAS and kind == "WATCH":
            return self.watch(h, self.watches)
        if path in self.collections and kind == "WATCH":
            return self.watch(h, self.collection_watches.setdefault(path, queue.Queue()))
        if path in self.collections and method == "GET":
            return h._send(200, self.list_page(path, query))
        if method == "PATCH" and path.startswith(KARTAS + "/") and path.endswith("/status"):
            return self.patch_status(h, path, body)
        if path == KARTAS:
            items = [_as_list_item(k) for _, k in sorted(self.kartas.items())]
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

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        """A page of a collection, as the API server pages: ``limit`` objects in name order and
        a ``continue`` token while more remain."""
        api_version, list_kind, objects = self.collections[path]
        names = sorted(objects)
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(names)
        page = names[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if start + limit < len(names):
            meta["continue"] = str(start + limit)
            meta["remainingItemCount"] = len(names) - start - limit
        items = [_as_list_item(objects[n]) for n in page]
        return {"apiVersion": api_version, "kind": list_kind, "metadata": meta, "items": items}

    def patch_status(self, h: Any, path: str, body: Any) -> None:
        """``PATCH .../kartas/NAME/status`` with a JSON merge patch: only ``status`` changes
        (the status subresource ignores the rest), a ``metadata.resourceVersion`` in the patch
        must match, the resourceVersion moves on and the generation does not."""
        self.patches.append((path, h.headers.get("Content-Type", ""), copy.deepcopy(body)))
        if h.headers.get("Content-Type") != "application/merge-patch+json":
            return h._send(415, status(415, "UnsupportedMediaType", "unsupported patch type"))
        name = path[len(KARTAS) + 1 : -len("/status")]
        current = self.kartas.get(name)
        if current is None:
            return h._send(404, status(404, "NotFound", f'kartas.run.ai "{name}" not found'))
        want_rv = (body.get("metadata") or {}).get("resourceVersion")
        if want_rv is not None and want_rv != current["metadata"]["resourceVersion"]:
            return h._send(
                409,
                status(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on kartas.run.ai "{name}": the object has '
                    "been modified; please apply your changes to the latest version and try again",
                ),
            )
        current["status"] = merge_patch(current.get("status"), body.get("status"))
        current["metadata"]["resourceVersion"] = self.next_rv()
        return h._send(200, current)

    def watch(self, h: Any, scripts: queue.Queue[list[dict[str, Any]] | int]) -> None:
        try:
            script = scripts.get(timeout=0.2)
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


# --------------------------------------------------------------------------- recorded objects


def stored(obj: dict, rv: str, generation: int = 1) -> dict:
    """``obj`` as the API server returns it: uid, resourceVersion, generation, creation time and
    managed fields set (a Karta's ``status`` is its own business)."""
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    name = meta.get("name", "")
    meta.update(
        {
            "uid": meta.get("uid") or str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
            "resourceVersion": rv,
            "generation": generation,
            "creationTimestamp": meta.get("creationTimestamp") or "2026-05-01T00:00:00Z",
            "managedFields": [
                {
                    "apiVersion": out.get("apiVersion", "v1"),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {".": {}}},
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "time": "2026-05-01T00:00:00Z",
                }
            ],
        }
    )
    return out


def trainer_crd(
    versions: tuple[str, ...] = ("v1",), rv: str = "5", plural: str = "trainerz"
) -> dict:
    """The CRD of example.com Trainer (a kind outside the catalog) as the API server stores it:
    every served version with the same schema, descriptions, the last-applied annotation and
    the status the API server sets."""
    template = {
        "type": "object",
        "description": "Pod template of the trainer.",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "spec": {
                "type": "object",
                "description": "PodSpec.",
                "required": ["containers"],
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "containers": {
                        "type": "array",
                        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    }
                },
            },
        },
    }
    schema = {
        "type": "object",
        "description": "Trainer runs a training job.",
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of this object."},
            "kind": {"type": "string", "description": "Kind of this object."},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["template"],
                "properties": {
                    "replicas": {"type": "integer", "default": 1, "description": "Replicas."},
                    "template": copy.deepcopy(template),
                    "other": copy.deepcopy(template),
                    "description": {"type": "string", "description": "A field named description."},
                },
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.example.com",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
        },
        "spec": {
            "group": "example.com",
            "names": {
                "kind": "Trainer",
                "listKind": "TrainerList",
                "plural": plural,
                "singular": "trainer",
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": copy.deepcopy(schema)},
                    "subresources": {"status": {}},
                }
                for i, v in enumerate(versions)
            ],
            "conversion": {"strategy": "None"},
        },
        "status": {
            "acceptedNames": {
                "kind": "Trainer",
                "listKind": "TrainerList",
                "plural": plural,
                "singular": "trainer",
            },
            "conditions": [
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": "2026-05-01T00:00:00Z",
                }
            ],
            "storedVersions": [versions[0]],
        },
    }
    return stored(crd, rv)


def crd_fixture(file: str, rv: str = "6") -> dict:
    """A CRD of ``tests/crds`` as the API server would return it."""
    doc = yaml.safe_load((ROOT / "tests" / "crds" / file).read_text())
    return stored(doc, rv)


def install_crds(fake: FakeAPI, *crds: dict) -> None:
    """Serve ``crds`` at the CRD collection (an empty one when none is given)."""
    fake.collections[CRDS] = (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinitionList",
        {c["metadata"]["name"]: c for c in crds},
    )


def _as_list_item(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as the API server puts it in a list: without kind and apiVersion (the list
    says them once; found against the real API server, where the CRD sync read no CRD)."""
    item = copy.deepcopy(obj)
    item.pop("kind", None)
    item.pop("apiVersion", None)
    return item
