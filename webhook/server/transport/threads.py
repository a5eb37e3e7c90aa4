"""The worker's request threads (:class:`RequestThreads`)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from webhook.server.transport.conns import Conn

__all__ = ["Job", "RequestThreads"]

#: One complete request for a request thread: the connection, the head (or the whole request,
#: chunked), the body of known length or None, the target when the direct path answers it.
Job = tuple[Conn, bytes, bytes | None, bytes | None]


class RequestThreads:
    """The worker's request threads: each takes the next job off one queue, serves it and
    hands the connection back with whether to keep it. What ``concurrent.futures`` would
    add per request (a future, its condition and callbacks, the executor's bookkeeping) is
    not needed here: the result is one bool, and the poller is told through gunicorn's
    method queue as before. All ``threads`` start with the worker."""

    def __init__(
        self,
        threads: int,
        serve: Callable[[Conn, bytes, bytes | None, bytes | None], bool],
        done: Callable[[Conn, bool], None],
        log: Any,
    ) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._serve, self._done, self._log = serve, done, log
        self._threads = [
            threading.Thread(target=self._run, name=f"request-{i}", daemon=True)
            for i in range(max(1, threads))
        ]
        for t in self._threads:
            t.start()

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def _run(self) -> None:
        take = self._jobs.get
        while True:
            job = take()
            if job is None:
                return
            conn = job[0]
            try:
                keep = self._serve(*job)
            except BaseException:  # _serve handles its own; anything else closes the connection
                self._log.exception("request thread failed")
                keep = False
            self._done(conn, keep)

    def shutdown(self, wait: bool = False) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for t in self._threads:
                t.join()
