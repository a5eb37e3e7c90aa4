"""Prometheus metrics of the admission webhooks.

Two ways of running, one set of metrics:

* under gunicorn every worker is its own process, so ``prometheus_client`` runs in
  multiprocess mode: each process writes its samples to files in ``PROMETHEUS_MULTIPROC_DIR``
  and ``/metrics`` sums them up. The variable must be set before ``prometheus_client`` is first
  imported (it picks its value class at import time), which is why ``karta-webhook serve`` sets it
  before importing this module, and why a dead worker's files are marked (:func:`mark_process_dead`
  from gunicorn's ``child_exit`` hook) so its gauges stop counting;
* in one process (tests with Flask's client, no variable set) the default registry is used.

Metrics never cost an admission: a write that fails (the directory read-only, deleted or full)
is counted in this process's memory (:data:`FAILURES`, exported as
``karta_webhook_metrics_failures_total`` by the process that answers the scrape), logged once
per process and kind of write, and otherwise ignored: the request is answered, a worker whose
metrics file cannot be made serves all the same, and the master replaces dead workers whatever
the state of the directory.

Label values are bounded: ``kind`` is a Kind the registry knows (or ``Karta``), anything else is
``other``, so a client sending made-up kinds cannot grow the number of series without limit.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import CounterMetricFamily

from webhook.server.metrics_series import (
    CONNECTIONS_CUT,
    DEFINITIONS,
    DEFINITIONS_REJECTED,
    DURATION,
    GANG_API,
    MUTATION_FAILURES,
    PATCH_OPS,
    RELOAD_SUCCESS,
    RELOAD_TIME,
    REQUEST_CPU,
    REQUESTS,
    SERVER_CPU,
)

__all__ = [
    "CONNECTIONS_CUT",
    "CONTENT_TYPE_LATEST",
    "DEFINITIONS",
    "DEFINITIONS_REJECTED",
    "DURATION",
    "FAILURES",
    "GANG_API",
    "MUTATION_FAILURES",
    "PATCH_OPS",
    "RELOAD_SUCCESS",
    "RELOAD_TIME",
    "REQUESTS",
    "REQUEST_CPU",
    "SERVER_CPU",
    "child",
    "count_admission",
    "count_cut",
    "flush",
    "mark_process_dead",
    "multiprocess_dir",
    "render",
    "set_definitions",
    "set_reload_status",
    "start_flushing",
]

ENV = "PROMETHEUS_MULTIPROC_DIR"
log = logging.getLogger("karta_webhook.metrics")

#: Metric writes that failed in this process, by what was being written: ``admissions`` (a
#: batch of counted requests, then lost), ``server_cpu`` (the CPU seconds of one flush, then
#: lost), ``connections``, ``definitions``, ``reload_status``, ``mark_dead`` (a dead worker's
#: live gauges), ``render`` (a scrape answered without them).
FAILURES: dict[str, int] = {}
_failures_lock = threading.Lock()
#: Failures counted elsewhere, exported with these (``serve`` adds ``logs``: lines not written).
FAILURE_SOURCES: dict[str, Callable[[], int]] = {}


def _failed(what: str, e: BaseException) -> None:
    """Count a failed metrics write; log the first of each kind in this process (one line, no
    traceback: the cause is the directory, not the code)."""
    with _failures_lock:
        n = FAILURES[what] = FAILURES.get(what, 0) + 1
    if n == 1:
        log.error(
            "writing metrics failed; the request goes on, the failures are counted in "
            "karta_webhook_metrics_failures_total and logged only once per process",
            extra={
                "fields": {
                    "write": what,
                    "error": f"{type(e).__name__}: {e}",
                    "dir": multiprocess_dir(),
                    "pid": os.getpid(),
                }
            },
        )


class _FailuresCollector:
    """Exports :data:`FAILURES` of the process that renders (an in-memory count: the files are
    what may be failing)."""

    def collect(self) -> Any:
        family = CounterMetricFamily(
            "karta_webhook_metrics_failures",
            "Metric writes that failed in the process answering this scrape (its metrics "
            "directory read-only, deleted or full), by what was written; those samples are lost.",
            labels=["write"],
        )
        with _failures_lock:
            counts = dict(FAILURES)
        for what, source in FAILURE_SOURCES.items():
            counts[what] = counts.get(what, 0) + source()
        counts = dict(sorted(counts.items()))
        for what, n in counts.items():
            family.add_metric([what], n)
        yield family


_children: dict[tuple[object, tuple[str, ...]], Any] = {}


def child(metric: Counter | Histogram, *labels: str) -> Any:
    """``metric.labels(*labels)``, looked up once per label set: the admission path counts on
    every request, and prometheus_client's lookup (validation, a lock, a dict) costs more than
    the count. Label values are bounded (see the module text), so is this memo."""
    key = (metric, labels)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*labels)
    return found


#: Seconds between the writes of queued admissions (see :func:`count_admission`) in a worker.
FLUSH_EVERY = 0.5
#: Queued admissions past which the request path writes them itself: the queue is bounded
#: even when nothing else flushes it (the CLI, tests, a stalled flusher).
FLUSH_AT = 4096

#: (webhook, kind, operation, outcome, seconds, patch ops, failure reason or None, CPU seconds)
Admission = tuple[str, str, str, str, float, int, str | None, float]
_queued: deque[Admission] = deque()
#: This process's CPU seconds already added to :data:`SERVER_CPU` (a forked worker starts at
#: 0, as its CPU times do).
_cpu_counted = 0.0
_cpu_lock = threading.Lock()
#: Set when an admission is queued and the flushers may be asleep: a flusher with nothing to
#: write waits on it rather than on a timer, so an idle worker is not woken twice a second.
_pending = threading.Event()


def count_admission(
    webhook: str,
    kind: str,
    operation: str,
    outcome: str,
    seconds: float,
    ops: int = 0,
    failure: str | None = None,
    cpu: float = 0.0,
) -> None:
    """Count one answered admission request in :data:`REQUESTS`, :data:`DURATION`,
    :data:`PATCH_OPS`, :data:`MUTATION_FAILURES` and :data:`REQUEST_CPU` (``cpu``: the CPU
    seconds of its thread).

    The request only queues it: updating four metrics in multiprocess mode takes a lock and a
    write to a shared file each, the largest cost on the path of a request after its own work.
    :func:`flush` writes what is queued, in one go; it runs in each worker every
    :data:`FLUSH_EVERY` seconds (:func:`start_flushing`), when the worker exits, before this
    process renders ``/metrics``, and here when more than :data:`FLUSH_AT` are queued. So a
    scrape can miss at most the last :data:`FLUSH_EVERY` seconds of another worker's requests,
    which the next scrape has."""
    _queued.append((webhook, kind, operation, outcome, seconds, ops, failure, cpu))
    if not _pending.is_set():  # once per flush: no thread waits on it while one is due
        _pending.set()
    if len(_queued) > FLUSH_AT:
        flush()


def flush() -> None:
    """Write the queued admissions to the metrics, and this process's CPU seconds since the
    last flush to :data:`SERVER_CPU` (safe from any thread: each is taken off the queue once).
    Never raises: a batch that cannot be written is counted in :data:`FAILURES` and dropped,
    so the queue stays bounded."""
    take = _queued.popleft
    counts: dict[tuple[str, ...], int] = {}
    durations: list[tuple[str, float]] = []
    ops_by_kind: dict[str, int] = {}
    failures: dict[tuple[str, str], int] = {}
    cpu_by_webhook: dict[str, float] = {}
    while True:
        try:
            webhook, kind, operation, outcome, seconds, ops, failure, cpu = take()
        except IndexError:
            break
        key = (webhook, kind, operation, outcome)
        counts[key] = counts.get(key, 0) + 1
        durations.append((webhook, seconds))
        cpu_by_webhook[webhook] = cpu_by_webhook.get(webhook, 0.0) + cpu
        if ops:
            ops_by_kind[kind] = ops_by_kind.get(kind, 0) + ops
        if failure:
            failures[(kind, failure)] = failures.get((kind, failure), 0) + 1
    global _cpu_counted
    with _cpu_lock:
        now = time.process_time()
        server_cpu, _cpu_counted = now - _cpu_counted, now
    try:
        SERVER_CPU.inc(max(0.0, server_cpu))
    except Exception as e:  # the metrics directory: never the request's problem
        _failed("server_cpu", e)
    if not counts:
        return
    try:
        for webhook, seconds in durations:
            child(DURATION, webhook).observe(seconds)
        for labels, n in counts.items():
            child(REQUESTS, *labels).inc(n)
        for webhook, cpu in cpu_by_webhook.items():
            child(REQUEST_CPU, webhook).inc(cpu)
        for kind, n in ops_by_kind.items():
            child(PATCH_OPS, kind).inc(n)
        for labels, n in failures.items():
            child(MUTATION_FAILURES, *labels).inc(n)
    except Exception as e:  # the metrics directory: never the request's problem
        _failed("admissions", e)


def count_cut(reason: str) -> None:
    """Count a connection the server cut (:data:`CONNECTIONS_CUT`); never raises."""
    try:
        child(CONNECTIONS_CUT, reason).inc()
    except Exception as e:
        _failed("connections", e)


class _Stop(threading.Event):
    """A flusher's stop: setting it also wakes a flusher waiting for admissions."""

    def set(self) -> None:
        super().set()
        _pending.set()


