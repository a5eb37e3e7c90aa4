"""The namespaces' labels and annotations, for the policy's ``match.namespaceSelector`` and its
``$(namespace.labels['k'])``/``$(namespace.annotations['k'])`` values (see
:mod:`webhook.mutation.scope`).

:class:`NamespaceWatch` is a :class:`~webhook.cluster.listwatch.ListWatch` of ``/api/v1/namespaces``
that asks for metadata only (``PartialObjectMetadata``, as client-go's metadata informers do:
no spec or status crosses the wire) and keeps each namespace's labels and annotations; a
request reads them with :meth:`NamespaceWatch.get`, without a lock or a copy, so a change is in
force as soon as its watch event arrives. RBAC: ``list`` and ``watch`` of ``namespaces``.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from webhook.cluster.listwatch import Gone, ListWatch
from webhook.mutation.scope import NamespaceMeta, namespace_meta

#: metadata only, or whole objects from an API server that cannot (both are read the same)
LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
WATCH_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


class NamespaceWatch(ListWatch[NamespaceMeta]):
    """Namespaces by name: their labels (with ``kubernetes.io/metadata.name``) and annotations."""

    thread_name = "karta-namespaces"
    events = "namespaces"
    item = "namespace"
    accept = LIST_ACCEPT

    def __init__(self, api: Any, **kwargs: Any) -> None:
        super().__init__(api, "", "v1", "namespaces", **kwargs)

    @property
    def path(self) -> str:
        return "/api/v1/namespaces"

    def get(self, name: str) -> NamespaceMeta | None:
        """The namespace's labels and annotations, None when it is not known."""
        return self.items.get(name)

    def digest(
        self, name: str, obj: dict[str, Any], previous: NamespaceMeta | None
    ) -> NamespaceMeta | None:
        got = namespace_meta(obj)
        if got is None:
            return None
        return previous if previous == got[1] else got[1]

    def watch_once(self, rv: str, timeout_seconds: int) -> str:
        """Watch from ``rv``, metadata only (the client's generated calls cannot ask for it)."""
        w = watch.Watch()  # type: ignore[no-untyped-call]
        self._watch = w
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("resourceVersion", rv),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        params = self.api.param_serialize(
            "GET",
            self.path,
            query_params=query,
            header_params={"Accept": WATCH_ACCEPT},
            auth_settings=["BearerToken"],
        )
        try:
            resp: Any = self.api.call_api(*params, _request_timeout=(10, timeout_seconds + 30))
            w._resp = resp.response  # what stop() closes to end a read that waits
            if resp.status == 410:
                raise Gone()
            if not 200 <= resp.status <= 299:
                resp.read()
                raise ApiException(status=resp.status, reason=str(resp.reason))
            for line in iter_resp_lines(resp.response):  # type: ignore[no-untyped-call]
                if self._stop.is_set():
                    break
                event = _event(line)
                if event is not None:
                    rv = self._apply_event(event, rv)
        finally:
            self._watch = None
        return rv


def _event(line: str) -> dict[str, Any] | None:
    """A watch event's line as :meth:`ListWatch._apply_event` reads it."""
    if not line:
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    return {"type": event.get("type"), "raw_object": event.get("object")}
