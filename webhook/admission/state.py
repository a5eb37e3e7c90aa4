"""What the server holds: the snapshot of definitions and policy a request sees, swapped
whole, never half-updated, and its reloads from files (a changed file is read once it has
settled; a file that fails to load leaves its last good version in force).

* the snapshot itself, and what ``/validate`` may read live: :mod:`webhook.admission.snapshot`;
* who calls the reloads in a served process: :mod:`webhook.admission.reloader`;
* the definitions by group/version/kind, and loading catalogs: :mod:`webhook.admission.registry`.

Their names are importable from here too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from webhook.admission.gangpod import Owners
from webhook.admission.registry import FileLoads, Registry, load_catalogs
from webhook.admission.reloader import RELOAD_INTERVAL, FileReloader
from webhook.admission.snapshot import LiveSamples, Snapshot
from webhook.base.documents import yaml_files
from webhook.base.errors import KartaError
from webhook.karta.loading import Loaded, Vet
from webhook.karta.model import Karta
from webhook.mutation.policy import EMPTY, Policy
from webhook.mutation.policyobject import combine, load_policies, within_bounds
from webhook.mutation.scope import Namespaces
from webhook.schema.crds import SchemaIndex

__all__ = [
    "RELOAD_INTERVAL",
    "SETTLE_SECONDS",
    "FileReloader",
    "LiveSamples",
    "Snapshot",
    "State",
]

log = logging.getLogger("karta_webhook")

#: A changed file is read once its newest modification is this old: an editor that truncates
#: and then writes, or a copy in progress, is never read half-way.
SETTLE_SECONDS = 0.5


def _settled(stamps: tuple[tuple[str, float, int], ...], now: float) -> bool:
    """Whether none of the files was modified in the last :data:`SETTLE_SECONDS` (a time far
    ahead of the clock counts as settled, or a skewed clock would stop reloads for good)."""
    newest = max((mtime for _, mtime, _ in stamps), default=-1.0)
    return now - newest >= SETTLE_SECONDS or newest > now + 60


class State:
    """The server's current definitions and policy, reloadable from disk and the cluster.

    Sources: the bundled catalog, ``catalog_dirs`` (re-read when files change), the policy file
    (likewise) and, when a cluster watch runs, the Kartas it reports (:meth:`set_cluster`,
    which win over files for the same group/version/kind). Every change builds a new
    :class:`Snapshot` and swaps it in with one assignment; a source that fails to load is
    logged and its last good version stays in force.
    """

    def __init__(
        self,
        catalog_dirs: Sequence[Path | str] = (),
        policy_path: Path | str | None = None,
        *,
        bundled: bool = True,
        watch_cluster: bool = False,
        vet: Vet | None = None,
    ) -> None:
        self.catalog_dirs = [Path(d) for d in catalog_dirs]
        self.policy_path = Path(policy_path) if policy_path else None
        self.bundled = bundled
        #: the check a catalog directory's definition must pass before it is used
        self.vet = vet
        self._lock = threading.Lock()
        self._file_defs: list[Karta] = []
        self._file_errors: dict[str, tuple[str, ...]] = {}
        self._bundled: Loaded | None = None
        self._more: Loaded | None = None
        #: what the current snapshot was built from (by identity): nothing new, no new one
        self._published: tuple[object, ...] = ()
        self._file_loads = FileLoads()
        self._cluster_defs: list[Karta] = []
        self._cluster_objects: tuple[Mapping[str, Any], ...] = ()
        self._cluster_errors: Mapping[str, tuple[str, ...]] = {}
        self._crds: SchemaIndex | None = None
        self._policy: Policy = EMPTY
        #: the cluster's KartaPolicy objects in force (each a policy named after its object)
        self._cluster_policies: tuple[Policy, ...] = ()
        #: the KartaNamespacePolicy objects (each named ``<namespace>/<name>``)
        self._namespaced_policies: tuple[Policy, ...] = ()
        #: the policy objects left out of the policy in force, past a bound together with the
        #: others (by ``source``: a KartaPolicy's name, ``<namespace>/<name>``), with why
        self.policies_over: dict[str, tuple[str, ...]] = {}
        self._stamps: dict[str, tuple[tuple[str, float, int], ...]] = {}
        self.cluster_synced = not watch_cluster
        #: the cluster's sources besides the Kartas (policy objects, namespaces), by name, each
        #: set once it has been read in full: :attr:`ready` waits for them all
        self.awaiting: dict[str, threading.Event] = {}
        self.listeners: list[Callable[[Snapshot], None]] = []
        #: set by the cluster side when ``/validate`` may read live objects (``--live-samples``)
        self.live_samples: LiveSamples | None = None
        #: the namespaces' labels and annotations the policy reads (the cluster side's namespace
        #: watch; None: none known)
        self.namespaces: Namespaces | None = None
        #: reads a pod's owners for the gang's Pod webhook (the cluster side's; None: none)
        self.owners: Owners | None = None
        # Fail fast at startup on a bad policy or a catalog path that does not exist; a bad
        # definition is rejected (logged, counted) and the others are served.
        self._file_defs = self._load_defs()
        self._policy = self._load_policy()
        self._stamps = self._current_stamps()
        self.snapshot = Snapshot(
            Registry(self._file_defs), self._policy, file_errors=dict(self._file_errors)
        )
        self._published = self._parts()
        #: per source (``catalog``, ``policy``, and ``certificates`` when served): whether its
        #: last load succeeded and when (wall-clock seconds), for the reload-health metrics and
        #: ``/readyz``'s stale sources
        self.reload_status: dict[str, tuple[bool, float]] = {
            key: (key != "catalog" or not self._file_errors, time.time())
            for key in self._watched_files()
        }

    @property
    def ready(self) -> bool:
        return self.cluster_synced and all(e.is_set() for e in self.awaiting.values())

    def waiting_for(self) -> list[str]:
        """The sources not read yet (``kartas``, and the names of :attr:`awaiting`)."""
        out = [] if self.cluster_synced else ["kartas"]
        return out + [name for name, e in self.awaiting.items() if not e.is_set()]

    def _load_defs(self) -> list[Karta]:
        # The bundled catalog ships with the code: read once. The --catalog files are read
        # again only where their bytes changed (see FileLoads).
        if self._bundled is None:
            self._bundled = load_catalogs(bundled=self.bundled)
        try:
            more = self._file_loads.load(self.catalog_dirs, self.vet)
        finally:
            close = getattr(self.vet, "close", None)  # a vet's own engine lives for one load
            if close is not None:
                close()
        if more is self._more:  # every file as it was: the very same definitions
            return self._file_defs
        self._more = more
        loaded = Loaded(
            (*self._bundled.kartas, *more.kartas), (*self._bundled.rejected, *more.rejected)
        )
        errors: dict[str, tuple[str, ...]] = {}
        for e in loaded.rejected:
            source = getattr(e, "source", None) or str(e).split(":", 1)[0]
            why = tuple(str(x) for x in getattr(e, "errors", ())) or (str(e),)
            errors[source] = why
            log.warning(  # the text says it all too: at start no JSON handler may be set yet
                f"definition rejected; the others are loaded: {source}: {'; '.join(why)}",
                extra={
                    "fields": {"event": "karta.rejected", "source": source, "errors": list(why)}
                },
            )
        self._file_errors = errors
        return list(loaded.kartas)

    def _load_policy(self) -> Policy:
        return load_policies(self.policy_path) if self.policy_path else EMPTY

    def _watched_files(self) -> dict[str, list[Path]]:
        files: dict[str, list[Path]] = {"catalog": []}
        for d in self.catalog_dirs:
            files["catalog"].extend(yaml_files(d) if d.is_dir() else [d])
        if self.policy_path:
            files["policy"] = [self.policy_path]
        return files

    def _current_stamps(self) -> dict[str, tuple[tuple[str, float, int], ...]]:
        out = {}
        for key, paths in self._watched_files().items():
            stamps = []
            for p in paths:
                try:
                    st = p.stat()  # follows symlinks: a ConfigMap update swaps ..data
                    stamps.append((str(p), st.st_mtime, st.st_size))
                except OSError:
                    stamps.append((str(p), -1.0, -1))
            out[key] = tuple(stamps)
        return out

    def reload_files(self) -> list[str]:
        """Re-read whatever changed on disk; returns the errors of sources that failed (their
        last good version stays). Cheap when nothing changed: a few ``stat`` calls."""
        stamps = self._current_stamps()
        errors: list[str] = []
        now = time.time()
        with self._lock:
            changed = False
            for key, reload in (("catalog", self._reload_defs), ("policy", self._reload_policy)):
                if stamps.get(key) == self._stamps.get(key):
                    continue
                if not _settled(stamps.get(key, ()), now):
                    continue  # still being written: look again at the next check
                self._stamps[key] = stamps.get(key, ())
                try:
                    reload()
                    changed = True
                    # A rejected definition fails the source's reload (alertable), though the
                    # others are in force: said once per change, like any failed reload.
                    rejected = self._file_errors if key == "catalog" else {}
                    errors.extend(
                        f"{src}: not loaded, the other definitions are: {'; '.join(why)}"
                        for src, why in rejected.items()
                    )
                    self.reload_status[key] = (not rejected, time.time())
                except KartaError as e:
                    errors.append(str(e))
                    self.reload_status[key] = (False, time.time())
                except Exception as e:  # reported once per change, never retried in a loop
                    errors.append(f"{key}: cannot be loaded: {type(e).__name__}: {e}")
                    self.reload_status[key] = (False, time.time())
            if changed:
                self._publish()
        return errors

    def _reload_defs(self) -> None:
        self._file_defs = self._load_defs()

    def _reload_policy(self) -> None:
        self._policy = self._load_policy()

    def set_cluster(
        self,
        kartas: Iterable[Karta],
        objects: Iterable[Mapping[str, Any]] = (),
        errors: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Replace the cluster's definitions (all of them: a list, or the state after a watch
        event), the raw Karta objects they came from (usable or not) and, by name, why those
        not in use are not; and mark the first list as applied."""
        with self._lock:
            self._cluster_defs = list(kartas)
            self._cluster_objects = tuple(objects)
            self._cluster_errors = {k: tuple(v) for k, v in (errors or {}).items()}
            self.cluster_synced = True
            self._publish()

    def set_policies(self, policies: Iterable[Policy]) -> None:
        """Replace the cluster's policy objects in force (all of them); the policy a request
        sees is the file's and theirs (:func:`~webhook.mutation.policyobject.combine`)."""
        with self._lock:
            self._cluster_policies = tuple(policies)
            self._publish()

    def set_namespaced_policies(self, policies: Iterable[Policy]) -> None:
        """Replace the cluster's KartaNamespacePolicy objects (all of them); their rules come
        after the cluster policies' (:func:`~webhook.mutation.policyobject.combine`)."""
        with self._lock:
            self._namespaced_policies = tuple(policies)
            self._publish()

    def set_crds(self, crds: SchemaIndex) -> None:
        """Replace the schemas of the cluster's CustomResourceDefinitions (all of them)."""
        with self._lock:
            self._crds = crds
            self._publish()

    def _parts(self) -> tuple[object, ...]:
        return (
            self._file_defs,
            self._cluster_defs,
            self._policy,
            self._cluster_objects,
            self._cluster_errors,
            self._crds,
            self._cluster_policies,
            self._namespaced_policies,
        )

    def _publish(self) -> None:
        parts = self._parts()
        if len(parts) == len(self._published) and all(
            a is b for a, b in zip(parts, self._published, strict=True)
        ):
            return  # a reload that found every file as it was: nothing to swap or announce
        self._published = parts
        kept, over = within_bounds(
            self._policy, [*self._cluster_policies, *self._namespaced_policies]
        )
        self.policies_over = {name: tuple(str(e) for e in es) for name, es in over.items()}
        for name, errors in over.items():  # said at each change: never a silent skip
            why = [str(e) for e in errors]
            log.warning(
                f"policy object not in force, past a bound of the policy: {name}: "
                + "; ".join(why),
                extra={"fields": {"event": "policy.over_bounds", "name": name, "errors": why}},
            )
        snap = Snapshot(
            Registry([*self._file_defs, *self._cluster_defs]),
            combine(
                self._policy,
                [p for p in kept if any(p is c for c in self._cluster_policies)],
                [p for p in kept if any(p is n for n in self._namespaced_policies)],
            ),
            self._cluster_objects,
            self._cluster_errors,
            self._crds,
            dict(self._file_errors),
        )
        self.snapshot = snap
        for listener in list(self.listeners):
            listener(snap)
