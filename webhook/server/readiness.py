"""Readiness across a server's worker processes: the kubelet's probe reaches one worker, but
the API server's calls reach any, so ``/readyz`` says ready only once every worker has read
every source of policy and definitions (its own :attr:`~webhook.admission.state.State.ready`).

:class:`Peers` is a folder the master makes before it forks: each worker, once its state is
ready, writes a file named after its pid there (:meth:`Peers.watch`, a thread per worker);
the master removes a worker's file when the worker exits (:meth:`Peers.forget`), so a worker
that replaces it counts only once it is ready in turn. ``/readyz`` asks :meth:`Peers.ready`:
as many files as workers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

from webhook.admission.state import State

#: how often a worker that is not ready looks at its state again
POLL_SECONDS = 0.05


class Peers:
    """The workers that are ready, as files in a folder of their own (see the module
    docstring); ``workers``: how many the server runs."""

    def __init__(self, workers: int, parent: str | None = None) -> None:
        self.workers = max(1, workers)
        self.folder = Path(tempfile.mkdtemp(prefix="karta-ready-", dir=parent))

    def ready(self) -> bool:
        try:
            return len(os.listdir(self.folder)) >= self.workers
        except OSError:
            return False

    def watch(self, state: State) -> None:
        """In a worker: a thread that marks this worker ready once ``state`` is."""
        pid = os.getpid()

        def mark() -> None:
            stop = threading.Event()
            while not state.ready:
                stop.wait(POLL_SECONDS)
            with contextlib.suppress(OSError):
                (self.folder / str(pid)).touch()

        threading.Thread(target=mark, name="karta-ready", daemon=True).start()

    def forget(self, pid: int) -> None:
        """In the master: worker ``pid`` has exited."""
        with contextlib.suppress(OSError):
            (self.folder / str(pid)).unlink()

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
