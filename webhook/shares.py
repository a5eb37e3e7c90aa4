"""Which worker takes the next connection: the workers' open-connection counts, shared.

gunicorn's workers all accept on one listening socket, and whichever wakes first takes the
connection. With few connections that is often the same worker: an API server's pool of
connections opened together lands on one worker while the other idles (and that worker's
threads contend for one interpreter lock). So each worker publishes how many connections it
holds in a table made before the workers fork, and while it holds few, a worker that holds
more than another leaves the next connection to it (it stops accepting for
:data:`ACCEPT_YIELD`, at most :data:`YIELD_MAX` in a row, in case the other does not take it).
"""

from __future__ import annotations

import os

#: Below this many open connections a worker takes one connection per readiness event of a
#: listener and leaves turns to workers holding fewer; at or past it, it takes a burst.
FEW_CONNECTIONS = 64
ACCEPT_BURST = 32
ACCEPT_YIELD, YIELD_MAX = 0.002, 0.05


class Shares:
    """Open connections per worker, in memory shared by the workers (made before they fork):
    one ``(pid, count)`` slot each, claimed at start; a dead worker's slot is taken over."""

    def __init__(self, slots: int = 64) -> None:
        import multiprocessing

        self._table = multiprocessing.RawArray("q", 2 * slots)
        self.slots = slots

    def claim(self, pid: int) -> int:
        t = self._table
        for i in range(self.slots):
            owner = t[2 * i]
            if owner == 0 or owner == pid or not _alive(owner):
                t[2 * i], t[2 * i + 1] = pid, 0
                return i
        return -1

    def set(self, slot: int, count: int) -> None:
        if slot >= 0:
            self._table[2 * slot + 1] = count

    def fewest_elsewhere(self, slot: int) -> int | None:
        """The fewest open connections of another live worker, None if there is none."""
        t = self._table
        counts = [
            t[2 * i + 1] for i in range(self.slots) if i != slot and t[2 * i] and _alive(t[2 * i])
        ]
        return min(counts) if counts else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Turns:
    """One worker's side of the table: its slot, its count, and whether to yield a turn."""

    def __init__(self, shares: Shares | None) -> None:
        self.shares = shares
        self.slot = -1
        self._yielding_since: float | None = None

    def claim(self, pid: int) -> None:
        if self.shares is not None:
            self.slot = self.shares.claim(pid)

    def count(self, held: int) -> None:
        if self.shares is not None:
            self.shares.set(self.slot, held)

    def should_yield(self, held: int, now: float) -> bool:
        """Whether a worker holding ``held`` connections leaves the next one to another."""
        shares = self.shares
        if shares is None or held >= FEW_CONNECTIONS:
            return False
        fewest = shares.fewest_elsewhere(self.slot)
        if fewest is None or held <= fewest:
            self._yielding_since = None
            return False
        if self._yielding_since is None:
            self._yielding_since = now
        elif now - self._yielding_since > YIELD_MAX:  # the other one does not take it
            self._yielding_since = None
            return False
        return True
