"""The cluster's policy objects: a :class:`~webhook.cluster.listwatch.ListWatch` of
``kartapolicies.policies.karta-webhook.run.ai`` (cluster-scoped ``KartaPolicy``) whose valid
objects are handed to the state, which puts them after the policy file's rules
(:func:`~webhook.mutation.policyobject.combine`). A change is in force as soon as its watch
event is read. An object the server cannot use (one stored before the validating webhook was
installed) is not in force and is logged once per change (``policy.skipped``, with every error).
Without the CRD (a file-only install) the file policy alone is in force; the list is tried
again every :data:`ABSENT_RETRY_SECONDS`.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes.client.exceptions import ApiException

from webhook.admission.state import State
from webhook.cluster.api import log_event
from webhook.cluster.listwatch import Gone, ListWatch
from webhook.mutation.policy import Policy
from webhook.mutation.policyfile import PolicyError
from webhook.mutation.policyobject import GROUP, PLURAL, VERSION, parse_policy_object

#: how often a missing policy CRD is looked for again
ABSENT_RETRY_SECONDS = 30.0


class PolicySync(ListWatch[Policy | PolicyError]):
    """KartaPolicies by name: the policy each gives, or why it cannot be used."""

    thread_name = "karta-policies"
    events = "policies"
    item = "policy"

    def __init__(self, state: State, api: Any, **kwargs: Any) -> None:
        super().__init__(api, GROUP, VERSION, PLURAL, **kwargs)
        self.state = state
        self._absent_said = False

    def digest(
        self, name: str, obj: dict[str, Any], previous: Policy | PolicyError | None
    ) -> Policy | PolicyError:
        try:
            return parse_policy_object(obj)
        except PolicyError as e:
            log_event(
                "policy.skipped", logging.WARNING, name=name, errors=[str(x) for x in e.errors]
            )
            return e

    def publish(self) -> None:
        items = self.snapshot()
        self.state.set_policies(p for p in items.values() if isinstance(p, Policy))

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
            self._stop.wait(ABSENT_RETRY_SECONDS)
            raise Gone() from e
        self._absent_said = False
        return rv
