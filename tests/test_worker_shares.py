"""The workers' shared table of open connections (webhook.shares.Shares), by which a worker
that holds more connections than another leaves the next one to it."""

from __future__ import annotations

import os
import subprocess
import sys

from webhook.shares import Shares


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_slots_are_claimed_counted_and_taken_over_from_dead_workers() -> None:
    shares = Shares(slots=2)
    me = shares.claim(os.getpid())
    assert me >= 0 and shares.claim(os.getpid()) == me  # claiming again: the same slot
    assert shares.fewest_elsewhere(me) is None  # no other worker
    other, later = _sleeper(), _sleeper()
    try:
        theirs = shares.claim(other.pid)
        assert theirs not in (-1, me)
        assert shares.claim(later.pid) == -1  # the table is full
        shares.set(theirs, 2)
        shares.set(me, 5)
        assert shares.fewest_elsewhere(me) == 2 and shares.fewest_elsewhere(theirs) == 5
        other.kill()
        other.wait()
        assert shares.fewest_elsewhere(me) is None  # a dead worker does not count
        assert shares.claim(later.pid) == theirs  # and its slot is taken over, counted afresh
        assert shares.fewest_elsewhere(me) == 0
    finally:
        for p in (other, later):
            p.kill()
            p.wait()
