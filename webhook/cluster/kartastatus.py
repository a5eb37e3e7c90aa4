"""``status.conditions`` of every Karta, written by the leader.

:class:`StatusWriter` keeps each Karta's ``Validated``, ``CRDExists`` and ``Ready`` conditions
(:mod:`webhook.admission.conditions`) in line with what this process knows: the cluster's Kartas and why
those not in use are not (from the Karta sync), and the CRDs (from the CRD sync), all read
from the state's snapshot. While it leads (the Lease of :class:`~webhook.cluster.lease.LeaseElector`),
it merge-patches the ``status`` subresource of a Karta whose conditions differ, with the
resourceVersion it read (a 409 waits for the watch to bring the newer object), and never
writes a Karta whose conditions already say the same thing. Nothing is written before the
CRD sync's first list: "no CRD" must not be claimed before the CRDs are known.

A write the API server refuses is logged as ``karta.status-failed`` naming the Karta and the
API server's reason, once per Karta and reason (not at every retry), and tried again at the
next tick; the other Kartas are written meanwhile.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.admission import conditions
from webhook.admission.manifests import KARTA_RESOURCE
from webhook.admission.state import Snapshot, State
from webhook.cluster.api import Ticker, describe_error, log_event, request
from webhook.cluster.lease import LeaseElector
from webhook.cluster.listwatch import object_name, resource_version
from webhook.karta.model import GROUP, VERSION

__all__ = ["StatusWriter"]

MERGE_PATCH = "application/merge-patch+json"


def api_reason(e: ApiException) -> str:
    """``HTTP 422: Unprocessable Entity: <the API server's message>`` (the message of the
    ``Status`` it answered with, when there is one)."""
    reason = describe_error(e)
    try:
        body = json.loads(e.body) if e.body else None
    except (TypeError, ValueError):
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    return f"{reason}: {message}" if isinstance(message, str) and message else reason


def _generation(obj: Mapping[str, Any]) -> int | None:
    meta = obj.get("metadata")
    g = meta.get("generation") if isinstance(meta, Mapping) else None
    return g if isinstance(g, int) and not isinstance(g, bool) else None


class StatusWriter(Ticker):
    """Writes the Kartas' status conditions while leading (see the module docstring).

    Register :meth:`on_snapshot` in ``state.listeners``. With ``renews`` the writer runs the
    election itself (when no webhook keeper does); otherwise it only asks ``elector`` whether
    this process leads. ``elector`` None: always write (tests, a single process).
    """

    thread_name = "karta-status"
    error_event = "status.error"

    def __init__(
        self,
        state: State,
        api: client.ApiClient,
        *,
        elector: LeaseElector | None,
        renews: bool = False,
        retry_seconds: float = 2.0,
        resync_seconds: float = 300.0,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__(retry_seconds)
        self.api = api
        self.elector = elector
        self.renews = renews
        self.resync_seconds = resync_seconds
        self.now = now
        self.writes = 0
        self._snap: Snapshot = state.snapshot
        self._was_leader = False
        self._last_pass = 0.0
        #: name -> resourceVersion last patched from: that version is stale, do not try again
        self._patched_from: dict[str, str] = {}
        #: name -> why its last write failed (logged once per change)
        self.failed: dict[str, str] = {}

    def on_snapshot(self, snap: Snapshot) -> None:
        """A state listener: runs under the state's lock, so it only records and wakes."""
        self._snap = snap
        self._dirty = True
        self._wake.set()

    def _leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    # -- one pass

    def reconcile(self) -> int:
        """Patch every Karta whose conditions differ (only while leading, and once the CRDs
        are known); returns how many were written. A write the API server refuses is logged
        (see the module docstring) and retried at the next tick; other errors raise."""
        if not self._leading():
            return 0
        snap = self._snap
        self._dirty = False
        self._last_pass = time.monotonic()
        if snap.crds is None:
            return 0
        now = conditions.rfc3339(self.now())
        wrote = 0
        seen: set[str] = set()
        for obj in snap.cluster_kartas:
            name, rv = object_name(obj), resource_version(obj)
            if not name:
                continue
            seen.add(name)
            if rv and self._patched_from.get(name) == rv:
                continue  # our patch is on its way back through the watch
            generation = _generation(obj)
            want = conditions.wanted(obj, snap.cluster_errors.get(name), snap.crds)
            new = conditions.merged(conditions.current_conditions(obj), want, generation, now)
            if new is None:
                continue
            if not self._leading():
                break
            if self._patch(name, rv, new, generation):
                wrote += 1
        self._patched_from = {n: v for n, v in self._patched_from.items() if n in seen}
        self.failed = {n: r for n, r in self.failed.items() if n in seen}
        return wrote

    def _patch(self, name: str, rv: str, new: list[dict[str, Any]], generation: int | None) -> bool:
        status: dict[str, Any] = {"conditions": new}
        if generation is not None:
            status["observedGeneration"] = generation
        body: dict[str, Any] = {"status": status}
        if rv:
            body["metadata"] = {"resourceVersion": rv}  # optimistic concurrency: 409 if stale
        path = f"/apis/{GROUP}/{VERSION}/{KARTA_RESOURCE}/{name}/status"
        try:
            request(self.api, "PATCH", path, body=body, content_type=MERGE_PATCH)
        except ApiException as e:
            if e.status == 404:
                return False  # deleted meanwhile
            if e.status == 409:
                self._dirty = True  # changed meanwhile: the watch brings it, then we look again
                return False
            reason = api_reason(e)
            if self.failed.get(name) != reason:
                log_event("karta.status-failed", logging.WARNING, name=name, error=reason)
            self.failed[name] = reason
            self._dirty = True  # tried again at the next tick
            return False
        if self.failed.pop(name, None) is not None:
            log_event("karta.status-recovered", name=name)
        if rv:
            self._patched_from[name] = rv
        self.writes += 1
        summary = {
            c["type"]: f"{c['status']}/{c['reason']}" for c in new if c["type"] in conditions.TYPES
        }
        log_event("karta.status", name=name, conditions=summary)
        return True

    # -- loop

    def stop(self, timeout: float | None = 5.0) -> None:
        super().stop(timeout)
        if self.renews and self.elector is not None:
            self.elector.release()

    def step(self) -> None:
        """One tick: (renew and) check the lease, then write if something changed, this
        process has just become the leader, or a resync is due."""
        if self.renews and self.elector is not None:
            self.elector.try_acquire_or_renew()
        leading = self._leading()
        became = leading and not self._was_leader
        self._was_leader = leading
        if not leading:
            return
        due = time.monotonic() - self._last_pass >= self.resync_seconds
        if self._dirty or became or due:
            self.reconcile()
