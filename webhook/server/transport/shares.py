"""Which worker takes the next connection: the workers' open-connection counts, shared.

gunicorn's workers all accept on one listening socket, and whichever wakes first takes the
connection. With few connections that is often the same worker: an API server's pool of
connections opened together lands on one worker while the other idles (and that worker's
threads contend for one interpreter lock). So each worker publishes how many connections it
holds in a table made before the workers fork, and while it holds few, a worker that holds
more than another leaves the next connection to it (it stops accepting for
:data:`ACCEPT_YIELD`).

Leaving a connection to another worker must never make it wait for one that cannot take it
(issue 26: with one worker frozen, each new connection to the other waited; see
docs/performance.md). So a
worker leaves a connection only to one that is taking connections right now: one asleep on
the listener (the kernel wakes it for this very connection) or woken at about the same time,
and not stopped (``SIGSTOP``: Linux says so in ``/proc``); a worker busy in its loop, frozen
or dead is not waited for. If the one it left a connection to has not taken it when the pause
ends, that worker missed its turn: it is left no more connections until it accepts one again
(so a worker stuck in a way nothing else shows costs one pause, not one per connection).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Below this many open connections a worker takes one connection per readiness event of a
#: listener and leaves turns to workers holding fewer; at or past it, it takes a burst.
FEW_CONNECTIONS = 64
ACCEPT_BURST = 32
#: How long a worker stops accepting when it leaves a connection to another (seconds).
ACCEPT_YIELD = 0.002
#: Another worker woken this long before this one counts as woken for the same connection.
AWAKE_SLACK = ACCEPT_YIELD
#: A connection left to others this long ago is not the one a readiness event is about.
LEFT_STALE = 0.05

# The fields of a slot in the table of integers.
_PID, _COUNT, _POLLING, _ACCEPTED = range(4)
_FIELDS = 4


@dataclass(frozen=True)
class Taker:
    """Another worker a connection may be left to, as the table shows it now."""

    slot: int
    pid: int
    accepted: int  #: connections it has accepted so far


class Shares:
    """The workers' table, in memory shared by them (made before they fork): per worker one
    slot, claimed at start (a dead worker's slot is taken over), holding its pid, how many
    connections it holds, whether it is asleep waiting for connections, how many it has
    accepted, and when it last woke (``time.monotonic``, one clock for every process)."""

    def __init__(self, slots: int = 64) -> None:
        import multiprocessing

        self._table = multiprocessing.RawArray("q", _FIELDS * slots)
        self._woke = multiprocessing.RawArray("d", slots)
        self.slots = slots

    def claim(self, pid: int) -> int:
        t = self._table
        for i in range(self.slots):
            owner = t[_FIELDS * i + _PID]
            if owner == 0 or owner == pid or not _alive(owner):
                base = _FIELDS * i
                t[base + _COUNT] = t[base + _POLLING] = t[base + _ACCEPTED] = 0
                self._woke[i] = 0.0
                t[base + _PID] = pid
                return i
        return -1

    def set(self, slot: int, count: int) -> None:
        if slot >= 0:
            self._table[_FIELDS * slot + _COUNT] = count

    def accepted_one(self, slot: int) -> None:
        if slot >= 0:
            self._table[_FIELDS * slot + _ACCEPTED] += 1

    def accepted(self, slot: int) -> int:
        return int(self._table[_FIELDS * slot + _ACCEPTED])

    def polling(self, slot: int, waiting: bool) -> None:
        """The worker in ``slot`` goes to sleep on its poller, ``waiting`` for connections
        (its listeners registered) or not."""
        if slot >= 0:
            self._table[_FIELDS * slot + _POLLING] = int(waiting)

    def woke(self, slot: int, now: float) -> None:
        """The worker in ``slot`` is back from its poller at ``now``."""
        if slot >= 0:
            self._table[_FIELDS * slot + _POLLING] = 0
            self._woke[slot] = now

    def takers(self, slot: int, held: int, woke: float) -> list[Taker]:
        """The other workers that hold fewer than ``held`` connections and would take one
        now: asleep waiting for connections, or woken at most :data:`AWAKE_SLACK` before
        ``woke`` (this worker's wake-up); not stopped, not dead."""
        t = self._table
        found = []
        for i in range(self.slots):
            base = _FIELDS * i
            pid = t[base + _PID]
            if i == slot or not pid or t[base + _COUNT] >= held:
                continue
            if not (t[base + _POLLING] or self._woke[i] >= woke - AWAKE_SLACK):
                continue
            if _alive(pid) and not _stopped(pid):
                found.append(Taker(i, pid, int(t[base + _ACCEPTED])))
        return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (``SIGSTOP``, a debugger), as Linux's ``/proc`` tells;
    False where there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state in (b"T", b"t")


class Turns:
    """One worker's side of the table: its slot, its count, and whether to leave the next
    connection to another worker."""

    def __init__(self, shares: Shares | None) -> None:
        self.shares = shares
        self.slot = -1
        #: When this worker last left a connection to others, and to whom.
        self._left: tuple[float, list[Taker]] | None = None
        #: Workers that missed their turn: slot -> (pid, their accepted count then).
        self._missed: dict[int, tuple[int, int]] = {}
        #: Workers that missed their turn since the caller last asked (:meth:`missed`).
        self._new_misses: list[int] = []

    def claim(self, pid: int) -> None:
        if self.shares is not None:
            self.slot = self.shares.claim(pid)

    def count(self, held: int) -> None:
        if self.shares is not None:
            self.shares.set(self.slot, held)

    def accepted(self) -> None:
        if self.shares is not None:
            self.shares.accepted_one(self.slot)

    def sleeping(self, waiting: bool) -> None:
        if self.shares is not None:
            self.shares.polling(self.slot, waiting)

    def woke(self, now: float) -> None:
        if self.shares is not None:
            self.shares.woke(self.slot, now)

    def missed(self) -> list[int]:
        """The pids of the workers that missed their turn since the last call."""
        out, self._new_misses = self._new_misses, []
        return out

    def should_yield(self, held: int, now: float, woke: float) -> bool:
        """Whether a worker holding ``held`` connections, woken at ``woke``, leaves the next
        one to another worker (then it pauses accepting for :data:`ACCEPT_YIELD`)."""
        shares = self.shares
        if shares is None or held >= FEW_CONNECTIONS:
            self._left = None
            return False
        if self._left is not None:
            since, left_to = self._left
            self._left = None
            if now - since < LEFT_STALE and all(
                shares.accepted(t.slot) == t.accepted for t in left_to
            ):
                if now - since < ACCEPT_YIELD:  # still within the pause: keep leaving it
                    self._left = (since, left_to)
                    return True
                # The pause is over and none of them took it: they missed their turn.
                for t in left_to:
                    self._missed[t.slot] = (t.pid, t.accepted)
                    self._new_misses.append(t.pid)
                return False
        takers = [
            t
            for t in shares.takers(self.slot, held, woke)
            if self._missed.get(t.slot) != (t.pid, t.accepted)  # it accepted since it missed
        ]
        if not takers:
            return False
        self._left = (now, takers)
        return True
