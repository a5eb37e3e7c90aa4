"""What the leader-elected status writers share (the Kartas' conditions,
:class:`~webhook.cluster.kartastatus.StatusWriter`; the policy objects' ``Accepted``,
:class:`~webhook.cluster.policysync.PolicyStatus`).

:class:`LeaderStatusWriter` is the loop: at each tick it (renews and) checks the lease, and
reconciles when something changed, this process has just become the leader, or a resync is
due. :meth:`LeaderStatusWriter.write_status` merge-patches one object's ``status`` subresource
with the resourceVersion it read: a 404 (deleted meanwhile) is let go, a 409 waits for the
watch to bring the newer object, and any other refusal is logged once per object and reason
and tried again at the next tick.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

from kubernetes.client.exceptions import ApiException

from webhook.cluster.api import Ticker, describe_error, log_event, request
from webhook.cluster.lease import LeaseElector

__all__ = [
    "MERGE_PATCH",
    "LeaderStatusWriter",
    "WriterOptions",
    "api_reason",
    "object_generation",
]

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


def object_generation(obj: Mapping[str, Any]) -> int | None:
    """``metadata.generation``, when it is a whole number."""
    meta = obj.get("metadata")
    g = meta.get("generation") if isinstance(meta, Mapping) else None
    return g if isinstance(g, int) and not isinstance(g, bool) else None


class WriterOptions(TypedDict):
    """The keyword arguments of :class:`LeaderStatusWriter` a subclass passes on as they are."""

    elector: LeaseElector | None
    retry_seconds: NotRequired[float]
    resync_seconds: NotRequired[float]
    now: NotRequired[Callable[[], datetime]]


class LeaderStatusWriter(Ticker):
    """A status writer that writes only while this process leads (``elector`` None: always).

    With ``renews`` it runs the election itself (renews the lease at each tick, releases it at
    :meth:`stop`); otherwise it only asks ``elector`` whether this process leads. A subclass
    gives :meth:`reconcile` and the log events of a refused write (:attr:`failed_event`) and of
    the first write after one (:attr:`recovered_event`, None: not logged).
    """

    failed_event = "status-failed"
    recovered_event: str | None = None

    def __init__(
        self,
        api: Any,
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
        self._was_leader = False
        self._last_pass = 0.0
        #: name -> resourceVersion last patched from: that version is stale, do not try again
        self._patched_from: dict[str, str] = {}
        #: name -> why its last write failed (logged once per change)
        self.failed: dict[str, str] = {}

    def _leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def reconcile(self) -> int:
        """Write what differs; returns how many objects were written."""
        raise NotImplementedError

    def write_status(self, name: str, rv: str, path: str, status: dict[str, Any]) -> bool:
        """Merge-patch ``status`` at ``path`` (the object's ``/status``) from resourceVersion
        ``rv``; True when written. A refusal other than 404 or 409 is logged once per ``name``
        and reason, kept in :attr:`failed` and tried again at the next tick."""
        body: dict[str, Any] = {"status": status}
        if rv:
            body["metadata"] = {"resourceVersion": rv}  # optimistic concurrency: 409 if stale
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
                log_event(self.failed_event, logging.WARNING, name=name, error=reason)
            self.failed[name] = reason
            self._dirty = True  # tried again at the next tick
            return False
        if self.failed.pop(name, None) is not None and self.recovered_event is not None:
            log_event(self.recovered_event, name=name)
        if rv:
            self._patched_from[name] = rv
        self.writes += 1
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
