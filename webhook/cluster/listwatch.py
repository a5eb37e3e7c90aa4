"""List+watch of one cluster-wide resource, the loop the cluster syncs share.

:class:`ListWatch` lists a resource (in pages) and watches it from the list's resourceVersion,
applies ADDED/MODIFIED/DELETED to a map by name, relists on 410 Gone and every
``resync_seconds``, and backs off (jittered, exponential) on errors and on watches that keep
failing or ending at once. What is kept of each object, and what happens after a change, is
up to the subclass (:meth:`ListWatch.digest`, :meth:`ListWatch.publish`): the Karta sync keeps
the raw objects, the CRD sync only their schemas. It runs in a daemon thread, off the request
path.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from webhook.cluster.api import Daemon, backoff, describe_error, log_event, request

T = TypeVar("T")

#: A watch that ends sooner than this did not really run (a proxy cutting streams, an API
#: server in trouble); the next one waits as after an error.
MIN_WATCH_SECONDS = 1.0


class Gone(Exception):
    """The watch's resourceVersion is too old (410): relist."""


def object_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def resource_version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


def _item_type(page: Mapping[str, Any]) -> tuple[str, str]:
    """The kind and apiVersion of a list's items: ``JobSetList`` holds ``JobSet``s."""
    kind = page.get("kind")
    api_version = page.get("apiVersion")
    item_kind = kind[: -len("List")] if isinstance(kind, str) and kind.endswith("List") else ""
    return item_kind, api_version if isinstance(api_version, str) else ""


class ListWatch(Daemon, Generic[T]):
    """List+watch ``/apis/<group>/<version>/<plural>`` (cluster-wide) into :attr:`items`, a map
    from object name to what :meth:`digest` keeps of it; :meth:`publish` after every change.

    Log events are named ``<events>.resync|relist|error`` for the loop and
    ``<item>.added|modified|deleted`` for objects.
    """

    thread_name = "karta-listwatch"
    events = "objects"
    item = "object"
    #: Objects per list request (CRDs are large: the CRD sync asks for fewer at a time).
    page_size = 500
    #: the form a list asks for (the namespace watch: metadata only)
    accept = "application/json"

    def __init__(
        self,
        api: client.ApiClient,
        group: str,
        version: str,
        plural: str,
        *,
        resync_seconds: float = 600.0,
        watch_timeout: int = 300,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
    ) -> None:
        super().__init__()
        self.api = api
        self.group, self.version, self.plural = group, version, plural
        self.custom = client.CustomObjectsApi(api)
        self.resync_seconds = resync_seconds
        self.watch_timeout = watch_timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.items: dict[str, T] = {}
        #: set once a list has been read in full and published (``/readyz`` waits for it)
        self.listed = threading.Event()
        self._lock = threading.Lock()
        self._watch: watch.Watch | None = None

    @property
    def path(self) -> str:
        return f"/apis/{self.group}/{self.version}/{self.plural}"

    # -- what the subclass decides

    def digest(self, name: str, obj: dict[str, Any], previous: T | None) -> T | None:
        """What to keep of ``obj`` (None: nothing, as if it did not exist); ``previous`` is
        what was kept of the last version seen, to reuse when nothing relevant changed."""
        raise NotImplementedError

    def publish(self) -> None:
        """Called (on this thread, without the lock) after every change to :attr:`items`."""

    def key(self, obj: Mapping[str, Any]) -> str:
        """What :attr:`items` holds ``obj`` by: its name (a namespaced resource's sync says
        ``<namespace>/<name>``)."""
        return object_name(obj)

    # -- reading

    def snapshot(self) -> dict[str, T]:
        with self._lock:
            return dict(self.items)

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
                    log_event(f"{self.events}.resync")
            except Gone:
                failures += 1
                log_event(f"{self.events}.relist", reason="410 Gone")
                self._stop.wait(self._delay(failures))
            except Exception as e:
                if self._stop.is_set():
                    break
                failures += 1
                delay = self._delay(failures)
                log_event(
                    f"{self.events}.error",
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
        """List every object, replace the map, publish; returns the list's resourceVersion."""
        with self._lock:
            before = dict(self.items)
        kept: dict[str, T] = {}
        cont = None
        while True:
            query: list[tuple[str, Any]] = [("limit", self.page_size)]
            if cont:
                query.append(("continue", cont))
            page = request(self.api, "GET", self.path, query=query, accept=self.accept)
            kind, api_version = _item_type(page)
            for obj in page.get("items") or []:
                if isinstance(obj, dict):
                    # The API server leaves kind and apiVersion off a list's items (the list
                    # says them once); put them back, as client-go's decoder does, so an item
                    # reads like the same object from a GET or a watch event.
                    obj.setdefault("kind", kind)
                    obj.setdefault("apiVersion", api_version)
                name = self.key(obj) if isinstance(obj, dict) else ""
                if name:
                    value = self.digest(name, obj, before.get(name))
                    if value is not None:
                        kept[name] = value
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                rv = str(meta.get("resourceVersion") or "")
                break
        with self._lock:
            self.items = kept
        self.publish()
        self.listed.set()
        return rv

    def watch_once(self, rv: str, timeout_seconds: int) -> str:
        """Watch from ``rv`` until the server ends the stream; returns the last resourceVersion.
        Raises :class:`Gone` on 410 (an ERROR event or the HTTP status)."""
        w = watch.Watch()  # type: ignore[no-untyped-call]
        self._watch = w
        try:
            for event in w.stream(  # type: ignore[no-untyped-call]
                self.custom.list_cluster_custom_object,
                self.group,
                self.version,
                self.plural,
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
        new_rv = resource_version(obj) or rv
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise ApiException(status=obj.get("code"), reason=str(obj.get("message")))
        if kind == "BOOKMARK":
            return new_rv
        name = self.key(obj)
        if not name or kind not in ("ADDED", "MODIFIED", "DELETED"):
            return new_rv
        with self._lock:
            previous = self.items.get(name)
        value = None if kind == "DELETED" else self.digest(name, obj, previous)
        with self._lock:
            if value is None:
                self.items.pop(name, None)
            else:
                self.items[name] = value
        log_event(f"{self.item}.{kind.lower()}", name=name, resourceVersion=new_rv)
        self.publish()
        return new_rv
