"""The worker's connections as its poller keeps them: one record per connection, the limits
that bound them, and the table that files them by state with their deadlines.

No sockets are read or written here (:mod:`webhook.server.transport.worker` does that); this is bookkeeping:
which connections wait for a ClientHello, which count against ``worker_connections``, which
are idle, what is due when, how many bytes partial requests hold, and whom to close to make
room.
"""

from __future__ import annotations

import heapq
import itertools
import struct
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from http import HTTPStatus
from typing import Any

from webhook.server.transport.framing import MAX_FIELD, MAX_FIELDS, MAX_LINE, Framer
from webhook.server.transport.shares import Shares

#: Bytes read from one connection per readiness event before others get their turn.
READ_BUDGET = 256 * 1024
#: A connection whose partial request holds more than this may be paused by the buffer budget.
PAUSE_MIN = 64 * 1024
#: How long a connection the worker answered itself is drained before it is closed.
LINGER = 2.0
#: Connections whose ClientHello has not fully arrived (a socket each, no TLS state yet) may
#: number this many times ``worker_connections``.
WAITING_FACTOR = 4
#: A TLS record header, and the longest first record a ClientHello can come in.
RECORD_HEAD = 5
MAX_RECORD = RECORD_HEAD + (1 << 14)
#: Re-check a partly arrived ClientHello after this long, doubling up to the second value.
RECHECK_FIRST, RECHECK_MAX = 0.005, 0.5


@dataclass(frozen=True)
class Limits:
    """What bounds a worker's connections (see :mod:`webhook.server.transport.worker`)."""

    handshake_timeout: float = 5.0
    request_timeout: float = 5.0
    max_head: int = 64 * 1024
    #: gunicorn's request line, field count and field size limits, which the poller's framer
    #: applies first (the server gives gunicorn the same numbers).
    max_line: int = MAX_LINE
    max_fields: int = MAX_FIELDS
    max_field: int = MAX_FIELD
    max_body: int = 7 * 1024 * 1024
    drain_limit: int = 28 * 1024 * 1024
    buffer_budget: int = 32 * 1024 * 1024
    #: Ports of listeners served as plain HTTP (the rest use the configured TLS).
    plain_ports: frozenset[int] = frozenset()
    #: Called with a reason whenever the worker cuts a connection (for a metric).
    on_cut: Callable[[str], None] | None = field(default=None, compare=False)
    #: The workers' open-connection counts, shared (None: no sharing, one worker).
    shares: Shares | None = field(default=None, compare=False)
    #: Paths (no query) whose plain POST requests the request thread answers without
    #: gunicorn's parser and response (:meth:`webhook.server.transport.worker.ThreadWorker._direct`):
    #: the admission webhooks, whose app reads of the environ only what such a request has.
    direct_paths: frozenset[bytes] = frozenset()
    #: Of ``direct_paths``, those the poller answers itself when the body is at most
    #: ``inline_body`` bytes (no hand-off to a request thread and back): the mutating webhook's,
    #: whose answer is computed in process. ``inline`` runs the answer there: its result, or
    #: None when it would wait on something (then a request thread answers the request).
    inline_paths: frozenset[bytes] = frozenset()
    inline_body: int = 64 * 1024
    inline: Callable[[Callable[[], tuple[bytes, bool]]], tuple[bytes, bool] | None] | None = field(
        default=None, compare=False
    )

    def framer(self) -> Framer:
        return Framer(
            max_head=self.max_head,
            max_body=self.max_body,
            drain_limit=self.drain_limit,
            max_line=self.max_line,
            max_fields=self.max_fields,
            max_field=self.max_field,
        )


class Phase(Enum):
    HANDSHAKE = "handshake"
    IDLE = "idle"  # no request in progress
    REQUEST = "request"  # a request is arriving
    OVERSIZED = "oversized"  # its body is over the cap and being dropped
    ANSWER = "answer"  # the poller is writing its own answer (4xx)
    CLOSING = "closing"  # answered; write side shut, the rest is read and dropped
    BUSY = "busy"  # a complete request is in (or queued for) the thread pool
    REPLY = "reply"  # the poller answered it itself and is writing the answer


class Conn:
    """One client connection, as the poller sees it (and gunicorn's handle_request wants it)."""

    __slots__ = (
        "accounted",
        "buf",
        "client",
        "closed",
        "continued",
        "deadline",
        "drained",
        "events",
        "framer",
        "keep",
        "out",
        "paused",
        "phase",
        "recheck",
        "served",
        "server",
        "sock",
        "tls",
    )

    def __init__(self, sock: Any, client: Any, server: Any, tls: bool) -> None:
        self.sock = sock
        self.client = client
        self.server = server
        self.tls = tls
        self.phase = Phase.HANDSHAKE if tls else Phase.IDLE
        self.deadline = 0.0
        self.buf = bytearray()
        self.accounted = 0
        self.framer: Framer | None = None  # made with the first byte of a request
        self.events = 0
        self.out = b""
        self.keep = False  # in REPLY: whether the connection stays open once it is written
        self.continued = False
        self.paused = False
        self.closed = False
        self.drained = 0
        self.served = 0
        self.recheck = 0.0


