"""The cluster, through the official ``kubernetes`` client: raw JSON calls, configuration,
who we are, and the daemon-thread base the background jobs share.

Wire-format calls go through :class:`kubernetes.client.ApiClient` with raw JSON bodies: the
generated models drop fields they do not know and serialize a whole-second ``MicroTime``
without its fraction, which the API server rejects.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from webhook.base.errors import KartaError

log = logging.getLogger("karta_webhook.kube")
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def log_event(event: str, level: int = logging.INFO, **fields: Any) -> None:
    """One structured record per event (the server's JSON formatter writes the fields as keys),
    so cluster logs can be filtered by field."""
    log.log(level, event, extra={"fields": {"event": event, **fields}})


# --------------------------------------------------------------------------- raw API calls


class ResponseTooLarge(KartaError):
    """A response body over the ``max_bytes`` a caller allowed (the rest is not read)."""


def request(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    query: list[tuple[str, Any]] | None = None,
    timeout: float = 10.0,
    *,
    content_type: str = "application/json",
    max_bytes: int | None = None,
    accept: str = "application/json",
) -> Any:
    """One JSON request with the client's host, auth and TLS; raises :class:`ApiException`.

    ``content_type`` is the body's (``application/merge-patch+json`` for a merge patch);
    with ``max_bytes``, a longer response is cut off and :class:`ResponseTooLarge` raised;
    ``accept`` is the form asked for (a metadata-only list asks for ``PartialObjectMetadataList``).
    """
    headers = {"Accept": accept}
    if body is not None:
        headers["Content-Type"] = content_type
    params = api.param_serialize(
        method,
        path,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    resp: Any = api.call_api(*params, _request_timeout=timeout)
    data = _read(resp, max_bytes)
    if not 200 <= resp.status <= 299:
        raise ApiException.from_response(
            http_resp=resp, body=data.decode("utf-8", "replace"), data=None
        )
    return json.loads(data) if data else None


def _read(resp: Any, max_bytes: int | None) -> bytes:
    if max_bytes is None:
        resp.read()
        return bytes(resp.data or b"")
    raw = resp.response  # urllib3's response, not yet read (the client never preloads)
    chunks: list[bytes] = []
    size = 0
    while chunk := raw.read(64 * 1024):
        size += len(chunk)
        if size > max_bytes:
            raw.close()  # drop the connection rather than read the rest
            raise ResponseTooLarge(f"response larger than {max_bytes} bytes")
        chunks.append(chunk)
    resp.data = b"".join(chunks)
    return bytes(resp.data)


def api_client_from_config(kubeconfig: str | None = None) -> client.ApiClient | None:
    """An API client from ``kubeconfig`` (a file), else the in-cluster service account;
    None when neither is available (the server then runs on the catalog alone)."""
    cfg = client.Configuration()
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    except config.ConfigException as e:
        if kubeconfig:
            raise KartaError(f"{kubeconfig}: cannot use kubeconfig: {e}") from e
        log_event("kube.offline", reason=str(e))
        return None
    return client.ApiClient(cfg)


def pod_namespace() -> str:
    ns = os.environ.get("POD_NAMESPACE")
    if ns:
        return ns
    try:
        return Path(SA_NAMESPACE_FILE).read_text().strip() or "karta-system"
    except OSError:
        return "karta-system"


def identity() -> str:
    """Lease holder: the pod name (or host name) and the process id, since every gunicorn
    worker runs its own elector and only one of them may write."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"


def describe_error(e: BaseException) -> str:
    if isinstance(e, ApiException):
        return f"HTTP {e.status}: {e.reason}"
    return f"{type(e).__name__}: {e}"


def backoff(failures: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Full-jitter exponential back-off: uniform in [0, min(cap, base * 2**failures)]."""
    return random.uniform(0, min(cap, base * (2 ** min(failures, 16))))


class Daemon:
    """Runs :meth:`run_forever` in a daemon thread until :meth:`stop`: off the request path,
    one per worker process (threads do not survive gunicorn's fork)."""

    thread_name = "karta"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_forever(self) -> None:
        raise NotImplementedError

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.run_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)


class Ticker(Daemon):
    """A daemon that calls :meth:`step` every ``retry_seconds``, and at once when woken
    (:meth:`wake`); after a failed step it is dirty (the next step does its work again) and
    waits a jittered, growing back-off, never longer than ``retry_seconds``."""

    #: The log event of a failed step.
    error_event = "daemon.error"

    def __init__(self, retry_seconds: float) -> None:
        super().__init__()
        self.retry_seconds = retry_seconds
        self._dirty = True
        self._wake = threading.Event()

    def step(self) -> None:
        raise NotImplementedError

    def wake(self) -> None:
        self._wake.set()

    def run_forever(self) -> None:
        """Step until stopped. A failure is logged when it differs from the one before (once
        per change, not once per retry); the first success after failures logs that it ended."""
        failures = 0
        last_error: str | None = None
        while not self._stop.is_set():
            try:
                self.step()
                if last_error is not None:
                    log_event(self.error_event, resolved=last_error, failures=failures)
                failures = 0
                last_error = None
                delay = self.retry_seconds
            except Exception as e:
                failures += 1
                self._dirty = True
                delay = min(self.retry_seconds, backoff(failures, 0.5, self.retry_seconds * 4))
                error = describe_error(e)
                if error != last_error:
                    log_event(self.error_event, logging.WARNING, error=error, failures=failures)
                last_error = error
            self._wake.wait(delay)
            self._wake.clear()

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()  # before the wake-up, so the woken loop sees it and ends
        self._wake.set()
        super().stop(timeout)
