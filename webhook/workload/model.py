"""The workload tree resolution gives (:meth:`webhook.workload.locator.Locator.locate`): the workload,
its components, their instances (pod templates, pod specs or sets of fragments) and the slots
where each instance's injectable pod fields are written. Plain data: locations, never copies of
the templates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from webhook.base.gvk import GVK
from webhook.base.pointers import Path_


class Slot(NamedTuple):
    """A place a value is written: ``path`` is its location (the map of a map injectable, the
    field of a single one); the first ``base`` tokens must already hold an object (the
    template, pod spec or fragment parent), deeper missing objects (``metadata``, ``labels``)
    are created. (A named tuple: there are several per instance on every request.)"""

    path: Path_
    base: int
    #: the object at ``path[:base]`` as resolved, so writers need not walk from the root
    anchor: Any
    #: the JSON Pointer of ``path``, built from the location's pointer and a fixed suffix
    pointer: str


class Instance(NamedTuple):
    """One pod template (or pod spec, or set of fragments) of a component. Named tuples, as
    :class:`Slot`: several are made on every request, and they cost a third of a frozen
    dataclass to build."""

    id: str
    location: Path_ | None  # the template / pod spec / first fragment location, for display
    replicas: int
    min_replicas: int | None = None
    max_replicas: int | None = None
    gpus_per_pod: int = 0
    #: where each injectable goes, by :attr:`Injectable.key`; absent: the definition gives none
    slots: Mapping[str, Slot] = MappingProxyType({})

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_pod


class ComponentView(NamedTuple):
    name: str
    kind: GVK | None
    owner: str | None
    instances: tuple[Instance, ...]


@dataclass(frozen=True)
class Workload:
    gvk: GVK
    name: str
    namespace: str
    definition: str
    components: tuple[ComponentView, ...]
    status: str
    warnings: tuple[str, ...] = field(default=())
    #: write paths that failed to evaluate (not absent: failed), so their templates are unknown
    failures: tuple[str, ...] = field(default=())
    #: policy fields the definition says its kind refuses (:func:`webhook.karta.fields.declined`)
    declined: frozenset[str] = field(default=frozenset())

    @property
    def gpus(self) -> int:
        return sum(i.gpus for c in self.components for i in c.instances)

    @property
    def instances(self) -> list[tuple[ComponentView, Instance]]:
        return [(c, i) for c in self.components for i in c.instances]
