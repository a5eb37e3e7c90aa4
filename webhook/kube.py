"""Cluster adapters: live Karta definitions, API discovery, webhook-configuration upkeep.

Three background jobs, all through the official ``kubernetes`` client and all off the request
path (daemon threads; a request only ever reads :attr:`State.snapshot`):

- :class:`ClusterSync` lists ``kartas.run.ai/v1alpha1`` and watches from the list's
  resourceVersion, applies ADDED/MODIFIED/DELETED to a map of raw objects, relists on 410 Gone
  and every ``resync_seconds``, backs off (jittered, exponential) on errors and on watches that
  keep failing or ending at once, and after each change hands the usable definitions to
  :meth:`State.set_cluster`. A definition that fails the safety screen or the structure checks
  is logged and skipped, never loaded.
- :class:`LeaseElector` is a small ``coordination.k8s.io/v1`` Lease leader election (only one
  replica writes the webhook configurations).
- :class:`WebhookConfigKeeper` keeps the MutatingWebhookConfiguration's workload rules equal to
  the registry's kinds (plural names from discovery) and every ``caBundle`` equal to the mounted
  CA, while leading.

Wire-format calls go through :class:`kubernetes.client.ApiClient` with raw JSON bodies: the
generated models drop fields they do not know and serialize a whole-second ``MicroTime``
without its fraction, which the API server rejects.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from webhook.definitions import GROUP, GVK, Karta, load_definition, root_gvk
from webhook.errors import DefinitionError, KartaError
from webhook.manifests import (
    KARTA_RESOURCE,
    KARTA_VERSION,
    NAME,
    WORKLOAD_WEBHOOK,
    default_plural,
    encode_ca_bundle,
    webhook_rules,
)
from webhook.registry import Snapshot, State

__all__ = [
    "ClusterSync",
    "Discovery",
    "LeaseElector",
    "WebhookConfigKeeper",
    "api_client_from_config",
    "conflicting_karta",
    "default_plural",
    "load_cluster_karta",
    "plural_from_discovery",
    "start",
    "webhook_rules",
]

log = logging.getLogger("karta_webhook.kube")
LEASE_NAME = "karta-webhook-leader"
CA_INJECTOR_ANNOTATION = "cert-manager.io/inject-ca-from"
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _log(event: str, level: int = logging.INFO, **fields: Any) -> None:
    """One structured record per event (the server's JSON formatter writes the fields as keys),
    so cluster logs can be filtered by field."""
    log.log(level, event, extra={"fields": {"event": event, **fields}})


# --------------------------------------------------------------------------- raw API calls


def _request(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    query: list[tuple[str, Any]] | None = None,
    timeout: float = 10.0,
) -> Any:
    """One JSON request with the client's host, auth and TLS; raises :class:`ApiException`."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    params = api.param_serialize(
        method,
        path,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    resp = api.call_api(*params, _request_timeout=timeout)
    resp.read()
    if not 200 <= resp.status <= 299:
        raise ApiException.from_response(
            http_resp=resp, body=resp.data.decode("utf-8", "replace"), data=None
        )
    return json.loads(resp.data) if resp.data else None


def api_client_from_config(kubeconfig: str | None = None) -> client.ApiClient | None:
    """An API client from ``kubeconfig`` (a file), else the in-cluster service account;
    None when neither is available (the server then runs on the catalog alone)."""
    cfg = client.Configuration()
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            config.load_incluster_config(client_configuration=cfg)
    except config.ConfigException as e:
        if kubeconfig:
            raise KartaError(f"{kubeconfig}: cannot use kubeconfig: {e}") from e
        _log("kube.offline", reason=str(e))
        return None
    return client.ApiClient(cfg)


def pod_namespace() -> str:
    ns = os.environ.get("POD_NAMESPACE")
    if ns:
        return ns
    try:
        return Path(SA_NAMESPACE_FILE).read_text().strip() or "karta-system"
    except OSError:
        return "karta-system"


def identity() -> str:
    """Lease holder: the pod name (or host name) and the process id, since every gunicorn
    worker runs its own elector and only one of them may write."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"


# --------------------------------------------------------------------------- definitions


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def conflicting_karta(obj: Mapping[str, Any], existing: Iterable[Mapping[str, Any]]) -> str | None:
    """The error for a Karta whose root group/version/kind another Karta (by name) already
    defines, else None. A Karta never collides with itself (an update), and the same group and
    kind at another version is a different definition. Best effort, as upstream's: two creates
    racing can both pass; :class:`ClusterSync` then keeps the older one and logs the other."""
    gvk = root_gvk(obj)
    if gvk is None:
        return None
    name = _name(obj)
    for other in existing:
        other_name = _name(other)
        if other_name != name and root_gvk(other) == gvk:
            return (
                f"a Karta for group {gvk.group!r} version {gvk.version!r} kind {gvk.kind!r} already "
                f"exists ({other_name!r}); only one Karta per group/version/kind is allowed"
            ).replace("'", '"')
    return None


def _structure_errors(doc: Mapping[str, Any], source: str) -> list[str]:
    """Sample-free checks of :mod:`webhook.validation` when it is available."""
    try:
        from webhook import validation
    except ImportError:
        return []
    check = getattr(validation, "check", None)
    if check is None:
        return []
    try:
        report = check(doc, [], source=source, timeout=2.0)
    except KartaError as e:
        return [str(e)]
    except Exception as e:  # a bug in a check must not unload every definition
        _log("karta.check-failed", logging.WARNING, source=source, error=repr(e))
        return []
    return [str(e) for e in getattr(report, "errors", [])]


def load_cluster_karta(obj: Mapping[str, Any]) -> tuple[Karta | None, list[str]]:
    """A Karta from the cluster, or None and the reasons it is not loaded."""
    source = f"cluster:karta/{_name(obj)}"
    try:
        karta = load_definition(obj, source)
    except DefinitionError as e:
        return None, [str(x) for x in e.errors]
    except KartaError as e:
        return None, [str(e)]
    errors = _structure_errors(obj, source)
    if errors:
        return None, errors
    if karta.gvk is None:
        return None, ["spec.structureDefinition.rootComponent.kind: required"]
    return karta, []


# --------------------------------------------------------------------------- cluster sync


class _Daemon:
    """Runs :meth:`run_forever` in a daemon thread until :meth:`stop`: off the request path,
    one per worker process (threads do not survive gunicorn's fork)."""

    thread_name = "karta"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_forever(self) -> None:
        raise NotImplementedError

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.run_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)


class Gone(Exception):
    """The watch's resourceVersion is too old (410): relist."""


#: A watch that ends sooner than this did not really run (a proxy cutting streams, an API
#: server in trouble); the next one waits as after an error.
MIN_WATCH_SECONDS = 1.0


def backoff(failures: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Full-jitter exponential back-off: uniform in [0, min(cap, base * 2**failures)]."""
    return random.uniform(0, min(cap, base * (2 ** min(failures, 16))))


class ClusterSync(_Daemon):
    """List+watch Kartas into ``state`` (see the module docstring).

    ``state`` should be created with ``watch_cluster=True`` so ``/readyz`` stays false until
    the first list has been applied.
    """

    thread_name = "karta-sync"

    def __init__(
        self,
        state: State,
        api: client.ApiClient,
        *,
        resync_seconds: float = 600.0,
        watch_timeout: int = 300,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
    ) -> None:
        super().__init__()
        self.state = state
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.resync_seconds = resync_seconds
        self.watch_timeout = watch_timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._objects: dict[str, dict[str, Any]] = {}
        self._loaded: dict[str, tuple[str, Karta | None]] = {}  # name -> (resourceVersion, karta)
        self._lock = threading.Lock()
        self._watch: watch.Watch | None = None

    # -- reading

    def objects(self) -> list[dict[str, Any]]:
        """The raw Kartas last seen in the cluster (for :func:`conflicting_karta`)."""
        with self._lock:
            return list(self._objects.values())

    # -- lifecycle

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        w = self._watch
        if w is not None:
            w.stop()
            resp = getattr(w, "_resp", None)
            if resp is not None:  # unblock a read that is waiting for the next event
                with contextlib.suppress(Exception):  # best effort, from another thread
                    resp.close()
        super().stop(timeout)

    def run_forever(self) -> None:
        # Tries in a row that did not get a watch going: errors, 410s and streams that ended at
        # once. Only a watch that ran resets it (a successful list does not), so an API server
        # or proxy that fails every watch is retried ever more slowly, never in a tight loop.
        failures = 0
        while not self._stop.is_set():
            try:
                rv = self.relist()
                deadline = time.monotonic() + self.resync_seconds
                while not self._stop.is_set() and time.monotonic() < deadline:
                    remaining = max(1, int(min(self.watch_timeout, deadline - time.monotonic())))
                    started = time.monotonic()
                    rv = self.watch_once(rv, remaining)
                    if time.monotonic() - started >= MIN_WATCH_SECONDS:
                        failures = 0
                    else:
                        failures += 1
                        self._stop.wait(self._delay(failures))
                if not self._stop.is_set():
                    _log("kartas.resync")
            except Gone:
                failures += 1
                _log("kartas.relist", reason="410 Gone")
                self._stop.wait(self._delay(failures))
            except Exception as e:
                if self._stop.is_set():
                    break
                failures += 1
                delay = self._delay(failures)
                _log(
                    "kartas.error",
                    logging.WARNING,
                    error=_describe(e),
                    failures=failures,
                    retry_in=round(delay, 3),
                )
                self._stop.wait(delay)

    def _delay(self, failures: int) -> float:
        return backoff(failures, self.backoff_base, self.backoff_cap)

    # -- one list, one watch

    def relist(self) -> str:
        """List all Kartas, replace the map, publish; returns the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        cont = None
        while True:
            query: list[tuple[str, Any]] = [("limit", 500)]
            if cont:
                query.append(("continue", cont))
            page = _request(
                self.api, "GET", f"/apis/{GROUP}/{KARTA_VERSION}/{KARTA_RESOURCE}", query=query
            )
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                rv = str(meta.get("resourceVersion") or "")
                break
        with self._lock:
            self._objects = {_name(o): o for o in items if _name(o)}
        self._publish()
        return rv

    def watch_once(self, rv: str, timeout_seconds: int) -> str:
        """Watch from ``rv`` until the server ends the stream; returns the last resourceVersion.
        Raises :class:`Gone` on 410 (an ERROR event or the HTTP status)."""
        w = watch.Watch()
        self._watch = w
        try:
            for event in w.stream(
                self.custom.list_cluster_custom_object,
                GROUP,
                KARTA_VERSION,
                KARTA_RESOURCE,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _request_timeout=(10, timeout_seconds + 30),
            ):
                if self._stop.is_set():
                    break
                rv = self._apply_event(event, rv)
        except ApiException as e:
            if e.status == 410:
                raise Gone() from e
            raise
        finally:
            self._watch = None
        return rv

    def _apply_event(self, event: Mapping[str, Any], rv: str) -> str:
        kind = event.get("type")
        obj = event.get("raw_object", event.get("object"))
        if not isinstance(obj, dict):
            return rv
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        new_rv = str(meta.get("resourceVersion") or rv)
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise ApiException(status=obj.get("code"), reason=str(obj.get("message")))
        if kind == "BOOKMARK":
            return new_rv
        name = _name(obj)
        if not name or kind not in ("ADDED", "MODIFIED", "DELETED"):
            return new_rv
        with self._lock:
            if kind == "DELETED":
                self._objects.pop(name, None)
            else:
                self._objects[name] = obj
        _log("karta." + kind.lower(), name=name, resourceVersion=new_rv)
        self._publish()
        return new_rv

    def _publish(self) -> None:
        """Load what changed (cached by name and resourceVersion), drop duplicates of a root
        kind (the oldest Karta wins), hand the rest to the state."""
        with self._lock:
            objects = dict(self._objects)
        loaded: list[tuple[Mapping[str, Any], Karta]] = []
        cache: dict[str, tuple[str, Karta | None]] = {}
        for name, obj in sorted(objects.items()):
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            hit = self._loaded.get(name)
            if hit is not None and hit[0] == rv and rv:
                karta = hit[1]
            else:
                karta, errors = load_cluster_karta(obj)
                if karta is None:
                    _log("karta.skipped", logging.WARNING, name=name, errors=errors)
            cache[name] = (rv, karta)
            if karta is not None:
                loaded.append((obj, karta))
        self._loaded = cache

        def age(item: tuple[Mapping[str, Any], Karta]) -> tuple[str, str]:
            meta = item[0].get("metadata") or {}
            return (str(meta.get("creationTimestamp") or ""), item[1].name)

        kept: dict[GVK | None, Karta] = {}
        kept_objs: list[Mapping[str, Any]] = []
        for obj, karta in sorted(loaded, key=age):
            if karta.gvk in kept:
                _log(
                    "karta.skipped",
                    logging.WARNING,
                    name=karta.name,
                    errors=[conflicting_karta(obj, kept_objs)],
                )
                continue
            kept[karta.gvk] = karta
            kept_objs.append(obj)
        self.state.set_cluster(sorted(kept.values(), key=lambda k: k.name))


def _describe(e: BaseException) -> str:
    if isinstance(e, ApiException):
        return f"HTTP {e.status}: {e.reason}"
    return f"{type(e).__name__}: {e}"


# --------------------------------------------------------------------------- discovery


class Discovery:
    """Kinds to resource names (and scope) from API discovery, one request per group/version,
    cached for the life of this object (make a new one per reconcile to see new CRDs).
    Unknown kinds fall back to :func:`default_plural` and an unknown scope."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self._gv: dict[tuple[str, str], dict[str, tuple[str, bool]]] = {}

    def _resources(self, group: str, version: str) -> dict[str, tuple[str, bool]]:
        key = (group, version)
        if key not in self._gv:
            path = f"/api/{version}" if not group else f"/apis/{group}/{version}"
            try:
                doc = _request(self.api, "GET", path)
            except ApiException as e:
                if e.status != 404:
                    raise
                doc = {}
            by_kind: dict[str, tuple[str, bool]] = {}
            for r in (doc or {}).get("resources") or []:
                name = r.get("name") or ""
                if "/" in name or not r.get("kind"):
                    continue  # subresources (deployments/scale) carry their parent's kind
                by_kind.setdefault(r["kind"], (name, bool(r.get("namespaced"))))
            self._gv[key] = by_kind
        return self._gv[key]

    def resource(self, gvk: GVK) -> tuple[str, bool] | None:
        return self._resources(gvk.group, gvk.version).get(gvk.kind)

    def plural(self, gvk: GVK) -> str:
        found = self.resource(gvk)
        return found[0] if found else default_plural(gvk)

    def scope(self, gvk: GVK) -> str | None:
        found = self.resource(gvk)
        if found is None:
            return None
        return "Namespaced" if found[1] else "Cluster"


def plural_from_discovery(api: client.ApiClient) -> Callable[[GVK], str]:
    """A ``GVK -> plural`` function backed by discovery (``/api/v1``, ``/apis/<g>/<v>``)."""
    return Discovery(api).plural


# --------------------------------------------------------------------------- leader election


def _micro_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    """Leader election on a ``coordination.k8s.io/v1`` Lease, after client-go's: a lease held
    by someone else counts as expired only when its record has not changed for its
    ``leaseDurationSeconds`` *as observed on our own clock* (no trust in other clocks);
    updates carry the resourceVersion, so of two candidates only one wins (409 for the other).
    """

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str = LEASE_NAME,
        *,
        holder: str | None = None,
        lease_seconds: int = 15,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.holder = holder or identity()
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.now = now
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._leading_until = 0.0  # our clock: after this, we no longer count as leader

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    def is_leader(self) -> bool:
        return self.clock() < self._leading_until

    def try_acquire_or_renew(self) -> bool:
        start = self.clock()
        now = self.now()
        try:
            lease = _request(self.api, "GET", self.path)
        except ApiException as e:
            if e.status != 404:
                raise
            lease = None
        spec_now = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_seconds,
            "renewTime": _micro_time(now),
        }
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec_now, "acquireTime": _micro_time(now), "leaseTransitions": 0},
            }
            path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
            return self._write("POST", path, body, start, "acquired")
        spec = lease.get("spec") or {}
        record = (
            spec.get("holderIdentity"),
            spec.get("renewTime"),
            spec.get("acquireTime"),
            spec.get("leaseDurationSeconds"),
        )
        if record != self._observed:
            self._observed, self._observed_at = record, start
        holder = spec.get("holderIdentity")
        if holder and holder != self.holder:
            duration = spec.get("leaseDurationSeconds") or self.lease_seconds
            if start < self._observed_at + duration:
                self._leading_until = 0.0
                return False  # another holder's lease is fresh
            transitions = int(spec.get("leaseTransitions") or 0) + 1
            new_spec = {
                **spec,
                **spec_now,
                "acquireTime": _micro_time(now),
                "leaseTransitions": transitions,
            }
            what = "taken over"
        else:
            new_spec = {**spec, **spec_now}
            if not holder:
                new_spec["acquireTime"] = _micro_time(now)
            what = "renewed" if self.is_leader() else "acquired"
        body = {**lease, "spec": new_spec}
        return self._write("PUT", self.path, body, start, what)

    def _write(self, method: str, path: str, body: Any, start: float, what: str) -> bool:
        try:
            _request(self.api, method, path, body=body)
        except ApiException as e:
            if e.status in (409, 422):  # someone else wrote first
                self._leading_until = 0.0
                return False
            raise
        if what != "renewed":
            _log("leader." + what.replace(" ", "-"), holder=self.holder, lease=self.name)
        # Count as leader a little less than the lease lasts, measured from before the request.
        self._leading_until = start + self.lease_seconds * 0.8
        return True

    def release(self) -> None:
        """Give the lease up (on shutdown) so another replica takes over without waiting."""
        if not self.is_leader():
            return
        self._leading_until = 0.0
        try:
            lease = _request(self.api, "GET", self.path)
            if (lease.get("spec") or {}).get("holderIdentity") == self.holder:
                lease["spec"]["holderIdentity"] = None
                lease["spec"]["leaseDurationSeconds"] = 1
                _request(self.api, "PUT", self.path, body=lease)
        except Exception as e:
            _log("leader.release-failed", logging.WARNING, error=_describe(e))


# --------------------------------------------------------------------------- webhook upkeep


class WebhookConfigKeeper(_Daemon):
    """Keeps ``karta-webhook``'s webhook configurations in line with the registry, while leading.

    Register :meth:`on_snapshot` in ``state.listeners``: it only records the new kinds and wakes
    the keeper's thread (listeners run under the state's lock, on the sync thread). The thread
    renews the lease every ``retry_seconds`` and, while leading, reconciles on a change and
    every ``resync_seconds``: read the configuration, compare the workload rules and every
    ``caBundle`` with what is wanted, and write it back with its resourceVersion (409: reread).
    """

    thread_name = "karta-keeper"

    def __init__(
        self,
        state: State,
        api: client.ApiClient,
        *,
        elector: LeaseElector | None,
        ca_file: str | Path | None = None,
        retry_seconds: float = 2.0,
        resync_seconds: float = 300.0,
        name: str = NAME,
    ) -> None:
        super().__init__()
        self.api = api
        self.elector = elector
        self.ca_file = Path(ca_file) if ca_file else None
        self.retry_seconds = retry_seconds
        self.resync_seconds = resync_seconds
        self.name = name
        self.writes = 0
        self._kinds: list[GVK] = state.snapshot.registry.kinds()
        self._operations: tuple[str, ...] = state.snapshot.policy.operations
        self._dirty = True
        self._wake = threading.Event()
        self._last_reconcile = 0.0

    def on_snapshot(self, snap: Snapshot) -> None:
        kinds = snap.registry.kinds()
        operations = snap.policy.operations
        if kinds != self._kinds or operations != self._operations:
            self._kinds, self._operations = kinds, operations
            self._dirty = True
            self._wake.set()

    # -- wanted state

    def ca_bundle(self) -> str | None:
        if self.ca_file is None:
            return None
        try:
            pem = self.ca_file.read_bytes()
        except OSError as e:
            _log("webhooks.ca-unreadable", logging.WARNING, file=str(self.ca_file), error=str(e))
            return None
        return encode_ca_bundle(pem) if pem.strip() else None

    def wanted_rules(self) -> list[dict[str, Any]]:
        d = Discovery(self.api)
        return webhook_rules(self._kinds, d.plural, self._operations, scope=d.scope)

    # -- one pass

    def reconcile(self) -> bool:
        """Bring both configurations in line (only while leading); True when something was
        written. Raises on API errors other than a conflict that persists."""
        if self.elector is not None and not self.elector.is_leader():
            return False
        self._dirty = False
        rules = self.wanted_rules()
        ca = self.ca_bundle()
        wrote = self._update("mutatingwebhookconfigurations", rules, ca)
        wrote = self._update("validatingwebhookconfigurations", None, ca) or wrote
        self._last_reconcile = time.monotonic()
        return wrote

    def _update(self, resource: str, rules: list[dict[str, Any]] | None, ca: str | None) -> bool:
        path = f"/apis/admissionregistration.k8s.io/v1/{resource}/{self.name}"
        for _ in range(5):
            try:
                current = _request(self.api, "GET", path)
            except ApiException as e:
                if e.status == 404:
                    _log("webhooks.missing", logging.WARNING, resource=resource, name=self.name)
                    return False
                raise
            changed = []
            annotations = (current.get("metadata") or {}).get("annotations") or {}
            if CA_INJECTOR_ANNOTATION in annotations:
                ca = None  # cert-manager's CA injector owns caBundle here; never fight it
            for hook in current.get("webhooks") or []:
                is_workloads = rules is not None and hook.get("name") == WORKLOAD_WEBHOOK
                if is_workloads and hook.get("rules") != rules:
                    hook["rules"] = rules
                    changed.append("rules")
                cc = hook.setdefault("clientConfig", {})
                if ca is not None and cc.get("caBundle") != ca:
                    cc["caBundle"] = ca
                    changed.append(f"{hook.get('name')}.caBundle")
            if not changed:
                return False
            if self.elector is not None and not self.elector.is_leader():
                return False
            try:
                _request(self.api, "PUT", path, body=current)
            except ApiException as e:
                if e.status == 409:
                    continue  # changed under us: reread and compare again
                raise
            self.writes += 1
            _log("webhooks.updated", resource=resource, name=self.name, changed=changed)
            return True
        _log("webhooks.conflict", logging.WARNING, resource=resource, name=self.name)
        return False

    # -- loop

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()  # before the wake-up, so the woken loop sees it and ends
        self._wake.set()
        super().stop(timeout)
        if self.elector is not None:
            self.elector.release()

    def step(self) -> None:
        """One tick: renew or try to take the lease, then reconcile if due."""
        was_leader = self.elector.is_leader() if self.elector else True
        leading = self.elector.try_acquire_or_renew() if self.elector else True
        if not leading:
            return
        due = time.monotonic() - self._last_reconcile >= self.resync_seconds
        if self._dirty or not was_leader or due:
            self.reconcile()

    def run_forever(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self.step()
                failures = 0
                delay = self.retry_seconds
            except Exception as e:
                failures += 1
                self._dirty = True
                delay = min(self.retry_seconds, backoff(failures, 0.5, self.retry_seconds * 4))
                _log("webhooks.error", logging.WARNING, error=_describe(e), failures=failures)
            self._wake.wait(delay)
            self._wake.clear()


# --------------------------------------------------------------------------- wiring


class Cluster:
    """What :func:`start` started: stop both with :meth:`stop`."""

    def __init__(self, sync: ClusterSync, keeper: WebhookConfigKeeper | None) -> None:
        self.sync = sync
        self.keeper = keeper

    def objects(self) -> list[dict[str, Any]]:
        return self.sync.objects()

    def stop(self) -> None:
        self.sync.stop()
        if self.keeper is not None:
            self.keeper.stop()


_current: Cluster | None = None  # what start() started in this process (one per worker)


def conflict(obj: Mapping[str, Any]) -> str | None:
    """For the validating webhook: the one-Karta-per-kind error for ``obj`` against the Kartas
    this process's :class:`ClusterSync` has seen, None when fine or when no sync runs."""
    cluster = _current
    return conflicting_karta(obj, cluster.objects()) if cluster is not None else None


def start(
    state: State,
    kubeconfig: str | None = None,
    *,
    api: client.ApiClient | None = None,
    ca_file: str | Path | None = None,
    namespace: str | None = None,
    keep_webhooks: bool = True,
    resync_seconds: float = 600.0,
) -> Cluster | None:
    """Start the cluster sync (and, unless ``keep_webhooks`` is false, the webhook keeper with
    its leader election) in daemon threads; None when there is no cluster configuration, in
    which case the server runs on the catalog alone and ``state`` is marked synced.

    Call it per gunicorn worker, after fork (threads do not survive a fork). ``state`` should be
    created with ``watch_cluster=True``; ``ca_file`` is the CA to publish as ``caBundle``
    (e.g. the mounted ``ca.crt``), None to leave caBundle to someone else (cert-manager).
    """
    api = api or api_client_from_config(kubeconfig)
    if api is None:
        if not state.ready:
            state.set_cluster([])
        return None
    sync = ClusterSync(state, api, resync_seconds=resync_seconds)
    keeper = None
    if keep_webhooks:
        elector = LeaseElector(api, namespace or pod_namespace())
        keeper = WebhookConfigKeeper(state, api, elector=elector, ca_file=ca_file)
        state.listeners.append(keeper.on_snapshot)
        keeper.start()
    sync.start()
    global _current
    _current = Cluster(sync, keeper)
    return _current
