"""Live Karta definitions: list and watch ``kartas.run.ai`` into the server's state.

:class:`ClusterSync` is a :class:`~webhook.cluster.listwatch.ListWatch` of ``kartas.run.ai/v1alpha1``
that keeps the raw objects and, after each change, hands the usable definitions (and every raw
object, for the one-Karta-per-kind check, and why each unusable one is not used, for the
status conditions) to :meth:`State.set_cluster`. A definition that fails the checks of
``/validate`` (shape, safety screen, structure, jq, the bundled samples of its kind and its
CRD's schema: one rulebook for every source) is logged and skipped, never loaded; its
``Validated`` condition says why. It runs in a daemon thread, off the
request path: a request only ever reads :attr:`State.snapshot`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from webhook.admission.manifests import KARTA_RESOURCE
from webhook.admission.rulebook import conflicting_karta, definition_vet
from webhook.admission.state import State
from webhook.base.errors import DefinitionError, KartaError
from webhook.base.gvk import GVK
from webhook.cluster.api import log_event
from webhook.cluster.listwatch import (
    MIN_WATCH_SECONDS,
    Gone,
    ListWatch,
    object_name,
    resource_version,
)
from webhook.jq.engine import Engine
from webhook.karta.loading import Vet, load_definition, samples_dir
from webhook.karta.model import GROUP, VERSION, Karta
from webhook.karta.samples import SampleIndex
from webhook.validation.check import check

__all__ = ["MIN_WATCH_SECONDS", "ClusterSync", "Gone", "load_cluster_karta"]


def load_cluster_karta(
    obj: Mapping[str, Any], engine: Engine, vet: Vet | None = None
) -> tuple[Karta | None, list[str]]:
    """A Karta from the cluster, or None and the reasons it is not loaded: the shape, the
    safety screen, and ``vet`` (the checks of ``/validate``, as for every source:
    :func:`webhook.admission.rulebook.definition_vet`); without one, the sample-free checks of
    :func:`webhook.validation.check.check`."""
    source = f"cluster:karta/{object_name(obj)}"
    try:
        karta = load_definition(obj, source)
    except DefinitionError as e:
        return None, [str(x) for x in e.errors]
    except KartaError as e:
        return None, [str(e)]
    problems = vet(obj, source) if vet is not None else check(obj, [], engine, source=source).errors
    if problems:
        return None, [str(e) for e in problems]
    if karta.gvk is None:
        return None, ["spec.structureDefinition.rootComponent.kind: required"]
    return karta, []


def _check_key(obj: Mapping[str, Any]) -> str:
    """What a check result is cached by: the object's uid and generation when it has them
    (a status or label update changes the resourceVersion but not the definition; the
    generation changes with the spec), else its resourceVersion."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    uid, generation = meta.get("uid"), meta.get("generation")
    if uid and isinstance(generation, int):
        return f"{uid}/{generation}"
    return f"rv/{resource_version(obj)}" if resource_version(obj) else ""


class ClusterSync(ListWatch[dict[str, Any]]):
    """List+watch Kartas into ``state`` (see the module docstring).

    ``state`` should be created with ``watch_cluster=True`` so ``/readyz`` stays false until
    the first list has been applied.
    """

    thread_name = "karta-sync"
    events = "kartas"
    item = "karta"

    def __init__(
        self,
        state: State,
        api: client.ApiClient,
        engine: Engine,
        *,
        resync_seconds: float = 600.0,
        watch_timeout: int = 300,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
    ) -> None:
        super().__init__(
            api,
            GROUP,
            VERSION,
            KARTA_RESOURCE,
            resync_seconds=resync_seconds,
            watch_timeout=watch_timeout,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
        )
        self.state = state
        self.engine = engine
        self._vet: Vet | None = None
        # name -> (check key, karta or None, errors)
        self._loaded: dict[str, tuple[str, Karta | None, tuple[str, ...]]] = {}

    def vet(self) -> Vet:
        """The checks of ``/validate`` for the cluster's Kartas: the bundled samples (read once,
        on first use) and the CRD schemas the state knows at the time."""
        if self._vet is None:
            samples = SampleIndex.load([samples_dir()])
            self._vet = definition_vet(samples, lambda: self.state.snapshot.crds, self.engine)
        return self._vet

    # -- reading

    def objects(self) -> list[dict[str, Any]]:
        """The raw Kartas last seen in the cluster."""
        return list(self.snapshot().values())

    # -- ListWatch

    def digest(
        self, name: str, obj: dict[str, Any], previous: dict[str, Any] | None
    ) -> dict[str, Any]:
        return obj

    def publish(self) -> None:
        """Load what changed (cached by uid and generation), drop duplicates of a root kind
        (the oldest Karta wins), hand the rest to the state with why the others are not used."""
        objects = self.snapshot()
        loaded: list[tuple[Mapping[str, Any], Karta]] = []
        errors: dict[str, tuple[str, ...]] = {}
        cache: dict[str, tuple[str, Karta | None, tuple[str, ...]]] = {}
        for name, obj in sorted(objects.items()):
            key = _check_key(obj)
            hit = self._loaded.get(name)
            if hit is not None and key and hit[0] == key:
                karta, why = hit[1], hit[2]
            else:
                karta, found = load_cluster_karta(obj, self.engine, self.vet())
                why = tuple(found)
                if karta is None:
                    log_event("karta.skipped", logging.WARNING, name=name, errors=list(why))
            cache[name] = (key, karta, why)
            if karta is not None:
                loaded.append((obj, karta))
            else:
                errors[name] = why
        self._loaded = cache

        def age(item: tuple[Mapping[str, Any], Karta]) -> tuple[str, str]:
            meta = item[0].get("metadata")
            created = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
            return (str(created or ""), item[1].name)

        kept: dict[GVK | None, Karta] = {}
        kept_objs: list[Mapping[str, Any]] = []
        for raw_obj, karta in sorted(loaded, key=age):
            if karta.gvk in kept:
                conflict = conflicting_karta(raw_obj, kept_objs) or "another Karta has this kind"
                log_event("karta.skipped", logging.WARNING, name=karta.name, errors=[conflict])
                errors[object_name(raw_obj)] = (conflict,)
                continue
            kept[karta.gvk] = karta
            kept_objs.append(raw_obj)
        raw = [objects[n] for n in sorted(objects)]
        self.state.set_cluster(sorted(kept.values(), key=lambda k: k.name), raw, errors)
