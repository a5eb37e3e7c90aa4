"""The native gang's groups made and kept, by the leader: :class:`GangController`.

While a rule of the policy in force has ``gang``, the leader looks every ``period`` seconds at
the pods the workloads' mutation labelled (:data:`~webhook.workload.gang.GANG_LABEL`, one
LIST across namespaces), walks each one's owners to its workload (the Pod webhook's walk,
:func:`~webhook.admission.gangpod.top_workload`, owners cached 5 s by UID), and for every group
of each workload (:func:`~webhook.workload.gang.groups`) keeps a ``scheduling.k8s.io/v1beta1``
PodGroup: created when missing (owned by the workload, so the garbage collector deletes it
with the workload; labelled as ours; ``minCount`` from the replica paths; the pods'
``priorityClassName``), its ``minCount`` patched when the workload's scale changes. Pods
created before their PodGroup wait for it (the scheduler's PreEnqueue).

Discovery decides: on a cluster that does not serve ``podgroups`` in
``scheduling.k8s.io/v1beta1`` nothing is written, and :attr:`GangController.unserved` says
why (a log line ``gangs.unserved`` once per change, the metric
``karta_webhook_gang_api_served`` 0; ``/readyz`` stays ready: the workloads are still mutated).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.admission.gangpod import OWNER_BUDGET, Owners, top_workload
from webhook.admission.state import State
from webhook.cluster.api import Ticker, log_event, request
from webhook.cluster.lease import LeaseElector
from webhook.cluster.statuswrite import MERGE_PATCH, api_reason
from webhook.jq.engine import Engine
from webhook.workload.gang import GANG_LABEL, MODES, Group, groups
from webhook.workload.locator import resolve

GROUP = "scheduling.k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
#: the label on every PodGroup the controller made (and the only ones it changes)
MANAGED_LABEL = "app.kubernetes.io/managed-by"
MANAGER = "karta-webhook"
#: the group's key in its workload's definition, for people reading the PodGroup
KEY_ANNOTATION = "karta-webhook.run.ai/gang-key"
#: pods per page of the LIST, and the most bytes a page may be
PAGE = 500
PAGE_BYTES = 32 * 1024 * 1024
DISCOVERY_SECONDS = 60.0


def podgroup(
    group: Group, namespace: str, owner: Mapping[str, Any], priority_class: str | None
) -> dict[str, Any]:
    """The PodGroup of ``group`` of workload ``owner`` in ``namespace``."""
    meta = owner.get("metadata") or {}
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": group.min_count}}}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": group.name,
            "namespace": namespace,
            "labels": {MANAGED_LABEL: MANAGER},
            "annotations": {KEY_ANNOTATION: group.key},
            "ownerReferences": [
                {
                    "apiVersion": owner.get("apiVersion"),
                    "kind": owner.get("kind"),
                    "name": meta.get("name"),
                    "uid": meta.get("uid"),
                }
            ],
        },
        "spec": spec,
    }


def min_count(pg: Mapping[str, Any]) -> Any:
    return (((pg.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}).get(
        "minCount"
    )


class GangController(Ticker):
    """See the module docstring. Writes only while ``elector`` says this process leads (None:
    always); never renews the lease itself (the keeper or the status writer does)."""

    thread_name = "karta-gangs"
    error_event = "gangs.error"

    def __init__(
        self,
        state: State,
        api: client.ApiClient,
        engine: Engine,
        owners: Owners,
        *,
        elector: LeaseElector | None,
        period: float = 1.0,
        report: Callable[[bool], None] | None = None,
    ) -> None:
        super().__init__(period)
        self.state = state
        self.api = api
        self.engine = engine
        self.owners = owners
        self.elector = elector
        #: told at each look whether the API is served (the server's metric)
        self.report = report
        #: why nothing is written (the API not served), None when it is
        self.unserved: str | None = None
        #: told when the API is found served, or not, anew (the policies' GangScheduling)
        self.listeners: list[Callable[[], None]] = []
        self._known = False
        self._looked = -DISCOVERY_SECONDS
        self.creates = 0
        self.patches = 0

    def served(self) -> bool:
        """Whether the cluster serves PodGroups (asked again every minute)."""
        if time.monotonic() - self._looked < DISCOVERY_SECONDS:
            return self.unserved is None
        self._looked = time.monotonic()
        why: str | None = None
        try:
            doc = request(self.api, "GET", f"/apis/{API_VERSION}", timeout=5.0)
            names = {r.get("name") for r in (doc or {}).get("resources") or []}
            if "podgroups" not in names:
                why = f"{API_VERSION} does not serve podgroups"
        except ApiException as e:
            if e.status != 404:
                raise
            why = (
                f"the cluster does not serve {API_VERSION} (kube-apiserver "
                f"--runtime-config={API_VERSION}=true --feature-gates=GenericWorkload=true)"
            )
        changed = why != self.unserved or not self._known
        if why != self.unserved:
            if why:
                log_event("gangs.unserved", logging.WARNING, reason=why)
            else:
                log_event("gangs.served", api=API_VERSION)
        self.unserved = why
        self._known = True
        if changed:
            for listener in self.listeners:
                listener()
        if self.report is not None:
            self.report(why is None)
        return why is None

    def api_status(self) -> tuple[bool, str] | None:
        """Whether PodGroups are served and what discovery saw; None before the first look
        (made only while a rule has ``gang``)."""
        if not self._known:
            return None
        if self.unserved is None:
            return True, f"{API_VERSION} serves podgroups"
        return False, f"{self.unserved}: no PodGroup is made and no pod gets a schedulingGroup"

    def step(self) -> None:
        if self.elector is not None and not self.elector.is_leader():
            return
        if not self.state.snapshot.policy.gang or not self.served():
            return
        self.reconcile()

    def _pods(self) -> list[Mapping[str, Any]]:
        selector = f"{GANG_LABEL} in ({','.join(MODES)})"
        out: list[Mapping[str, Any]] = []
        token = ""
        while True:
            query: list[tuple[str, Any]] = [("labelSelector", selector), ("limit", PAGE)]
            if token:
                query.append(("continue", token))
            page = request(self.api, "GET", "/api/v1/pods", query=query, max_bytes=PAGE_BYTES)
            out.extend(i for i in page.get("items") or [] if isinstance(i, Mapping))
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return out

    def wanted(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The PodGroups the labelled pods' workloads need, by (namespace, name)."""
        snap = self.state.snapshot
        seen: set[str] = set()
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for pod in self._pods():
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            namespace = str(meta.get("namespace") or "")
            deadline = time.monotonic() + OWNER_BUDGET
            top = top_workload(pod, namespace, snap.registry, self.owners, deadline)
            if top is None:
                continue
            karta, obj = top
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            if uid in seen:
                continue
            seen.add(uid)
            mode = str((meta.get("labels") or {}).get(GANG_LABEL))
            priority = (pod.get("spec") or {}).get("priorityClassName")
            w = resolve(karta, obj, self.engine)
            for g in groups(karta, w, uid, mode):
                out[(namespace, g.name)] = podgroup(g, namespace, obj, priority)
        return out

    def reconcile(self) -> int:
        """Create the missing PodGroups and patch those whose minCount changed; how many
        were written."""
        wanted = self.wanted()
        have = request(
            self.api,
            "GET",
            f"/apis/{API_VERSION}/podgroups",
            query=[("labelSelector", f"{MANAGED_LABEL}={MANAGER}")],
            max_bytes=PAGE_BYTES,
        )
        existing = {
            (str(m.get("namespace")), str(m.get("name"))): pg
            for pg in (have or {}).get("items") or []
            if isinstance(m := pg.get("metadata"), Mapping)
        }
        wrote = 0
        for (namespace, name), body in wanted.items():
            base = f"/apis/{API_VERSION}/namespaces/{namespace}/podgroups"
            current = existing.get((namespace, name))
            try:
                if current is None:
                    request(self.api, "POST", base, body=body)
                    self.creates += 1
                    log_event(
                        "gangs.created", namespace=namespace, name=name, minCount=min_count(body)
                    )
                elif min_count(current) != min_count(body):
                    patch = {"spec": {"schedulingPolicy": body["spec"]["schedulingPolicy"]}}
                    request(
                        self.api, "PATCH", f"{base}/{name}", body=patch, content_type=MERGE_PATCH
                    )
                    self.patches += 1
                    log_event(
                        "gangs.scaled", namespace=namespace, name=name, minCount=min_count(body)
                    )
                else:
                    continue
                wrote += 1
            except ApiException as e:
                if e.status == 409:
                    continue  # made meanwhile (another pass): looked at again next tick
                log_event(
                    "gangs.write-failed",
                    logging.WARNING,
                    namespace=namespace,
                    name=name,
                    error=api_reason(e),
                )
        return wrote