def start_flushing(every: float = FLUSH_EVERY) -> threading.Event:
    """Flush from a daemon thread every ``every`` seconds while admissions come in, until the
    returned event is set (then once more). With none queued since its last flush the thread
    waits for the next one (its CPU seconds, counted in :data:`SERVER_CPU` at each flush, wait
    with it). One per worker process, after the fork (threads do not survive one)."""
    stop = _Stop()

    def once() -> None:
        try:
            flush()
        except Exception:  # flush never raises; should it, the thread must go on
            log.exception("writing the metrics failed")

    def loop() -> None:
        while _pending.wait() and not stop.wait(every):
            _pending.clear()  # admissions queued from now on set it again
            once()
        once()  # the last one too: a thread must not end on an exception nobody sees

    threading.Thread(target=loop, name="karta-metrics-flush", daemon=True).start()
    return stop


def multiprocess_dir() -> str | None:
    return os.environ.get(ENV) or None


def render() -> tuple[bytes, str]:
    """The text exposition of every metric, summed over worker processes when there are any
    (with what this process has queued written first)."""
    flush()
    if multiprocess_dir():
        registry = CollectorRegistry()
        registry.register(_FailuresCollector())
        try:
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry), CONTENT_TYPE_LATEST
        except Exception as e:  # unreadable files: the failures are still worth a scrape
            _failed("render", e)
            only = CollectorRegistry()
            only.register(_FailuresCollector())
            return generate_latest(only), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def mark_process_dead(pid: int) -> None:
    """Forget the live gauges of a worker that exited (gunicorn ``child_exit``, in the master:
    an exception there would stop it replacing workers, so none leaves here)."""
    if multiprocess_dir():
        try:
            multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
        except Exception as e:
            _failed("mark_dead", e)


def set_definitions(loaded: int, rejected_files: int, rejected_cluster: int) -> None:
    """Publish how many definitions are in use and how many are rejected, by origin."""
    try:
        DEFINITIONS.set(loaded)
        DEFINITIONS_REJECTED.labels("file").set(rejected_files)
        DEFINITIONS_REJECTED.labels("cluster").set(rejected_cluster)
    except Exception as e:
        _failed("definitions", e)


def set_gang_api(served: bool) -> None:
    """Publish whether the cluster serves the native gang's PodGroups (the leader's look)."""
    try:
        GANG_API.set(1 if served else 0)
    except Exception as e:
        _failed("gang_api", e)


def set_reload_status(status: dict[str, tuple[bool, float]]) -> None:
    """Publish :attr:`webhook.admission.state.State.reload_status` as the two gauges."""
    try:
        for source, (ok, when) in status.items():
            RELOAD_SUCCESS.labels(source).set(1 if ok else 0)
            RELOAD_TIME.labels(source).set(when)
    except Exception as e:
        _failed("reload_status", e)
