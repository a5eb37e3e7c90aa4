"""Re-reading the state's files in a served process: :class:`FileReloader`, from a thread per
worker or lazily at the start of a request.

What a reload does (which files changed, which have settled, what stays in force when one
fails) is :meth:`webhook.admission.state.State.reload_files`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from webhook.admission.state import State

log = logging.getLogger("karta_webhook")

#: Reload checks of policy and catalog files per process, at most one per this many seconds.
RELOAD_INTERVAL = 1.0


class FileReloader:
    """Calls ``state.reload_files()`` at most once per ``interval`` seconds in this process.

    Either from a daemon thread (:meth:`start`, one per worker: threads do not survive a fork)
    or, when no thread runs (the Flask test client, a plain WSGI server), lazily at the start of
    a request (:meth:`maybe_reload`). A file that fails to load is logged once per change and
    its last good version stays in force.
    """

    def __init__(
        self,
        state: State,
        interval: float = RELOAD_INTERVAL,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = state
        self.interval = interval
        self.clock = clock
        self._last = clock()
        self._lock = threading.Lock()
        self._thread_pid: int | None = None
        #: called with ``state.reload_status`` after each look at the files (the server
        #: publishes it as metrics)
        self.on_result: list[Callable[[dict[str, tuple[bool, float]]], None]] = []
        #: sources beside the state's files, by name (``certificates``): each call looks at
        #: its files, loading them if they changed, and says whether its last load succeeded
        #: and when; recorded in ``state.reload_status`` at every look
        self.sources: dict[str, Callable[[], tuple[bool, float]]] = {}

    @property
    def threaded(self) -> bool:
        return self._thread_pid == os.getpid()

    def maybe_reload(self) -> None:
        if self.threaded or self.clock() - self._last < self.interval:
            return
        if not self._lock.acquire(blocking=False):
            return  # another thread is checking right now; this request uses the snapshot it has
        try:
            if self.clock() - self._last >= self.interval:
                self._reload()
        finally:
            self._lock.release()

    def _reload(self) -> None:
        self._last = self.clock()
        before = self.state.snapshot
        try:
            errors = self.state.reload_files()
        except Exception:  # never let a reload problem reach a request or kill the thread
            log.exception("reloading definitions and policy failed")
            return
        for e in errors:
            log.error(
                "reload failed; the last good version stays in force",
                extra={"fields": {"error": str(e)}},
            )
        for name, poll in list(self.sources.items()):
            try:
                self.state.reload_status[name] = poll()
            except Exception:  # the source keeps its last good version and says nothing new
                log.exception("reloading a source failed", extra={"fields": {"source": name}})
                self.state.reload_status[name] = (False, time.time())
        for fn in self.on_result:
            try:
                fn(dict(self.state.reload_status))
            except Exception:  # metrics never cost a reload
                log.exception("publishing the reload status failed")
        after = self.state.snapshot
        if after is not before:
            log.info(
                "reloaded definitions and policy",
                extra={"fields": {"definitions": len(after.registry)}},
            )

    def start(self) -> None:
        """Start the polling thread in this process (idempotent per process)."""
        if self.threaded:
            return
        self._thread_pid = os.getpid()
        threading.Thread(target=self._loop, name="karta-reload", daemon=True).start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.interval)
            with self._lock:
                self._reload()
