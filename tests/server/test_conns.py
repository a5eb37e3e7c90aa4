"""The poller's bookkeeping (webhook.server.transport.conns), without sockets: what is due when, whom to evict,
and the buffer budget (the accept turns are tests/server/test_worker_shares.py's)."""

from __future__ import annotations

import pytest

from webhook.server.transport.conns import MAX_RECORD, RECHECK_FIRST, Conn, Phase, Table, hello_need


def _conn(table: Table, *, tls: bool = True) -> Conn:
    c = Conn(sock=None, client=("127.0.0.1", 1), server=("0.0.0.0", 8443), tls=tls)
    table.open[c] = None
    return c


def test_deadlines_are_due_in_order_and_stale_ones_are_skipped() -> None:
    t = Table()
    a, b, busy = _conn(t), _conn(t), _conn(t)
    t.set_deadline(a, 10.0)
    t.set_deadline(b, 5.0)
    t.set_deadline(a, 20.0)  # moved: its 10.0 entry is stale
    t.set_deadline(busy, 1.0)
    busy.phase = Phase.BUSY  # served connections do not expire
    assert t.next_due() == 1.0
    assert list(t.expired(15.0)) == [b]
    assert list(t.expired(25.0)) == [a]
    assert t.next_due() is None


def test_rechecks_back_off_and_only_waiting_connections_come_back() -> None:
    t = Table()
    a, gone = _conn(t), _conn(t)
    t.waiting[a] = None
    t.recheck_later(a, 0.0)
    t.recheck_later(gone, 0.0)  # not waiting (any more): dropped
    assert a.recheck == RECHECK_FIRST
    assert list(t.due_rechecks(1.0)) == [a]
    t.recheck_later(a, 1.0)
    assert a.recheck == 2 * RECHECK_FIRST


def test_victims_waiting_first_then_unanswered_then_least_recently_idle() -> None:
    t = Table()
    waiting, served_busy, fresh, idle_old, idle_new = (_conn(t) for _ in range(5))
    t.waiting[waiting] = None
    for c in (served_busy, fresh, idle_old, idle_new):
        t.full[c] = None
    served_busy.phase, served_busy.served = Phase.BUSY, 0
    fresh.phase = Phase.REQUEST
    for c in (idle_old, idle_new):
        c.served, c.phase = 1, Phase.IDLE
        t.idle[c] = None
    assert t.victim(waiting=True) is waiting
    assert t.victim(waiting=False) is fresh  # a busy one is never chosen
    t.forget(fresh)
    assert t.victim(waiting=False) is idle_old
    t.forget(idle_old)
    t.forget(idle_new)
    assert t.victim(waiting=False) is None
    assert fresh.closed and fresh not in t.open and fresh not in t.full


def test_buffered_bytes_are_counted_and_paused_connections_resume_within_budget() -> None:
    t = Table()
    a, b = _conn(t), _conn(t)
    for c, size in ((a, 100), (b, 50)):
        c.phase, c.buf = Phase.REQUEST, bytearray(size)
        t.account(c)
        c.paused = True
        t.paused.append(c)
    assert t.buffered == 150
    assert list(t.resumable(120)) == []  # over budget: nobody resumes
    a.phase = Phase.BUSY  # its request went to a thread: no longer buffered here
    t.account(a)
    assert t.buffered == 50
    # a is first in line but no longer reading a request; b resumes
    assert list(t.resumable(120)) == [b] and not a.paused and not b.paused


@pytest.mark.parametrize(
    ("head", "need"),
    [
        (b"GET / HTTP/1.1\r\n", None),  # not TLS: the TLS library answers it
        (b"\x16\x03", 5),  # the record header is not all in
        (b"\x16\x03\x01\x02\x00", 5 + 0x200),
        (b"\x16\x03\x01\xff\xff", None),  # longer than a record may be
    ],
)
def test_how_much_of_a_client_hello_to_wait_for(head: bytes, need: int | None) -> None:
    assert hello_need(head) == need
    assert need is None or need <= MAX_RECORD