def response(status: int, text: str) -> bytes:
    """A whole plain-text HTTP answer that closes the connection."""
    body = (text + "\n").encode()
    phrase = HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets the connection


def pieces(data: bytes, size: int = 1 << 16) -> Iterator[bytes]:
    view = memoryview(data)
    for i in range(0, len(data), size):
        yield bytes(view[i : i + size])


def hello_need(head: bytes) -> int | None:
    """From the first bytes a TLS client sent: how many bytes its first record (the
    ClientHello) takes, or None when they are not a TLS handshake record or the record is
    longer than one may be (then the TLS library is left to answer it)."""
    if head[0] != 0x16:
        return None
    if len(head) < RECORD_HEAD:
        return RECORD_HEAD
    need = RECORD_HEAD + int.from_bytes(head[3:5], "big")
    return None if need > MAX_RECORD else need


class Table:
    """Every connection of a worker, filed by state, with deadlines and buffered bytes."""

    def __init__(self) -> None:
        self.open: dict[Conn, None] = {}  # every connection, oldest first
        self.waiting: dict[Conn, None] = {}  # TLS ones whose ClientHello is not all in yet
        self.full: dict[Conn, None] = {}  # the others (what worker_connections bounds)
        self.idle: dict[Conn, None] = {}  # idle ones, longest idle first
        self.paused: deque[Conn] = deque()  # not read until the buffer budget allows
        self.busy = 0  # connections whose request is in the thread pool
        self.buffered = 0  # bytes partial requests hold
        self._timers: list[tuple[float, int, Conn]] = []
        self._rechecks: list[tuple[float, int, Conn]] = []
        self._seq = itertools.count()

    def set_deadline(self, conn: Conn, deadline: float) -> None:
        conn.deadline = deadline
        heapq.heappush(self._timers, (deadline, next(self._seq), conn))
        if len(self._timers) > 4 * len(self.open) + 1024:  # stale entries: rebuild
            self._timers = [
                (c.deadline, next(self._seq), c) for c in self.open if c.phase is not Phase.BUSY
            ]
            heapq.heapify(self._timers)

    def recheck_later(self, conn: Conn, now: float) -> None:
        """Look at ``conn``'s partly arrived ClientHello again later (backing off)."""
        conn.recheck = min(RECHECK_MAX, 2 * conn.recheck) if conn.recheck else RECHECK_FIRST
        heapq.heappush(self._rechecks, (now + conn.recheck, next(self._seq), conn))

    def next_due(self) -> float | None:
        """When the next deadline or recheck is due (stale entries are dropped)."""
        timers = self._timers
        while timers and (timers[0][2].closed or timers[0][0] != timers[0][2].deadline):
            heapq.heappop(timers)
        rechecks = self._rechecks
        while rechecks and rechecks[0][2] not in self.waiting:
            heapq.heappop(rechecks)
        return min([t[0][0] for t in (timers, rechecks) if t], default=None)

    def due_rechecks(self, now: float) -> Iterator[Conn]:
        while self._rechecks and self._rechecks[0][0] <= now:
            _, _, conn = heapq.heappop(self._rechecks)
            if conn in self.waiting:
                yield conn

    def expired(self, now: float) -> Iterator[Conn]:
        """Connections whose deadline has passed (not those being served)."""
        while self._timers and self._timers[0][0] <= now:
            deadline, _, conn = heapq.heappop(self._timers)
            if not (conn.closed or conn.deadline != deadline or conn.phase is Phase.BUSY):
                yield conn

    def account(self, conn: Conn) -> None:
        """Count what ``conn``'s partial request holds against the buffer budget."""
        size = 0 if conn.closed or conn.phase is Phase.BUSY else len(conn.buf)
        if size != conn.accounted:
            self.buffered += size - conn.accounted
            conn.accounted = size

    def victim(self, *, waiting: bool) -> Conn | None:
        """Whom to close to make room: (with ``waiting``) the oldest whose ClientHello is not
        all in, else the oldest that has not yet had a request answered and is not being
        served (still handshaking, silent, or sending), else the least recently used idle
        keep-alive connection (a client that sends requests keeps its connections)."""
        found = next(iter(self.waiting), None) if waiting else None
        if found is None:
            found = next((c for c in self.full if c.phase is not Phase.BUSY and not c.served), None)
        if found is None:
            found = next(iter(self.idle), None)
        return found

    def forget(self, conn: Conn) -> None:
        """``conn`` is closed: drop it from every set and the buffer count."""
        conn.closed = True
        self.open.pop(conn, None)
        self.waiting.pop(conn, None)
        self.full.pop(conn, None)
        self.idle.pop(conn, None)
        self.account(conn)

    def resumable(self, budget: int) -> Iterator[Conn]:
        """Paused connections to read again, while the buffered bytes are within budget."""
        while self.paused and self.buffered <= budget:
            conn = self.paused.popleft()
            conn.paused = False
            if not conn.closed and conn.phase is Phase.REQUEST:
                yield conn
