"""The webhook configurations kept in line with the registry, by the leader.

:class:`WebhookConfigKeeper` keeps the MutatingWebhookConfiguration's workload rules equal to
the registry's kinds (plural names and scopes from :class:`Discovery`) and every ``caBundle``
equal to the mounted CA, while it holds the Lease, so ``kubectl apply`` of a new definition
starts mutating that kind without a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.admission.manifests import (
    GANG_WEBHOOK,
    NAME,
    WORKLOAD_WEBHOOK,
    default_plural,
    encode_ca_bundle,
    gang_client_config,
    gang_webhook,
    webhook_rules,
)
from webhook.admission.state import Snapshot, State
from webhook.base.gvk import GVK
from webhook.cluster.api import Ticker, log_event, request
from webhook.cluster.lease import LeaseElector

CA_INJECTOR_ANNOTATION = "cert-manager.io/inject-ca-from"


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
                doc = request(self.api, "GET", path)
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


class WebhookConfigKeeper(Ticker):
    """Keeps ``karta-webhook``'s webhook configurations in line with the registry, while leading.

    Register :meth:`on_snapshot` in ``state.listeners``: it only records the new kinds and wakes
    the keeper's thread (listeners run under the state's lock, on the sync thread). The thread
    renews the lease every ``retry_seconds`` and, while leading, reconciles on a change and
    every ``resync_seconds``: read the configuration, compare the workload rules and every
    ``caBundle`` with what is wanted, and write it back with its resourceVersion (409: reread).
    """

    thread_name = "karta-keeper"
    error_event = "webhooks.error"

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
        super().__init__(retry_seconds)
        self.api = api
        self.elector = elector
        self.ca_file = Path(ca_file) if ca_file else None
        self.resync_seconds = resync_seconds
        self.name = name
        self.writes = 0
        self._kinds: list[GVK] = state.snapshot.registry.kinds()
        self._operations: tuple[str, ...] = state.snapshot.policy.operations
        #: whether the gang's Pod webhook is wanted (a rule of the policy has ``gang``)
        self._gang = state.snapshot.policy.gang
        self._served: tuple[GVK, ...] = ()
        self._last_reconcile = 0.0
        #: configurations found missing at their last look, by resource
        self._missing: dict[str, bool] = {}

    def on_snapshot(self, snap: Snapshot) -> None:
        kinds = snap.registry.kinds()
        operations = snap.policy.operations
        if snap.policy.gang != self._gang:
            self._gang = snap.policy.gang
            self._dirty = True
            self._wake.set()
        # A CRD installed (or removed) for a kind with a definition changes its rule's plural
        # and scope, which discovery now knows: reconcile then, not at the next resync.
        served = tuple(k for k in kinds if snap.crds is not None and k in snap.crds)
        if kinds != self._kinds or operations != self._operations or served != self._served:
            self._kinds, self._operations, self._served = kinds, operations, served
            self._dirty = True
            self._wake.set()

    # -- wanted state

    def ca_bundle(self) -> str | None:
        if self.ca_file is None:
            return None
        try:
            pem = self.ca_file.read_bytes()
        except OSError as e:
            log_event(
                "webhooks.ca-unreadable", logging.WARNING, file=str(self.ca_file), error=str(e)
            )
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
        # A configuration not there yet (the server started before `kubectl apply` of the
        # manifests got to it) is looked for again at the next tick, not at the next resync.
        self._dirty = self._dirty or any(self._missing.values())
        return wrote

    def _update(self, resource: str, rules: list[dict[str, Any]] | None, ca: str | None) -> bool:
        path = f"/apis/admissionregistration.k8s.io/v1/{resource}/{self.name}"
        for _ in range(5):
            try:
                current = request(self.api, "GET", path)
            except ApiException as e:
                if e.status == 404:
                    if not self._missing.get(resource):  # logged once, until it is there
                        log_event(
                            "webhooks.missing", logging.WARNING, resource=resource, name=self.name
                        )
                    self._missing[resource] = True
                    return False
                raise
            self._missing[resource] = False
            changed = []
            annotations = (current.get("metadata") or {}).get("annotations") or {}
            if CA_INJECTOR_ANNOTATION in annotations:
                ca = None  # cert-manager's CA injector owns caBundle here; never fight it
            if rules is not None:
                changed.extend(self._gang_hook(current))
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
                request(self.api, "PUT", path, body=current)
            except ApiException as e:
                if e.status == 409:
                    continue  # changed under us: reread and compare again
                raise
            self.writes += 1
            log_event("webhooks.updated", resource=resource, name=self.name, changed=changed)
            return True
        log_event("webhooks.conflict", logging.WARNING, resource=resource, name=self.name)
        return False

    def _gang_hook(self, current: dict[str, Any]) -> list[str]:
        """The gang's Pod webhook added to ``current`` (the mutating configuration) while the
        policy wants it, removed when not: with the feature off no pod ever reaches us."""
        hooks = current.get("webhooks")
        if not isinstance(hooks, list):
            return []
        there = [h for h in hooks if isinstance(h, dict) and h.get("name") == GANG_WEBHOOK]
        if not self._gang:
            if not there:
                return []
            current["webhooks"] = [h for h in hooks if h not in there]
            return [f"{GANG_WEBHOOK} removed"]
        base = next(
            (h for h in hooks if isinstance(h, dict) and h.get("name") == WORKLOAD_WEBHOOK), None
        )
        if base is None:
            return []
        wanted = gang_webhook(gang_client_config(dict(base.get("clientConfig") or {})))
        selector = base.get("namespaceSelector")
        if selector is not None:
            wanted["namespaceSelector"] = selector
        if there:
            have = {k: v for k, v in there[0].items() if k in wanted}
            if have == wanted:
                return []
            there[0].update(wanted)
            return [f"{GANG_WEBHOOK} updated"]
        hooks.append(wanted)
        return [f"{GANG_WEBHOOK} added"]

    # -- loop

    def stop(self, timeout: float | None = 5.0) -> None:
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
