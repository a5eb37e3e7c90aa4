"""What one request sees (:class:`Snapshot`: definitions and policy, swapped whole) and what
``/validate`` may call on the cluster (:class:`LiveSamples`).

The holder that builds and swaps snapshots is :class:`webhook.admission.state.State`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from webhook.admission.registry import Registry
from webhook.base.gvk import GVK
from webhook.karta.samples import Sample
from webhook.mutation.policy import Policy
from webhook.schema.crds import SchemaIndex


@dataclass(frozen=True)
class Snapshot:
    """What one request sees: definitions and policy, swapped together, never half-updated;
    the Karta objects the cluster has (loaded or not), which ``/validate`` checks a new one
    against (one Karta per root kind), and why each of them that is not in use is not
    (``cluster_errors``, by name); the schemas of the CustomResourceDefinitions the cluster
    serves (``crds``: None until a CRD sync has listed them, or when none runs)."""

    registry: Registry
    policy: Policy
    cluster_kartas: tuple[Mapping[str, Any], ...] = ()
    cluster_errors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    crds: SchemaIndex | None = None
    #: the file definitions (catalog directories) not in use, by source, with why
    file_errors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class LiveSamples(Protocol):
    """Reads up to a configured number of live objects of a kind from the cluster, within
    ``timeout`` seconds: the samples, and warnings for what could not be read."""

    def __call__(
        self, gvk: GVK, crds: SchemaIndex | None, timeout: float
    ) -> tuple[list[Sample], list[str]]: ...
