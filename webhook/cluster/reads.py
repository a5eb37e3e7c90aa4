"""Read-only access to a cluster for the live ``describe``: configuration, GETs and lists with
short timeouts, API discovery, and errors turned into one-line :class:`ClusterError`\\ s.

Only ``get`` and ``list`` are ever sent. A forbidden request, an unreachable cluster and a
kubeconfig that cannot be used are :class:`ClusterError` with ``finding=False`` (the CLI exits 2);
a missing object is left to the caller (:class:`NotFound`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from webhook.base.errors import KartaError
from webhook.cluster.api import request

#: Seconds for each request (connect and read) of the live describe.
TIMEOUT = 5.0
#: Objects per page of a list.
PAGE = 500


class ClusterError(KartaError):
    """A failure to read the cluster, in one line; ``finding`` says it is about the workload
    (exit 1) rather than about the cluster or the command line (exit 2)."""

    def __init__(self, message: str, *, finding: bool = False) -> None:
        super().__init__(message)
        self.finding = finding


class NotFound(Exception):
    """The object asked for does not exist (HTTP 404)."""


@dataclass(frozen=True)
class Resource:
    """One resource of API discovery."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool
    preferred: bool

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def base(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection(self, namespace: str | None) -> str:
        """The collection path, in ``namespace`` (None: all namespaces, or cluster-wide)."""
        if self.namespaced and namespace:
            return f"{self.base()}/namespaces/{namespace}/{self.plural}"
        return f"{self.base()}/{self.plural}"

    def names(self) -> set[str]:
        return {n.lower() for n in (self.kind, self.plural, self.singular, *self.short_names) if n}


class Cluster:
    """A read-only view of one cluster (see the module docstring)."""

    def __init__(
        self, api: client.ApiClient, namespace: str = "default", timeout: float = TIMEOUT
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.timeout = timeout
        self._discovered: list[Resource] | None = None
        self._versions: dict[str, list[Resource]] = {}

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    # -- raw reads

    def get(self, path: str, query: list[tuple[str, Any]] | None = None) -> Any:
        """GET ``path``; :class:`NotFound` on 404, :class:`ClusterError` on anything else that
        is not a success."""
        try:
            return request(self.api, "GET", path, query=query, timeout=self.timeout)
        except ApiException as e:
            if e.status == 404:
                raise NotFound(path) from e
            raise ClusterError(self._why(path, e)) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ClusterError(f"cannot reach the cluster at {self.host}: {_short(e)}") from e

    def items(self, path: str) -> Iterator[dict[str, Any]]:
        """Every item of a collection, page by page (items carry no kind or apiVersion)."""
        cont = ""
        while True:
            query: list[tuple[str, Any]] = [("limit", PAGE)]
            if cont:
                query.append(("continue", cont))
            page = self.get(path, query)
            page = page if isinstance(page, Mapping) else {}
            for item in page.get("items") or []:
                if isinstance(item, dict):
                    yield item
            cont = str((page.get("metadata") or {}).get("continue") or "")
            if not cont:
                return

    def _why(self, path: str, e: ApiException) -> str:
        message = ""
        try:
            body = e.body if isinstance(e.body, str) else ""
            message = str(json.loads(body).get("message") or "") if body else ""
        except (ValueError, AttributeError):
            message = ""
        if e.status == 403:
            return f"forbidden: {message or f'cannot get {path}'}"
        if e.status == 401:
            return f"unauthorized at {self.host}: {message or 'check the credentials'}"
        return f"GET {path}: HTTP {e.status} {e.reason or ''}".rstrip() + (
            f": {message}" if message else ""
        )

    # -- discovery

    def resources(self) -> list[Resource]:
        """Every resource the cluster serves (subresources left out), core group first."""
        if self._discovered is not None:
            return self._discovered
        try:
            out = list(self.group_version("", "v1", preferred=True))
            groups = self.get("/apis")
        except NotFound as e:
            raise ClusterError(f"{self.host} does not serve API discovery ({e})") from e
        todo: list[tuple[str, str, bool]] = []
        for g in (groups or {}).get("groups") or []:
            name = str(g.get("name") or "")
            preferred = str((g.get("preferredVersion") or {}).get("version") or "")
            for v in g.get("versions") or []:
                version = str(v.get("version") or "")
                if name and version:
                    todo.append((name, version, version == preferred))
        with ThreadPoolExecutor(max_workers=8) as pool:
            for found in pool.map(lambda t: self._group_version_or_none(*t), todo):
                out.extend(found)
        self._discovered = out
        return out

    def _group_version_or_none(self, group: str, version: str, preferred: bool) -> list[Resource]:
        try:
            return self.group_version(group, version, preferred=preferred)
        except (NotFound, ClusterError) as e:
            if isinstance(e, ClusterError) and e.args and "cannot reach" in str(e):
                raise
            return []  # an aggregated API that is down, or not ours to read: not this kind

    def group_version(self, group: str, version: str, *, preferred: bool = False) -> list[Resource]:
        """The resources of one group version (cached)."""
        key = f"{group}/{version}"
        if key in self._versions:
            return self._versions[key]
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        doc = self.get(path)
        out = []
        for r in (doc or {}).get("resources") or []:
            name = str(r.get("name") or "")
            if not name or "/" in name:
                continue
            out.append(
                Resource(
                    group=group,
                    version=version,
                    kind=str(r.get("kind") or ""),
                    plural=name,
                    singular=str(r.get("singularName") or ""),
                    short_names=tuple(str(s) for s in r.get("shortNames") or ()),
                    namespaced=bool(r.get("namespaced")),
                    preferred=preferred,
                )
            )
        self._versions[key] = out
        return out

    def resource_for(self, api_version: str, kind: str) -> Resource | None:
        """The resource of an owner reference's ``apiVersion`` and ``kind``."""
        group, _, version = api_version.rpartition("/")
        try:
            found = self.group_version(group, version)
        except NotFound:
            return None
        return next((r for r in found if r.kind == kind), None)

    def find(self, token: str) -> list[Resource]:
        """The resources ``token`` names as kubectl takes it: a kind, plural, singular or
        short name, case-insensitive, optionally ``NAME.GROUP`` or ``NAME.VERSION.GROUP``."""
        token = token.strip().lower()
        everything = self.resources()
        hits = [r for r in everything if token in r.names()]
        if hits:
            return hits
        name, _, rest = token.partition(".")
        if not rest:
            return []
        out = [r for r in everything if name in r.names() and r.group.lower() == rest]
        if out:
            return out
        version, _, group = rest.partition(".")
        return [
            r
            for r in everything
            if name in r.names() and r.group.lower() == group and r.version.lower() == version
        ]


def _short(e: BaseException) -> str:
    text = str(getattr(e, "reason", None) or e)
    return text.splitlines()[0][:300] if text else type(e).__name__


def connect(
    kubeconfig: str | None, context: str | None, timeout: float = TIMEOUT
) -> tuple[client.ApiClient, str]:
    """An API client from ``kubeconfig`` (or ``$KUBECONFIG``, ``~/.kube/config``, and then the
    in-cluster service account) and ``context`` (or the current one), that never retries, and
    the context's namespace (``default`` when it names none)."""
    cfg = client.Configuration()
    namespace = "default"
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=cfg
        )
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        chosen = next((c for c in contexts or [] if c.get("name") == context), None)
        chosen = chosen if context else active
        namespace = str(((chosen or {}).get("context") or {}).get("namespace") or "default")
    except (config.ConfigException, OSError, TypeError, ValueError) as e:
        if kubeconfig or context:
            where = kubeconfig or "the kubeconfig"
            raise ClusterError(f"{where}: cannot use kubeconfig: {_short(e)}") from e
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except config.ConfigException as e2:
            raise ClusterError(
                f"no cluster configured: {_short(e)} (give --kubeconfig, or set KUBECONFIG)"
            ) from e2
    cfg = copy.deepcopy(cfg)
    cfg.retries = False
    return client.ApiClient(cfg), namespace
