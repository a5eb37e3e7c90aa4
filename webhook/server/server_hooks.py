"""gunicorn's server hooks for :func:`webhook.server.run.run`: what the master does before a
fork, what each worker does as it starts and leaves, and what the master does as workers
exit and the server becomes ready.

* ``pre_fork`` (master): :func:`freeze_heap`;
* ``post_fork`` (each worker): start flushing metrics, warm the jq sandboxes, publish this
  worker's gauges, start the file reload thread and the readiness watch, then every
  ``worker_start`` callable;
* ``worker_exit`` (each worker): write the metrics it still holds;
* ``child_exit``, ``on_exit`` (master): forget a dead worker's gauges and readiness, and
  close the shared readiness at the end;
* ``when_ready`` (master): the ``serving`` log line;
* ``ssl_context``: the serving certificate's current context (:class:`~webhook.server.tls.CertReloader`).
"""

from __future__ import annotations

import gc
import logging
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.admission.state import State
from webhook.jq.engine import Engine
from webhook.server import metrics
from webhook.server.app import Webhooks
from webhook.server.readiness import Peers
from webhook.server.tls import CertReloader

log = logging.getLogger("karta_webhook")

#: Something to run in each worker after the fork, with the worker's state and jq engine.
WorkerStart = Callable[[State, Engine], Any]


def freeze_heap(server: Any = None, worker: Any = None) -> None:
    """gunicorn's ``pre_fork``: move what the master has loaded (code, definitions, catalog
    samples, schemas) to the collector's permanent generation before a worker is forked. The
    worker's full collections then walk only what requests allocate, not the whole loaded
    heap each time (with a 3 MB object, several times per request), and they do not write to
    the pages a worker shares with the master (the use ``gc.freeze`` documents)."""
    gc.freeze()


@dataclass(frozen=True)
class ServerHooks:
    """The hooks of a server of ``workers`` processes (``threads`` request threads each)
    serving ``hooks``'s app over ``state`` on ``binds`` (the webhook's listener, then the
    metrics one if any); :meth:`settings` gives them to gunicorn by name."""

    state: State
    hooks: Webhooks
    peers: Peers
    cert: CertReloader
    worker_start: Sequence[WorkerStart]
    binds: Sequence[str]
    workers: int
    threads: int

    def settings(self) -> dict[str, Callable[..., Any]]:
        return {
            "ssl_context": self.ssl_context,
            "pre_fork": freeze_heap,
            "post_fork": self.post_fork,
            "worker_exit": self.worker_exit,
            "child_exit": self.child_exit,
            "on_exit": self.on_exit,
            "when_ready": self.when_ready,
        }

    def ssl_context(self, conf: Any, default_factory: Any) -> ssl.SSLContext:
        return self.cert.context()

    def post_fork(self, server: Any, worker: Any) -> None:
        state, hooks = self.state, self.hooks
        metrics.start_flushing()
        try:
            hooks.engine.warm()
            hooks.validate_engine.warm()
        except Exception:
            log.exception("warming the jq sandbox failed")
        snap = state.snapshot
        metrics.set_definitions(len(snap.registry), len(snap.file_errors), len(snap.cluster_errors))
        metrics.set_reload_status(state.reload_status)  # this worker's own gauge file
        hooks.reloader.start()
        self.peers.watch(state)
        for start in self.worker_start:
            try:
                start(state, hooks.validate_engine)
            except Exception:  # logged; /readyz tells whether what it should do got done
                log.exception("worker start hook failed", extra={"fields": {"hook": repr(start)}})

    def worker_exit(self, server: Any, worker: Any) -> None:
        metrics.flush()  # in the worker, as it leaves: what it counted since the last flush

    def child_exit(self, server: Any, worker: Any) -> None:
        metrics.mark_process_dead(worker.pid)
        self.peers.forget(worker.pid)

    def on_exit(self, server: Any) -> None:
        self.peers.close()

    def when_ready(self, server: Any) -> None:
        log.info(
            "serving",
            extra={
                "fields": {
                    "bind": self.binds[0],
                    "metricsBind": self.binds[1] if len(self.binds) > 1 else None,
                    "clientCA": self.cert.client_ca,
                    "workers": self.workers,
                    "threads": self.threads,
                    "httpParser": getattr(server.cfg, "http_parser", None),
                    "definitions": len(self.state.snapshot.registry),
                    "cert": self.cert.certfile,
                }
            },
        )
