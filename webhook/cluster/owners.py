"""Owners of pods read for the gang's Pod webhook
(:class:`~webhook.admission.gangpod.Owners`): one GET per owner, its resource name from
discovery, a deadline on every call, and the objects kept by UID for a few seconds (a Job's
pods arrive together; a workload's scale is read again soon after it changes), at most
:data:`MAX_CACHED` of them.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.admission.gangpod import OwnerError
from webhook.base.gvk import GVK
from webhook.cluster.api import request
from webhook.cluster.keeper import Discovery

#: owners kept (by UID), and for how long
MAX_CACHED = 1024
TTL_SECONDS = 5.0
#: the longest one GET may take, whatever the walk's deadline
CALL_TIMEOUT = 2.0
#: the largest owner object read (a workload is an API object: at most what etcd keeps)
MAX_OBJECT_BYTES = 3 * 1024 * 1024 + 64 * 1024
#: discovery is asked again after this long (a CRD installed since)
DISCOVERY_SECONDS = 60.0


class OwnerReader:
    """Reads owners by reference (see the module docstring); thread-safe."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[float, Mapping[str, Any]]] = OrderedDict()
        self._discovery = Discovery(api)
        self._discovered = time.monotonic()
        self.gets = 0

    def _path(self, namespace: str, ref: Mapping[str, Any]) -> str | None:
        gvk = GVK.of(ref)
        if gvk is None:
            return None
        with self._lock:
            if time.monotonic() - self._discovered > DISCOVERY_SECONDS:
                self._discovery, self._discovered = Discovery(self.api), time.monotonic()
            discovery = self._discovery
        found = discovery.resource(gvk)
        if found is None:
            return None
        plural, namespaced = found
        base = f"/api/{gvk.version}" if not gvk.group else f"/apis/{gvk.group}/{gvk.version}"
        where = f"/namespaces/{namespace}" if namespaced else ""
        return f"{base}{where}/{plural}/{ref.get('name')}"

    def __call__(
        self, namespace: str, ref: Mapping[str, Any], deadline: float
    ) -> Mapping[str, Any] | None:
        uid = str(ref.get("uid") or "")
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(uid)
            if hit is not None and now - hit[0] < TTL_SECONDS:
                return hit[1]
        left = deadline - now
        if left <= 0:
            raise OwnerError("no time left to read the pod's owners")
        try:
            path = self._path(namespace, ref)
            if path is None:
                return None  # a kind the cluster does not serve: no workload of ours
            obj = request(
                self.api, "GET", path, timeout=min(CALL_TIMEOUT, left), max_bytes=MAX_OBJECT_BYTES
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise OwnerError(f"GET {ref.get('kind')} {ref.get('name')}: HTTP {e.status}") from e
        except Exception as e:
            raise OwnerError(f"GET {ref.get('kind')} {ref.get('name')}: {e}") from e
        self.gets += 1
        if not isinstance(obj, Mapping):
            return None
        got: Mapping[str, Any] = obj
        meta = got.get("metadata")
        if not isinstance(meta, Mapping) or meta.get("uid") != uid:
            return None  # another object holds the name now
        with self._lock:
            self._cache[uid] = (time.monotonic(), got)
            self._cache.move_to_end(uid)
            while len(self._cache) > MAX_CACHED:
                self._cache.popitem(last=False)
        return got
