"""Live Karta definitions: list and watch ``kartas.run.ai`` into the server's state.

:class:`ClusterSync` lists ``kartas.run.ai/v1alpha1`` and watches from the list's
resourceVersion, applies ADDED/MODIFIED/DELETED to a map of raw objects, relists on 410 Gone
and every ``resync_seconds``, backs off (jittered, exponential) on errors and on watches that
keep failing or ending at once, and after each change hands the usable definitions (and every
raw object, for the one-Karta-per-kind check) to :meth:`State.set_cluster`. A definition that
fails the safety screen or the structure checks is logged and skipped, never loaded. It runs in
a daemon thread, off the request path: a request only ever reads :attr:`State.snapshot`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from webhook.definitions import GROUP, VERSION, Karta, load_definition
from webhook.errors import DefinitionError, KartaError
from webhook.gvk import GVK
from webhook.handlers import conflicting_karta
from webhook.jqexpr import Engine
from webhook.kubeapi import Daemon, backoff, describe_error, log_event, request
from webhook.manifests import KARTA_RESOURCE
from webhook.registry import State
from webhook.validation import check


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def load_cluster_karta(obj: Mapping[str, Any], engine: Engine) -> tuple[Karta | None, list[str]]:
    """A Karta from the cluster, or None and the reasons it is not loaded: the shape, the
    safety screen, and the sample-free checks of :func:`webhook.validation.check`."""
    source = f"cluster:karta/{_name(obj)}"
    try:
        karta = load_definition(obj, source)
    except DefinitionError as e:
        return None, [str(x) for x in e.errors]
    except KartaError as e:
        return None, [str(e)]
    report = check(obj, [], engine, source=source)
    if report.errors:
        return None, [str(e) for e in report.errors]
    if karta.gvk is None:
        return None, ["spec.structureDefinition.rootComponent.kind: required"]
    return karta, []


class Gone(Exception):
    """The watch's resourceVersion is too old (410): relist."""


#: A watch that ends sooner than this did not really run (a proxy cutting streams, an API
#: server in trouble); the next one waits as after an error.
MIN_WATCH_SECONDS = 1.0


class ClusterSync(Daemon):
    """List+watch Kartas into ``state`` (see the module docstring).

    ``state`` should be created with ``watch_cluster=True`` so ``/readyz`` stays false until
    the first list has been applied.
    """

    thread_name = "karta-sync"

    def __init__(
        self,
        state: State,
        api: client.ApiClient,
        engine: Engine,
        *,
        resync_seconds: float = 600.0,
        watch_timeout: int = 300,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
    ) -> None:
        super().__init__()
        self.state = state
        self.api = api
        self.engine = engine
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
        """The raw Kartas last seen in the cluster."""
        with self._lock:
            return list(self._objects.values())

    # -- lifecycle

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        w = self._watch
        if w is not None:
            w.stop()  # type: ignore[no-untyped-call]
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
                    log_event("kartas.resync")
            except Gone:
                failures += 1
                log_event("kartas.relist", reason="410 Gone")
                self._stop.wait(self._delay(failures))
            except Exception as e:
                if self._stop.is_set():
                    break
                failures += 1
                delay = self._delay(failures)
                log_event(
                    "kartas.error",
                    logging.WARNING,
                    error=describe_error(e),
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
            page = request(
                self.api, "GET", f"/apis/{GROUP}/{VERSION}/{KARTA_RESOURCE}", query=query
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
        w = watch.Watch()  # type: ignore[no-untyped-call]
        self._watch = w
        try:
            for event in w.stream(  # type: ignore[no-untyped-call]
                self.custom.list_cluster_custom_object,
                GROUP,
                VERSION,
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
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
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
        log_event("karta." + kind.lower(), name=name, resourceVersion=new_rv)
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
                karta, errors = load_cluster_karta(obj, self.engine)
                if karta is None:
                    log_event("karta.skipped", logging.WARNING, name=name, errors=errors)
            cache[name] = (rv, karta)
            if karta is not None:
                loaded.append((obj, karta))
        self._loaded = cache

        def age(item: tuple[Mapping[str, Any], Karta]) -> tuple[str, str]:
            meta = item[0].get("metadata")
            created = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
            return (str(created or ""), item[1].name)

        kept: dict[GVK | None, Karta] = {}
        kept_objs: list[Mapping[str, Any]] = []
        for raw_obj, karta in sorted(loaded, key=age):
            if karta.gvk in kept:
                log_event(
                    "karta.skipped",
                    logging.WARNING,
                    name=karta.name,
                    errors=[conflicting_karta(raw_obj, kept_objs)],
                )
                continue
            kept[karta.gvk] = karta
            kept_objs.append(raw_obj)
        raw = [objects[n] for n in sorted(objects)]
        self.state.set_cluster(sorted(kept.values(), key=lambda k: k.name), raw)
