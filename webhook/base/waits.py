"""Work that may not wait: a request served on a worker's poller thread.

The worker's poller answers small ``/mutate`` requests itself (no hand-off to a request thread,
:mod:`webhook.server.transport.worker`): while it runs one, every other connection of the worker
waits, so such a request must never wait on anything outside the process. Code that is about
to wait (the jq sandbox's round trip, bounded only by its deadline) calls :func:`may_wait`
first; on the poller that raises :class:`WouldWait` before anything was done, and the worker
hands the whole request to a request thread, which runs it again from the start.

:class:`WouldWait` is a :class:`BaseException`, like :class:`GeneratorExit`, so that the
handlers' ``except Exception`` (an error becomes an admission answer) lets it through to the
worker instead of answering for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["WouldWait", "attempt", "may_wait"]

T = TypeVar("T")


class WouldWait(BaseException):
    """Raised by :func:`may_wait` within :func:`attempt`: the work would wait (on what the
    message names)."""


_here = threading.local()


def may_wait(what: str) -> None:
    """Say that the caller is about to wait on ``what`` (raises within :func:`attempt`)."""
    if getattr(_here, "forbidden", False):
        raise WouldWait(what)


def attempt(work: Callable[[], T]) -> T | None:
    """``work()`` where it may not wait: its result, or None when it would have waited (it
    stopped at its :func:`may_wait`, before waiting)."""
    before = getattr(_here, "forbidden", False)
    _here.forbidden = True
    try:
        return work()
    except WouldWait:
        return None
    finally:
        _here.forbidden = before
