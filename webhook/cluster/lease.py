"""Leader election on a ``coordination.k8s.io/v1`` Lease: only one process of the Deployment
writes the webhook configurations."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.base.errors import KartaError
from webhook.cluster.api import describe_error, identity, log_event, request

LEASE_NAME = "karta-webhook-leader"


class NamespaceMissing(KartaError):
    """The Lease's namespace does not exist: no process can lead, so no webhook configuration
    is kept and no Karta gets status conditions until it is created."""

    def __init__(self, namespace: str, name: str = LEASE_NAME) -> None:
        super().__init__(
            f'namespace "{namespace}" does not exist: the leader Lease {namespace}/{name} '
            "cannot be created, so no process leads (no Karta status conditions, no webhook "
            f"configuration kept); create it (kubectl create namespace {namespace}) or set "
            "POD_NAMESPACE to an existing namespace"
        )
        self.namespace = namespace


def namespace_missing(api: client.ApiClient, namespace: str, name: str = LEASE_NAME) -> bool:
    """Whether ``namespace`` is missing, asked the way the elector would find out: a
    server-side dry-run create of the Lease (the rights the elector has; nothing is stored).
    Only a 404 says so; any other answer or error (forbidden, unreachable, the Lease already
    there) is not taken as missing."""
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {},
    }
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    try:
        request(api, "POST", path, body=body, query=[("dryRun", "All")], timeout=5.0)
    except ApiException as e:
        return bool(e.status == 404)
    except Exception:
        return False
    return False


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
            lease = request(self.api, "GET", self.path)
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
            request(self.api, method, path, body=body)
        except ApiException as e:
            if e.status in (409, 422):  # someone else wrote first
                self._leading_until = 0.0
                return False
            if e.status == 404 and method == "POST":  # creating in a namespace that is not there
                self._leading_until = 0.0
                raise NamespaceMissing(self.namespace, self.name) from e
            raise
        if what != "renewed":
            log_event("leader." + what.replace(" ", "-"), holder=self.holder, lease=self.name)
        # Count as leader a little less than the lease lasts, measured from before the request.
        self._leading_until = start + self.lease_seconds * 0.8
        return True

    def release(self) -> None:
        """Give the lease up (on shutdown) so another replica takes over without waiting."""
        if not self.is_leader():
            return
        self._leading_until = 0.0
        try:
            lease = request(self.api, "GET", self.path)
            if (lease.get("spec") or {}).get("holderIdentity") == self.holder:
                lease["spec"]["holderIdentity"] = None
                lease["spec"]["leaseDurationSeconds"] = 1
                request(self.api, "PUT", self.path, body=lease)
        except Exception as e:
            log_event("leader.release-failed", logging.WARNING, error=describe_error(e))
