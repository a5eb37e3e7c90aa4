"""The cluster's policy objects: a :class:`~webhook.cluster.listwatch.ListWatch` of
``kartapolicies.policies.karta-webhook.run.ai`` (cluster-scoped ``KartaPolicy``) whose valid
objects are handed to the state, which puts them after the policy file's rules
(:func:`~webhook.mutation.policyobject.combine`). A change is in force as soon as its watch
event is read. An object the server cannot use (one stored before the validating webhook was
installed) is not in force and is logged once per change (``policy.skipped``, with every error).
Without the CRD (a file-only install) the file policy alone is in force; the list is tried
again every :data:`ABSENT_RETRY_SECONDS`.

:class:`PolicyStatus` writes each object's ``Accepted`` condition while this process leads:
``True``/``Accepted`` when it is in force, ``False``/``Invalid`` with every error at its field
path (bounded as a Karta's conditions are), through the status subresource with the
resourceVersion it read, and only when the condition changed. A policy with a rule that has
``gang`` also gets ``GangScheduling`` (:func:`gang_condition`): whether the cluster serves the
PodGroup API the gang needs, so ``kubectl describe`` says why its workloads' pods get no group.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Unpack

from kubernetes.client.exceptions import ApiException

from webhook.admission import conditions
from webhook.admission.state import State
from webhook.base.limits import STATUS_ERRORS, STATUS_MESSAGE_CHARS
from webhook.cluster.api import log_event
from webhook.cluster.listwatch import Gone, ListWatch, resource_version
from webhook.cluster.statuswrite import LeaderStatusWriter, WriterOptions, object_generation
from webhook.mutation.policy import Policy
from webhook.mutation.policyfile import PolicyError
from webhook.mutation.policyobject import (
    GROUP,
    NAMESPACED_PLURAL,
    PLURAL,
    VERSION,
    cluster_conflicts,
    cluster_part,
    object_namespace,
    object_ref,
    parse_namespace_policy_object,
    parse_policy_object,
)

#: how often a missing policy CRD is looked for again
ABSENT_RETRY_SECONDS = 30.0
ACCEPTED = "Accepted"
#: a KartaNamespacePolicy's condition: a cluster policy rule sets a key it sets, and wins
SHADOWED = "Shadowed"
#: a policy with a ``gang`` rule: whether the cluster serves PodGroups (else nothing is written)
GANG = "GangScheduling"
#: whether the PodGroup API is served and what was seen; None before the first look
GangAPI = Callable[[], "tuple[bool, str] | None"]


@dataclass(frozen=True)
class Seen:
    """A KartaPolicy as last seen: the object, and the policy it gives or why it cannot."""

    obj: Mapping[str, Any]
    policy: Policy | None
    errors: tuple[str, ...] = ()


def accepted(seen: Seen, over: tuple[str, ...] = ()) -> conditions.Condition:
    """The ``Accepted`` condition of one object; ``over``: why it is left out of the policy in
    force, past a bound of one policy together with the others (issue 39)."""
    if seen.policy is not None and over:
        message = "not in force, past a bound together with the policies before it: " + (
            "; ".join(over)
        )
        if len(message) > STATUS_MESSAGE_CHARS:
            message = message[: STATUS_MESSAGE_CHARS - 3] + "..."
        return conditions.Condition(ACCEPTED, False, "OverBounds", message)
    if seen.policy is not None:
        n = len(seen.policy.rules)
        return conditions.Condition(ACCEPTED, True, "Accepted", f"in force: {n} rules")
    shown = list(seen.errors[:STATUS_ERRORS])
    more = f" (and {len(seen.errors) - len(shown)} more)" if len(seen.errors) > len(shown) else ""
    message = "; ".join(shown) + more
    if len(message) > STATUS_MESSAGE_CHARS:
        message = message[: STATUS_MESSAGE_CHARS - 3] + "..."
    return conditions.Condition(ACCEPTED, False, "Invalid", message)


def gang_condition(
    seen: Seen, current: list[dict[str, Any]], api: tuple[bool, str] | None
) -> conditions.Condition | None:
    """``GangScheduling`` of a policy with a ``gang`` rule: True/``PodGroupsServed`` or
    False/``PodGroupsNotServed`` with what discovery saw (``api``; nothing before the first
    look). A policy that no longer has such a rule gets False/``NoGangRule`` where it had the
    condition; one that never had it, none."""
    if seen.policy is None or not seen.policy.gang:
        if any(c.get("type") == GANG for c in current):
            return conditions.Condition(GANG, False, "NoGangRule", "no rule has gang")
        return None
    if api is None:
        return None
    served, message = api
    reason = "PodGroupsServed" if served else "PodGroupsNotServed"
    return conditions.Condition(GANG, served, reason, message)


def shadowed(shadows: list[str]) -> conditions.Condition:
    """The ``Shadowed`` condition of a KartaNamespacePolicy: True, naming each key and the
    cluster rule that wins it, while a cluster policy sets a key it sets (its rule then loses
    there: cluster rules come first); False once none does."""
    if not shadows:
        return conditions.Condition(
            SHADOWED, False, "NotShadowed", "no cluster policy sets its keys"
        )
    shown = "; ".join(shadows[:STATUS_ERRORS])
    more = f" (and {len(shadows) - STATUS_ERRORS} more)" if len(shadows) > STATUS_ERRORS else ""
    message = f"a cluster policy wins: {shown}{more}"
    if len(message) > STATUS_MESSAGE_CHARS:
        message = message[: STATUS_MESSAGE_CHARS - 3] + "..."
    return conditions.Condition(SHADOWED, True, "ClusterPolicyWins", message)


def shadows_in(state: State) -> Callable[[str, Policy], list[str]]:
    """For a KartaNamespacePolicy (by ``<namespace>/<name>``), the keys a cluster policy in
    force in ``state`` sets in its namespace, each with the rule that wins it."""

    def shadows(key: str, policy: Policy) -> list[str]:
        cluster = cluster_part(state.snapshot.policy)
        namespace = key.partition("/")[0]
        return [f"{e.path}: {e.message}" for e in cluster_conflicts(policy, cluster, namespace)]

    return shadows


class PolicySync(ListWatch[Seen]):
    """KartaPolicies by name: the policy each gives, or why it cannot be used."""

    thread_name = "karta-policies"
    events = "policies"
    item = "policy"

    def __init__(
        self, state: State, api: Any, status: PolicyStatus | None = None, **kwargs: Any
    ) -> None:
        super().__init__(api, GROUP, VERSION, PLURAL, **kwargs)
        self.state = state
        self.status = status
        self._absent_said = False

    def digest(self, name: str, obj: dict[str, Any], previous: Seen | None) -> Seen:
        same = previous is not None and object_generation(previous.obj) == object_generation(obj)
        if previous is not None and same and object_generation(obj) is not None:
            return Seen(obj, previous.policy, previous.errors)  # a status write: same spec
        try:
            return Seen(obj, self.parse(obj))
        except PolicyError as e:
            errors = tuple(str(x) for x in e.errors)
            log_event(
                "policy.skipped", logging.WARNING, name=name, object=object_ref(obj),
                errors=list(errors),
            )  # fmt: skip
            return Seen(obj, None, errors)

    def parse(self, obj: Mapping[str, Any]) -> Policy:
        return parse_policy_object(obj)

    def hand_over(self, policies: list[Policy]) -> None:
        self.state.set_policies(policies)

    def publish(self) -> None:
        items = self.snapshot()
        self.hand_over([s.policy for s in items.values() if s.policy is not None])
        if self.status is not None:
            self.status.on_change(items, dict(self.state.policies_over))

    def relist(self) -> str:
        try:
            rv = super().relist()
        except ApiException as e:
            if e.status != 404:
                raise
            if not self._absent_said:
                self._absent_said = True
                log_event("policies.absent", crd=f"{PLURAL}.{GROUP}")
            with self._lock:
                self.items = {}
            self.publish()
            self.listed.set()  # read: there are none
            self._stop.wait(ABSENT_RETRY_SECONDS)
            raise Gone() from e
        self._absent_said = False
        return rv


class NamespacePolicySync(PolicySync):
    """KartaNamespacePolicies, by ``<namespace>/<name>``, across all namespaces."""

    thread_name = "karta-namespace-policies"
    events = "namespace-policies"
    item = "namespace-policy"

    def __init__(
        self, state: State, api: Any, status: PolicyStatus | None = None, **kwargs: Any
    ) -> None:
        super().__init__(state, api, status, **kwargs)
        self.plural = NAMESPACED_PLURAL

    def key(self, obj: Mapping[str, Any]) -> str:
        return f"{object_namespace(obj)}/{super().key(obj)}"

    def parse(self, obj: Mapping[str, Any]) -> Policy:
        return parse_namespace_policy_object(obj)

    def hand_over(self, policies: list[Policy]) -> None:
        self.state.set_namespaced_policies(policies)


class PolicyStatus(LeaderStatusWriter):
    """Writes the KartaPolicies' ``Accepted`` condition while leading (``elector`` None:
    always); fed by :meth:`PolicySync.publish`."""

    thread_name = "karta-policy-status"
    error_event = "policy-status.error"
    failed_event = "policy.status-failed"

    def __init__(
        self,
        api: Any,
        *,
        namespaced: bool = False,
        shadows: Callable[[str, Policy], list[str]] | None = None,
        gang_api: GangAPI | None = None,
        **options: Unpack[WriterOptions],
    ) -> None:
        super().__init__(api, **options)
        self.namespaced = namespaced
        #: whether the cluster serves PodGroups (the gang controller's discovery), for the
        #: ``GangScheduling`` condition; None: no such condition
        self.gang_api = gang_api
        #: a namespaced policy's keys that a cluster policy wins (:func:`shadows_in`), for its
        #: ``Shadowed`` condition; None: no such condition
        self.shadows = shadows
        self._items: dict[str, Seen] = {}
        self._over: dict[str, tuple[str, ...]] = {}

    def policies_changed(self, _snapshot: Any = None) -> None:
        """The policy in force changed (a state listener): look at the conditions again."""
        if self.shadows is not None:
            self._dirty = True
            self._wake.set()

    def gang_api_changed(self) -> None:
        """Discovery found the PodGroup API served, or not, anew: look at the conditions again."""
        self._dirty = True
        self._wake.set()

    def on_change(
        self, items: dict[str, Seen], over: dict[str, tuple[str, ...]] | None = None
    ) -> None:
        self._items = items
        self._over = over or {}
        self._dirty = True
        self._wake.set()

    def reconcile(self) -> int:
        if not self._leading():
            return 0
        self._dirty = False
        self._last_pass = time.monotonic()
        now = conditions.rfc3339(self.now())
        wrote = 0
        items = self._items
        for name, seen in items.items():
            rv = resource_version(seen.obj)
            if rv and self._patched_from.get(name) == rv:
                continue  # our patch is on its way back through the watch
            generation = object_generation(seen.obj)
            current = conditions.current_conditions(seen.obj)
            want = accepted(seen, self._over.get(name, ()))
            wants = [want]
            if self.shadows is not None and seen.policy is not None:
                wants.append(shadowed(self.shadows(name, seen.policy)))
            gang = gang_condition(seen, current, self.gang_api()) if self.gang_api else None
            if gang is not None:
                wants.append(gang)
            new = conditions.merged(current, wants, generation, now)
            if new is None:
                continue
            if self._patch(name, rv, new, want.status_text):
                wrote += 1
                if self.shadows is not None and seen.policy is not None:  # said as it changes
                    log_event(
                        "namespace-policy.shadowed", name=name, shadowed=wants[1].status,
                        message=wants[1].message,
                    )  # fmt: skip
        self._patched_from = {n: v for n, v in self._patched_from.items() if n in items}
        return wrote

    def _patch(self, key: str, rv: str, new: list[dict[str, Any]], status: str) -> bool:
        """Patch the object ``key`` names (``<namespace>/<name>`` when namespaced, as
        :meth:`reconcile` has it); what is patched and what failed are kept under ``key``."""
        if self.namespaced:
            namespace, _, name = key.partition("/")
            path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{NAMESPACED_PLURAL}/{name}"
        else:
            path = f"/apis/{GROUP}/{VERSION}/{PLURAL}/{key}"
        if not self.write_status(key, rv, path + "/status", {"conditions": new}):
            return False
        log_event("policy.status", name=key, accepted=status)
        return True
