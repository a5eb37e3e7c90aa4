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

import time
from typing import Any, Unpack

from kubernetes import client

from webhook.admission import conditions
from webhook.admission.manifests import KARTA_RESOURCE
from webhook.admission.state import Snapshot, State
from webhook.cluster.api import log_event
from webhook.cluster.listwatch import object_name, resource_version
from webhook.cluster.statuswrite import MERGE_PATCH as MERGE_PATCH
from webhook.cluster.statuswrite import LeaderStatusWriter, WriterOptions, object_generation
from webhook.cluster.statuswrite import api_reason as api_reason
from webhook.karta.model import GROUP, VERSION

__all__ = ["StatusWriter"]


class StatusWriter(LeaderStatusWriter):
    """Writes the Kartas' status conditions while leading (see the module docstring).

    Register :meth:`on_snapshot` in ``state.listeners``. With ``renews`` the writer runs the
    election itself (when no webhook keeper does); otherwise it only asks ``elector`` whether
    this process leads. ``elector`` None: always write (tests, a single process).
    """

    thread_name = "karta-status"
    error_event = "status.error"
    failed_event = "karta.status-failed"
    recovered_event = "karta.status-recovered"

    def __init__(
        self,
        state: State,
        api: client.ApiClient,
        *,
        renews: bool = False,
        **options: Unpack[WriterOptions],
    ) -> None:
        super().__init__(api, renews=renews, **options)
        self._snap: Snapshot = state.snapshot

    def on_snapshot(self, snap: Snapshot) -> None:
        """A state listener: runs under the state's lock, so it only records and wakes."""
        self._snap = snap
        self._dirty = True
        self._wake.set()

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
            generation = object_generation(obj)
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
        path = f"/apis/{GROUP}/{VERSION}/{KARTA_RESOURCE}/{name}/status"
        if not self.write_status(name, rv, path, status):
            return False
        summary = {
            c["type"]: f"{c['status']}/{c['reason']}" for c in new if c["type"] in conditions.TYPES
        }
        log_event("karta.status", name=name, conditions=summary)
        return True
