"""The workers' shared table of open connections (webhook.server.transport.shares.Shares), by which a worker
that holds more connections than another leaves the next one to it (Turns), but only to one
that is taking connections now: never to one busy, stopped or that missed its last turn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.server.transport.shares import (
    ACCEPT_YIELD,
    AWAKE_SLACK,
    FEW_CONNECTIONS,
    Shares,
    Taker,
    Turns,
)


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_slots_are_claimed_counted_and_taken_over_from_dead_workers() -> None:
    shares = Shares(slots=2)
    me = shares.claim(os.getpid())
    assert me >= 0 and shares.claim(os.getpid()) == me  # claiming again: the same slot
    assert shares.takers(me, 10, 10.0) == []  # no other worker
    other, later = _sleeper(), _sleeper()
    try:
        theirs = shares.claim(other.pid)
        assert theirs not in (-1, me)
        assert shares.claim(later.pid) == -1  # the table is full
        shares.set(theirs, 2)
        shares.set(me, 5)
        shares.polling(theirs, True)
        shares.polling(me, True)
        assert [t.pid for t in shares.takers(me, 5, 10.0)] == [other.pid]  # holds fewer
        assert shares.takers(theirs, 2, 10.0) == []  # holds more
        other.kill()
        other.wait()
        assert shares.takers(me, 5, 10.0) == []  # a dead worker does not count
        assert shares.claim(later.pid) == theirs  # and its slot is taken over, counted afresh
        shares.accepted_one(theirs)
        assert shares.takers(me, 5, 10.0) == []  # not asleep on the listener (yet)
        shares.polling(theirs, True)
        assert shares.takers(me, 5, 10.0) == [Taker(theirs, later.pid, 1)]
    finally:
        for p in (other, later):
            p.kill()
            p.wait()


class _Workers:
    """This process as one worker of a table, and sleeping processes standing in for others."""

    def __init__(self, others: int) -> None:
        self.shares = Shares(slots=4)
        self.turns = Turns(self.shares)
        self.turns.claim(os.getpid())
        self.procs = [_sleeper() for _ in range(others)]
        self.slots = [self.shares.claim(p.pid) for p in self.procs]

    def close(self) -> None:
        for p in self.procs:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()


@pytest.fixture
def two() -> Iterator[_Workers]:
    w = _Workers(1)
    try:
        yield w
    finally:
        w.close()


def test_a_worker_holding_more_leaves_a_connection_to_one_asleep_on_the_listener(
    two: _Workers,
) -> None:
    shares, turns, other = two.shares, two.turns, two.slots[0]
    shares.set(other, 1)
    shares.polling(other, True)
    assert not turns.should_yield(1, 0.0, 0.0)  # not more than the other
    assert turns.should_yield(3, 10.0, 10.0)  # more: left to it
    assert not turns.should_yield(FEW_CONNECTIONS, 10.0, 10.0)  # under a flood nobody yields
    assert not Turns(None).should_yield(5, 0.0, 0.0)  # one worker: nothing to share


def test_a_worker_busy_in_its_loop_is_not_waited_for(two: _Workers) -> None:
    shares, turns, other = two.shares, two.turns, two.slots[0]
    shares.set(other, 0)
    shares.woke(other, 5.0)  # awake since 5.0, not back on its poller
    assert not turns.should_yield(3, 10.0, 10.0)
    shares.woke(other, 10.0 - AWAKE_SLACK / 2)  # woken with this one, for the same connection
    assert turns.should_yield(3, 10.0, 10.0)


def test_a_stopped_worker_is_not_waited_for(two: _Workers) -> None:
    shares, turns, other = two.shares, two.turns, two.slots[0]
    shares.set(other, 0)
    shares.polling(other, True)  # frozen asleep on the listener: the table cannot tell
    os.kill(two.procs[0].pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while _state(two.procs[0].pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not turns.should_yield(3, 10.0, 10.0)
    os.kill(two.procs[0].pid, signal.SIGCONT)
    while _state(two.procs[0].pid) == "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert turns.should_yield(3, 20.0, 20.0)


def test_a_worker_that_misses_its_turn_is_left_none_until_it_accepts(two: _Workers) -> None:
    shares, turns, other = two.shares, two.turns, two.slots[0]
    shares.set(other, 0)
    shares.polling(other, True)
    assert turns.should_yield(3, 10.0, 10.0)
    assert turns.should_yield(3, 10.0 + ACCEPT_YIELD / 2, 10.0)  # within the pause
    # the pause is over and the connection is still there: taken, and no more left to it
    assert not turns.should_yield(3, 10.0 + ACCEPT_YIELD, 10.0)
    assert turns.missed() == [two.procs[0].pid] and turns.missed() == []
    assert not turns.should_yield(3, 11.0, 11.0)
    assert not turns.should_yield(3, 12.0, 12.0)
    assert turns.missed() == []  # missed once, reported once
    shares.accepted_one(other)  # it takes connections again: it gets its turns again
    assert turns.should_yield(3, 13.0, 13.0)


def test_a_worker_that_takes_its_turn_keeps_getting_turns(two: _Workers) -> None:
    shares, turns, other = two.shares, two.turns, two.slots[0]
    shares.set(other, 0)
    shares.polling(other, True)
    for now in (10.0, 11.0, 12.0):
        assert turns.should_yield(3, now, now)
        shares.accepted_one(other)  # it took that one
    assert turns.missed() == []


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3].decode()
