"""Live objects of a kind, read from the cluster for ``/validate`` (``serve --live-samples N``).

:class:`LiveSampler` reads up to N objects of a Karta's root kind with one list request
(``limit=N``, all namespaces, or cluster-wide for a cluster-scoped kind), bounded in time
(the caller's share of the validation budget, :data:`~webhook.base.limits.LIVE_SAMPLES_TIMEOUT` by
default) and in bytes (:data:`~webhook.base.limits.LIVE_SAMPLES_BYTES`), with a connection of its
own that never retries. Its resource name comes from the CRD index the CRD sync publishes (a
CRD's name is ``<plural>.<group>``) or, for the built-in workload kinds, from the API's naming.
Nothing it meets is an error: a kind that is not served yields nothing, and a list that fails,
is forbidden, times out or is too large yields a warning. The objects are used as they are,
minus ``metadata.managedFields`` (the API server's bookkeeping, which no definition reads).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.admission.manifests import default_plural
from webhook.base.gvk import GVK
from webhook.base.limits import LIVE_SAMPLES_BYTES, LIVE_SAMPLES_TIMEOUT, MAX_LIVE_SAMPLES
from webhook.cluster.api import describe_error, request
from webhook.karta.samples import Sample
from webhook.schema.builtin import BUILTIN_KINDS
from webhook.schema.crds import SchemaIndex

__all__ = ["LiveSampler", "list_path", "no_retry_client"]


def no_retry_client(api: client.ApiClient) -> client.ApiClient:
    """A client with ``api``'s host, credentials and TLS, and a connection pool of its own that
    never retries (urllib3 retries a read that timed out, which would multiply the deadline)."""
    cfg = copy.deepcopy(api.configuration)
    cfg.retries = False
    return client.ApiClient(cfg)


def list_path(gvk: GVK, crds: SchemaIndex | None) -> str | None:
    """The collection of ``gvk`` across all namespaces (or cluster-wide), or None when neither
    a CRD of the index nor the built-in kinds serve it."""
    entry = crds.get(gvk) if crds is not None else None
    if entry is not None:
        plural = entry.crd.split(".", 1)[0]  # the API server names a CRD <plural>.<group>
    elif (gvk.group, gvk.version, gvk.kind) in BUILTIN_KINDS:
        plural = default_plural(gvk)  # pods, deployments, jobs, cronjobs ...: regular plurals
    else:
        return None
    return (
        f"/apis/{gvk.group}/{gvk.version}/{plural}" if gvk.group else f"/api/{gvk.version}/{plural}"
    )


def _label(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    where = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
    return f"cluster:{where or '(unnamed)'}"


class LiveSampler:
    """Reads up to ``limit`` live objects of a kind (see the module docstring); callable as
    :class:`webhook.admission.state.LiveSamples`. Give it an API client of its own
    (:func:`no_retry_client`): the deadline holds only without retries."""

    def __init__(
        self, api: client.ApiClient, limit: int, *, max_bytes: int = LIVE_SAMPLES_BYTES
    ) -> None:
        self.api = api
        self.limit = max(0, min(limit, MAX_LIVE_SAMPLES))
        self.max_bytes = max_bytes

    def __call__(
        self, gvk: GVK, crds: SchemaIndex | None, timeout: float = LIVE_SAMPLES_TIMEOUT
    ) -> tuple[list[Sample], list[str]]:
        if self.limit <= 0 or timeout <= 0:
            return [], []
        path = list_path(gvk, crds)
        if path is None:
            return [], []  # not served, as far as we know: nothing to read (and nothing to say)
        start = time.monotonic()
        try:
            page = request(
                self.api,
                "GET",
                path,
                query=[("limit", self.limit)],
                timeout=timeout,
                max_bytes=self.max_bytes,
            )
        except Exception as e:
            return [], [self._why(gvk, path, e, time.monotonic() - start)]
        items = page.get("items") if isinstance(page, Mapping) else None
        samples: list[Sample] = []
        for item in (items if isinstance(items, list) else [])[: self.limit]:
            if not isinstance(item, dict):
                continue
            # Items of a built-in kind's list carry no apiVersion and kind; we asked for gvk.
            item["apiVersion"], item["kind"] = gvk.api_version, gvk.kind
            meta = item.get("metadata")
            if isinstance(meta, dict):
                meta.pop("managedFields", None)
            samples.append((_label(item), item))
        return samples, []

    def _why(self, gvk: GVK, path: str, e: Exception, elapsed: float) -> str:
        what = f"live objects of {gvk} not read"
        if isinstance(e, ApiException) and e.status == 403:
            resource = path.rsplit("/", 1)[1] + (f".{gvk.group}" if gvk.group else "")
            return (
                f"{what}: forbidden (grant list on {resource} to karta-webhook's ClusterRole, or "
                "serve with --live-samples 0); checked without them"
            )
        if isinstance(e, ApiException) and e.status == 404:
            return f"{what}: the API server does not serve {path}; checked without them"
        if isinstance(e, TimeoutError | urllib3.exceptions.TimeoutError):
            return f"{what}: no answer within {elapsed:.1f} s; checked without them"
        return f"{what} ({describe_error(e)}); checked without them"
