"""The poller's own answers (:meth:`webhook.server.transport.poller.Front.reply`) are written
without blocking: a client that does not read holds only its own connection, until its
deadline; and :mod:`webhook.base.waits`, which keeps waiting work off the poller."""

from __future__ import annotations

import logging
import selectors
import socket
import time
from collections.abc import Iterator

import pytest

from webhook.base.waits import WouldWait, attempt, may_wait
from webhook.server.transport.conns import Conn, Limits, Phase
from webhook.server.transport.poller import Front


@pytest.fixture
def front(request: pytest.FixtureRequest) -> Iterator[tuple[Front, list[Conn]]]:
    """A poller's front with ``request_timeout`` as the test's parameter asks; once an answer
    is written the connection waits for its next request, as the worker has it."""
    replied: list[Conn] = []
    with selectors.DefaultSelector() as poller:
        f = Front(
            poller=poller,
            log=logging.getLogger("test"),
            limits=Limits(request_timeout=request.param),
            worker_connections=10,
            keepalive=30.0,
            tls_context=lambda: pytest.fail("no TLS here"),
            on_request=lambda conn: None,
            on_count=lambda n: None,
            on_replied=lambda conn: (replied.append(conn), f.to_idle(conn, time.monotonic() + 30)),
        )
        yield f, replied


def _conn(front: Front, sock: socket.socket) -> Conn:
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    conn = Conn(sock, ("127.0.0.1", 1), ("127.0.0.1", 2), tls=False)
    front.t.open[conn] = None
    front.t.full[conn] = None
    return conn


def _events(front: Front, seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for key, _ in front.poller.select(0.01):
            front.on_event(key.data)
        front.expire()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.settimeout(5)
        yield ours, theirs


def _replying(f: Front, ours: socket.socket, answer: bytes) -> Conn:
    """``answer`` replied on ``ours``, larger than the socket buffers: returned at once, with
    the rest waiting for the client."""
    conn = _conn(f, ours)
    f.reply(conn, answer, True)
    assert conn.phase is Phase.REPLY and conn.events == selectors.EVENT_WRITE
    return conn


@pytest.mark.parametrize("front", [30.0], indirect=True)
def test_an_answer_the_client_reads_late_is_written_as_it_reads(
    front: tuple[Front, list[Conn]], pair: tuple[socket.socket, socket.socket]
) -> None:
    (f, replied), (ours, theirs) = front, pair
    answer = bytes(range(256)) * 4096  # 1 MiB
    conn = _replying(f, ours, answer)
    assert not replied
    got = b""
    while len(got) < len(answer):
        got += theirs.recv(1 << 16)
        _events(f, 0.001)
    _events(f, 0.01)
    assert got == answer and replied == [conn] and conn.keep is True
    assert not conn.closed and conn.phase is Phase.IDLE


@pytest.mark.parametrize("front", [0.2], indirect=True)
def test_a_client_that_never_reads_its_answer_is_cut_at_its_deadline(
    front: tuple[Front, list[Conn]], pair: tuple[socket.socket, socket.socket]
) -> None:
    (f, replied), (ours, _) = front, pair
    conn = _replying(f, ours, b"x" * (1 << 20))
    _events(f, 0.5)  # request_timeout is 0.2 s
    assert conn.closed and not replied


def test_waits_are_refused_only_within_an_attempt() -> None:
    may_wait("anything")  # elsewhere: nothing happens
    assert attempt(lambda: 1 + 1) == 2
    ran: list[str] = []

    def waits() -> int:
        ran.append("before")
        may_wait("the jq sandbox")
        ran.append("after")
        return 1

    assert attempt(waits) is None and ran == ["before"]
    assert attempt(lambda: attempt(waits)) is None  # nested: the inner one gives up too
    may_wait("anything")  # and after it, as before
    # not an Exception: a handler's `except Exception` does not answer in its place
    assert not issubclass(WouldWait, Exception)
