"""gunicorn's threaded worker with an event-driven front: only complete requests reach a thread.

Stock ``gthread`` hands every new connection to a request thread, which shakes hands and then
blocks reading the request: a client that sends one byte a second, or stalls mid-handshake,
holds a thread for as long as it likes, and 2 workers x 8 threads are gone after 16 of them.
Here the worker's main thread (its poller) does all the waiting:

* the kernel hands a connection over only once its client has sent something (Linux
  ``TCP_DEFER_ACCEPT``, up to ``handshake_timeout``), so connections that stay silent wait
  in the kernel, not here;
* it accepts, waits (peeking, no TLS state yet) until the ClientHello's first record is all
  in, then drives the TLS handshake without blocking; all under ``handshake_timeout``;
* it reads each request without blocking into a buffer, frames it (:mod:`webhook.framing`)
  and submits it to the thread pool only once head and body are all there; the whole request
  (from its first byte) must arrive within ``request_timeout``, however it trickles in;
* a body over ``max_body`` is read and dropped up to ``drain_limit`` bytes (within the same
  deadline) and answered 413 by the poller; framing it cannot parse is answered 400;
* idle keep-alive connections wait in the poller (``keepalive`` seconds), as in ``gthread``;
* at most ``worker_connections`` connections per worker past their ClientHello (they hold TLS
  state, 20-80 KiB each), and ``WAITING_FACTOR`` times as many still waiting for it (a socket
  each). Past the second bound the oldest connection still waiting for its ClientHello is
  closed to admit the new one; past the first, the oldest that has not had a request
  answered yet (handshaking, or sending its first request), else the least recently used
  idle keep-alive one. When every connection is a request being served, the worker stops
  accepting and new connections wait in the listen backlog;
* bytes buffered for incomplete requests are bounded per worker (``buffer_budget``): past it,
  connections with large partial bodies stop being read until others finish (their deadline
  still runs).

The request thread parses the buffered bytes with gunicorn's own parser (so gunicorn still
validates every request) and writes the answer on the socket, with ``request_timeout`` as the
bound on a client that does not read it. Listeners in ``plain_ports`` are served without TLS.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import math
import os
import selectors
import socket
import ssl
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from enum import Enum
from http import HTTPStatus
from typing import Any

from gunicorn import http as _ghttp
from gunicorn import sock as _gsock
from gunicorn.workers import gthread as _gthread

from webhook.framing import Framer, Verdict

_BaseThreadWorker: Any = _gthread.ThreadWorker

#: Bytes read from one connection per readiness event before others get their turn.
READ_BUDGET = 256 * 1024
#: A connection whose partial request holds more than this may be paused by the buffer budget.
PAUSE_MIN = 64 * 1024
#: How long a connection the worker answered itself is drained before it is closed.
LINGER = 2.0
#: Connections accepted per readiness event of a listener. While a worker holds few
#: connections it takes one per event; under a flood, a burst.
ACCEPT_BURST = 32
FEW_CONNECTIONS = 64
#: While it holds few connections, a worker that holds more than another lets that one take
#: the next (it stops accepting for ACCEPT_YIELD, at most YIELD_MAX in a row): a client's
#: connections opened together (an API server's pool) spread over the workers, instead of one
#: worker taking all while the other idles (its threads would contend for one interpreter lock).
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


#: Connections whose ClientHello has not fully arrived (a socket each, no TLS state yet) may
#: number this many times ``worker_connections``.
WAITING_FACTOR = 4
#: A TLS record header, and the longest first record a ClientHello can come in.
_RECORD_HEAD = 5
_MAX_RECORD = _RECORD_HEAD + (1 << 14)
#: Re-check a partly arrived ClientHello after this long, doubling up to the second value.
RECHECK_FIRST, RECHECK_MAX = 0.005, 0.5


@dataclass(frozen=True)
class Limits:
    """What bounds a worker's connections (see the module text)."""

    handshake_timeout: float = 5.0
    request_timeout: float = 5.0
    max_head: int = 64 * 1024
    max_body: int = 7 * 1024 * 1024
    drain_limit: int = 28 * 1024 * 1024
    buffer_budget: int = 32 * 1024 * 1024
    #: Ports of listeners served as plain HTTP (the rest use the configured TLS).
    plain_ports: frozenset[int] = frozenset()
    #: Called with a reason whenever the worker cuts a connection (for a metric).
    on_cut: Callable[[str], None] | None = field(default=None, compare=False)
    #: The workers' open-connection counts, shared (None: no sharing, one worker).
    shares: Shares | None = field(default=None, compare=False)


class Phase(Enum):
    HANDSHAKE = "handshake"
    IDLE = "idle"  # no request in progress
    REQUEST = "request"  # a request is arriving
    OVERSIZED = "oversized"  # its body is over the cap and being dropped
    ANSWER = "answer"  # the poller is writing its own answer (4xx)
    CLOSING = "closing"  # answered; write side shut, the rest is read and dropped
    BUSY = "busy"  # a complete request is in (or queued for) the thread pool


class _Conn:
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
        self.continued = False
        self.paused = False
        self.closed = False
        self.drained = 0
        self.served = 0
        self.recheck = 0.0


def _response(status: int, text: str) -> bytes:
    body = (text + "\n").encode()
    phrase = HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets the connection


def _pieces(data: bytes, size: int = 1 << 16) -> Iterator[bytes]:
    view = memoryview(data)
    for i in range(0, len(data), size):
        yield bytes(view[i : i + size])


class ThreadWorker(_BaseThreadWorker):  # type: ignore[misc]
    """The worker (see the module text). :func:`worker_class` makes one with its limits."""

    limits = Limits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: dict[_Conn, None] = {}  # every connection, oldest first
        self._waiting: dict[_Conn, None] = {}  # TLS ones whose ClientHello is not all in yet
        self._full: dict[_Conn, None] = {}  # the others (what worker_connections bounds)
        self._idle: dict[_Conn, None] = {}  # idle ones, longest idle first
        self._rechecks: list[tuple[float, int, _Conn]] = []
        self._paused: deque[_Conn] = deque()
        self._timers: list[tuple[float, int, _Conn]] = []
        self._seq = itertools.count()
        self._busy = 0
        self._buffered = 0
        self._accept_pause_until = 0.0
        self._addresses: dict[int, Any] = {}
        self._share_slot = -1  # claimed in the worker process (run)
        self._yielding_since: float | None = None

    # ----------------------------------------------------------------------------- the loop

    def run(self) -> None:
        if self.limits.shares is not None:
            self._share_slot = self.limits.shares.claim(os.getpid())
        self._defer_accept()
        self.poller.register(
            self.method_queue.fileno(), selectors.EVENT_READ, self.method_queue.run_callbacks
        )
        while self.alive:
            self.notify()
            self._update_accepting()
            self._poll(self._timeout())
            if not self.is_parent_alive():
                break
            self._expire()
        self._shutdown()

    def _defer_accept(self) -> None:
        """Have the kernel hand over a connection only once the client has sent something
        (Linux ``TCP_DEFER_ACCEPT``, for up to ``handshake_timeout``): HTTP clients speak
        first, so only silent connections wait, and they wait in the kernel's queue of
        half-open connections, not in this worker or ahead of real clients in the accept
        queue. Past that time the kernel hands them over anyway, and the handshake deadline
        applies."""
        option = getattr(socket, "TCP_DEFER_ACCEPT", None)
        if option is None:
            return
        seconds = max(1, math.ceil(self.limits.handshake_timeout))
        for listener in self.sockets:
            try:
                listener.setsockopt(socket.IPPROTO_TCP, option, seconds)
            except (OSError, AttributeError) as e:
                self.log.debug("TCP_DEFER_ACCEPT not set on %s: %s", listener, e)

    def _shutdown(self) -> None:
        self.set_accept_enabled(False)
        now = time.monotonic()
        # Kept-alive connections stay open briefly, for a request a client may be sending
        # already (answered with "Connection: close"); everything else runs to its deadline.
        for conn in list(self._idle):
            self._set_deadline(conn, min(conn.deadline, now + _gthread.STOP_KEEPALIVE_LINGER))
        for conn in list(self._open):
            if conn.phase is Phase.HANDSHAKE:
                self._close(conn)
        until = now + self.cfg.graceful_timeout
        while self._open and time.monotonic() < until:
            self.notify()
            self._poll(self._timeout())
            self._expire()
        for conn in list(self._open):
            self._close(conn)
        self.tpool.shutdown(wait=False)
        self.poller.close()
        self.method_queue.close()
        for s in self.sockets:
            s.close()

    def _poll(self, timeout: float) -> None:
        try:
            events = self.poller.select(timeout)
        except OSError as e:
            if e.errno != errno.EINTR:
                raise
            return
        later = []
        for key, _mask in events:
            data = key.data
            if isinstance(data, _Conn):
                self._on_event(data)
            else:
                later.append(key)
        for key in later:  # new connections after the ones already open
            key.data(key.fileobj)

    def _timeout(self) -> float:
        timers = self._timers
        while timers and (timers[0][2].closed or timers[0][0] != timers[0][2].deadline):
            heapq.heappop(timers)
        rechecks = self._rechecks
        while rechecks and rechecks[0][2] not in self._waiting:
            heapq.heappop(rechecks)
        due = min([t[0][0] for t in (timers, rechecks) if t], default=None)
        now = time.monotonic()
        if self._accept_pause_until > now:  # accepting resumes then
            due = self._accept_pause_until if due is None else min(due, self._accept_pause_until)
        if due is None:
            return 1.0
        return max(0.0, min(1.0, due - now))

    def _set_deadline(self, conn: _Conn, deadline: float) -> None:
        conn.deadline = deadline
        heapq.heappush(self._timers, (deadline, next(self._seq), conn))
        if len(self._timers) > 4 * len(self._open) + 1024:  # stale entries: rebuild
            self._timers = [
                (c.deadline, next(self._seq), c) for c in self._open if c.phase is not Phase.BUSY
            ]
            heapq.heapify(self._timers)

    def _expire(self) -> None:
        now = time.monotonic()
        rechecks = self._rechecks
        while rechecks and rechecks[0][0] <= now:
            _, _, conn = heapq.heappop(rechecks)
            if conn in self._waiting:
                self._on_event(conn)
        timers = self._timers
        while timers and timers[0][0] <= now:
            deadline, _, conn = heapq.heappop(timers)
            if conn.closed or conn.deadline != deadline or conn.phase is Phase.BUSY:
                continue
            if conn.phase is Phase.HANDSHAKE:
                self._close(conn, "handshake_timeout")
            elif conn.phase in (Phase.REQUEST, Phase.OVERSIZED):
                self._send_once(conn, _response(408, "request not received in time"))
                self._close(conn, "request_timeout")
            else:
                self._close(conn)

    def _update_accepting(self) -> None:
        can = self.alive and time.monotonic() >= self._accept_pause_until
        can = can and (len(self._full) < self.worker_connections or len(self._full) > self._busy)
        if can != self._accepting:
            self.set_accept_enabled(can)

    # ----------------------------------------------------------------------------- accept

    def _yield_accept(self) -> bool:
        """Whether to leave the next connection to a worker that holds fewer (see
        :data:`ACCEPT_YIELD`); then accepting pauses briefly."""
        shares = self.limits.shares
        if shares is None or len(self._open) >= FEW_CONNECTIONS:
            return False
        fewest = shares.fewest_elsewhere(self._share_slot)
        now = time.monotonic()
        if fewest is None or len(self._open) <= fewest:
            self._yielding_since = None
            return False
        if self._yielding_since is None:
            self._yielding_since = now
        elif now - self._yielding_since > YIELD_MAX:  # the other one does not take it
            self._yielding_since = None
            return False
        self._accept_pause_until = now + ACCEPT_YIELD
        self._update_accepting()
        return True

    def accept(self, listener: Any) -> None:
        if self._yield_accept():
            return
        for _ in range(1 if len(self._open) < FEW_CONNECTIONS else ACCEPT_BURST):
            if len(self._full) >= self.worker_connections and len(self._full) <= self._busy:
                return  # every connection is being served: the rest wait in the backlog
            try:
                sock, addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self.log.warning("cannot accept a connection: %s", e)
                    if not self._evict():
                        self._accept_pause_until = time.monotonic() + 0.5
                        self._update_accepting()
                    return
                if e.errno == errno.ECONNABORTED:
                    continue
                raise
            self._admit(sock, addr, self._address(listener))

    def _address(self, listener: Any) -> Any:
        fd = listener.fileno()
        address = self._addresses.get(fd)
        if address is None:
            address = self._addresses[fd] = listener.getsockname()
        return address

    def _admit(self, sock: socket.socket, addr: Any, server: Any) -> None:
        sock.setblocking(False)
        port = server[1] if isinstance(server, tuple) else None
        tls = bool(self.cfg.is_ssl) and port not in self.limits.plain_ports
        conn = _Conn(sock, addr, server, tls)
        self._open[conn] = None
        self.nr_conns = len(self._open)
        if self.limits.shares is not None:
            self.limits.shares.set(self._share_slot, self.nr_conns)
        # TLS is set up once the ClientHello is in (until then a connection costs a socket
        # only); a plain connection's first request byte is due when a handshake would be done.
        self._set_deadline(conn, time.monotonic() + self.limits.handshake_timeout)
        if tls:
            self._waiting[conn] = None
            if len(self._waiting) > WAITING_FACTOR * self.worker_connections:
                self._close(self._reset(next(iter(self._waiting))), "evicted")
        else:
            self._make_room(conn)
            if conn.closed:
                return
            self._full[conn] = None
        self._want(conn, selectors.EVENT_READ)

    def _make_room(self, conn: _Conn) -> None:
        """Before ``conn`` joins the connections ``worker_connections`` bounds: at the bound,
        close one of the others (:meth:`_evict`), or ``conn`` itself when all are served."""
        if len(self._full) >= self.worker_connections and not self._evict(waiting=False):
            self._close(conn, "evicted")

    def _evict(self, *, waiting: bool = True) -> bool:
        """Close a connection to make room: (with ``waiting``) the oldest whose ClientHello
        is not all in, else the oldest that has not yet had a request answered and is not
        being served (still handshaking, silent, or sending), else the least recently used
        idle keep-alive connection (a client that sends requests keeps its connections)."""
        victim = next(iter(self._waiting), None) if waiting else None
        if victim is None:
            victim = next(
                (c for c in self._full if c.phase is not Phase.BUSY and not c.served), None
            )
        if victim is None:
            victim = next(iter(self._idle), None)
        if victim is None:
            return False
        self.log.debug("connection limit reached: closing %s (%s)", victim.client, victim.phase)
        self._close(self._reset(victim), "evicted")
        return True

    def _reset(self, conn: _Conn) -> _Conn:
        """Have ``conn`` reset when closed, if it never got as far as TLS (it spares both
        ends the closing handshake)."""
        if conn.phase is Phase.HANDSHAKE and not isinstance(conn.sock, ssl.SSLSocket):
            with contextlib.suppress(OSError):
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        return conn

    def _framer(self) -> Framer:
        lim = self.limits
        return Framer(max_head=lim.max_head, max_body=lim.max_body, drain_limit=lim.drain_limit)

    # ----------------------------------------------------------------------------- events

    def _want(self, conn: _Conn, events: int) -> None:
        if events == conn.events or conn.closed:
            return
        if conn.events == 0:
            self.poller.register(conn.sock, events, conn)
        elif events == 0:
            self.poller.unregister(conn.sock)
        else:
            self.poller.modify(conn.sock, events, conn)
        conn.events = events

    def _on_event(self, conn: _Conn) -> None:
        if conn.closed:  # closed by an earlier event of the same batch
            return
        try:
            if conn.phase is Phase.HANDSHAKE:
                self._handshake(conn)
            elif conn.phase in (Phase.IDLE, Phase.REQUEST, Phase.OVERSIZED):
                self._read(conn)
            elif conn.phase is Phase.ANSWER:
                self._write(conn)
            elif conn.phase is Phase.CLOSING:
                self._linger(conn)
        except Exception:  # a bug here must cost one connection, not the worker
            self.log.exception("connection handling failed for %s", conn.client)
            self._close(conn)

    def _hello_is_in(self, conn: _Conn) -> bool:
        """Whether the first TLS record (the ClientHello) has arrived whole, by peeking.
        If not, the connection waits off the poller and is looked at again later (a peeked
        byte keeps a socket readable, so waiting for readiness would spin)."""
        try:
            head = conn.sock.recv(_MAX_RECORD, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            self._want(conn, selectors.EVENT_READ)
            return False
        except OSError:
            self._close(conn, "reset")
            return False
        if not head:
            self._close(conn, "eof")
            return False
        if head[0] != 0x16:  # not a TLS handshake record: let the TLS library answer it
            return True
        if len(head) >= _RECORD_HEAD:
            need = _RECORD_HEAD + int.from_bytes(head[3:5], "big")
            if len(head) >= need or need > _MAX_RECORD:
                return True
        self._want(conn, 0)
        conn.recheck = min(RECHECK_MAX, 2 * conn.recheck) if conn.recheck else RECHECK_FIRST
        entry = (time.monotonic() + conn.recheck, next(self._seq), conn)
        heapq.heappush(self._rechecks, entry)
        return False

    def _handshake(self, conn: _Conn) -> None:
        if not isinstance(conn.sock, ssl.SSLSocket):
            if not self._hello_is_in(conn):
                return
            self._waiting.pop(conn, None)
            self._make_room(conn)
            if conn.closed:
                return
            self._full[conn] = None
            self._want(conn, 0)  # wrapping takes the file descriptor over
            try:
                conn.sock = _gsock.ssl_context(self.cfg).wrap_socket(
                    conn.sock, server_side=True, do_handshake_on_connect=False
                )
            except (OSError, ValueError) as e:
                self.log.debug("cannot set up TLS for %s: %s", conn.client, e)
                self._close(conn)
                return
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._want(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
            self.log.debug("TLS handshake failed with %s: %s", conn.client, e)
            self._close(conn, "handshake_failed")
            return
        self._to_idle(conn, time.monotonic() + (self.cfg.keepalive or self.limits.request_timeout))
        self._read(conn)  # the request may have come with the handshake's last flight

    def _to_idle(self, conn: _Conn, deadline: float) -> None:
        conn.phase = Phase.IDLE
        self._idle[conn] = None
        self._set_deadline(conn, deadline)
        self._want(conn, selectors.EVENT_READ)

    def _read(self, conn: _Conn) -> None:
        got = 0
        sock = conn.sock
        events = selectors.EVENT_READ
        while True:
            try:
                data = sock.recv(1 << 16)
            except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
                break
            except ssl.SSLWantWriteError:
                events = selectors.EVENT_READ | selectors.EVENT_WRITE
                break
            except (OSError, ValueError):
                self._close(conn, "reset" if conn.phase is not Phase.IDLE else None)
                return
            if not data:
                self._close(conn, "eof" if conn.phase is not Phase.IDLE else None)
                return
            if conn.phase is Phase.IDLE:
                conn.phase = Phase.REQUEST
                self._idle.pop(conn, None)
                self._set_deadline(conn, time.monotonic() + self.limits.request_timeout)
            conn.buf += data
            got += len(data)
            if got >= READ_BUDGET and not (conn.tls and sock.pending()):
                break
        if not conn.paused:
            self._want(conn, events)
        if got:
            self._frame(conn)

    def _frame(self, conn: _Conn) -> None:
        framer = conn.framer
        if framer is None:
            framer = conn.framer = self._framer()
        verdict = framer.scan(conn.buf)
        if verdict is Verdict.COMPLETE:
            self._dispatch(conn)
            return
        if verdict is Verdict.BAD:
            self._answer(conn, *framer.error, reason="bad_request")
            return
        if verdict is Verdict.DRAINED:
            self._answer(conn, 413, self._too_large(), reason="too_large")
            return
        head = framer.head
        if framer.oversized:
            waiting = head is not None and head.expect_continue and not conn.continued
            if framer.drain_exceeded or waiting:
                self._answer(conn, 413, self._too_large(), reason="too_large")
                return
            conn.phase = Phase.OVERSIZED
            framer.discard(conn.buf)
        elif head is not None and head.expect_continue and not conn.continued:
            conn.continued = True
            self._send_once(conn, _CONTINUE)
        self._account(conn)
        if (
            self._buffered > self.limits.buffer_budget
            and len(conn.buf) > PAUSE_MIN
            and not conn.paused
        ):
            conn.paused = True
            self._want(conn, 0)
            self._paused.append(conn)

    def _too_large(self) -> str:
        return f"request body larger than {self.limits.max_body} bytes"

    def _account(self, conn: _Conn) -> None:
        size = 0 if conn.closed or conn.phase is Phase.BUSY else len(conn.buf)
        if size == conn.accounted:
            return
        self._buffered += size - conn.accounted
        conn.accounted = size

    def _resume(self) -> None:
        while self._paused and self._buffered <= self.limits.buffer_budget:
            conn = self._paused.popleft()
            conn.paused = False
            if not conn.closed and conn.phase is Phase.REQUEST:
                self._want(conn, selectors.EVENT_READ)
                if conn.tls and conn.sock.pending():
                    self._read(conn)

    # ----------------------------------------------------------------------------- answers

    def _send_once(self, conn: _Conn, data: bytes) -> None:
        """Best effort, without blocking: a 100 Continue, or a 408 before closing."""
        with contextlib.suppress(OSError, ValueError):
            conn.sock.send(data)

    def _answer(self, conn: _Conn, status: int, text: str, *, reason: str) -> None:
        """Answer ``status`` from the poller, then close (after a linger)."""
        self._cut(reason)
        conn.phase = Phase.ANSWER
        conn.out = _response(status, text)
        conn.buf = bytearray()
        self._account(conn)
        self._set_deadline(conn, time.monotonic() + min(LINGER, self.limits.request_timeout))
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        try:
            n = conn.sock.send(conn.out)
        except (ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
            self._want(conn, selectors.EVENT_WRITE)
            return
        except ssl.SSLWantReadError:
            self._want(conn, selectors.EVENT_READ)
            return
        except (OSError, ValueError):
            self._close(conn)
            return
        conn.out = conn.out[n:]
        if conn.out:
            self._want(conn, selectors.EVENT_WRITE)
            return
        conn.phase = Phase.CLOSING
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except (OSError, ValueError):
            self._close(conn)
            return
        self._want(conn, selectors.EVENT_READ)
        self._linger(conn)

    def _linger(self, conn: _Conn) -> None:
        """Drop what the client still sends until it closes, so our answer is not reset."""
        while True:
            try:
                data = socket.socket.recv(conn.sock, 1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except (OSError, ValueError):
                break
            conn.drained += len(data)
            if not data or conn.drained > self.limits.drain_limit:
                break
        self._close(conn)

    def _cut(self, reason: str) -> None:
        if self.limits.on_cut is not None:
            try:
                self.limits.on_cut(reason)
            except Exception:
                self.log.exception("connection metric failed")

    def _close(self, conn: _Conn, reason: str | None = None) -> None:
        if conn.closed:
            return
        if reason in ("handshake_timeout", "request_timeout", "evicted", "handshake_failed"):
            self._cut(reason)
        if reason:
            self.log.debug("closing connection from %s: %s", conn.client, reason)
        with contextlib.suppress(OSError, KeyError, ValueError):
            self._want(conn, 0)
        conn.closed = True
        self._open.pop(conn, None)
        self._waiting.pop(conn, None)
        self._full.pop(conn, None)
        self._idle.pop(conn, None)
        self.nr_conns = len(self._open)
        if self.limits.shares is not None:
            self.limits.shares.set(self._share_slot, self.nr_conns)
        self._account(conn)
        with contextlib.suppress(OSError):
            conn.sock.close()
        self._resume()

    # ----------------------------------------------------------------------------- requests

    def _dispatch(self, conn: _Conn) -> None:
        assert conn.framer is not None
        end = conn.framer.end
        data = bytes(conn.buf[:end])
        del conn.buf[:end]
        conn.framer = None
        conn.continued = False
        conn.phase = Phase.BUSY
        self._want(conn, 0)
        self._account(conn)
        self._busy += 1
        fut = self.tpool.submit(self._serve, conn, data)
        fut.add_done_callback(lambda f: self.method_queue.defer(self._served, conn, f))
        self._resume()

    def _served(self, conn: _Conn, fut: futures.Future[bool]) -> None:
        """Back on the poller after a request thread answered (or failed)."""
        self._busy -= 1
        conn.served += 1
        keep = not fut.cancelled() and fut.exception() is None and fut.result()
        if not keep:
            self._close(conn)
            return
        try:
            conn.sock.setblocking(False)
        except OSError:
            self._close(conn)
            return
        now = time.monotonic()
        if conn.buf:  # the client sent its next request already
            conn.phase = Phase.REQUEST
            self._set_deadline(conn, now + self.limits.request_timeout)
            self._want(conn, selectors.EVENT_READ)
            self._frame(conn)
        else:
            self._to_idle(conn, now + (self.cfg.keepalive or self.limits.request_timeout))
        if not conn.closed and conn.phase is not Phase.BUSY and conn.tls and conn.sock.pending():
            self._read(conn)

    def _serve(self, conn: _Conn, data: bytes) -> bool:
        """Serve one complete request (a request thread). True: keep the connection."""
        req = None
        try:
            conn.sock.settimeout(self.limits.request_timeout)  # bounds writing the answer
            parser = _ghttp.get_parser(self.cfg, _pieces(data), conn.client)
            req = next(parser)
            if not req:
                return False
            req._expected_100_continue = False  # the poller has sent it
            keep = self.handle_request(req, conn)
            return bool(keep) and bool(parser.finish_body())
        except _ghttp.errors.NoMoreData as e:
            self.log.debug("incomplete request from %s: %s", conn.client, e)
        except StopIteration as e:
            self.log.debug("closing connection: %s", e)
        except TimeoutError:
            self.log.debug("client %s did not read its answer in time", conn.client)
        except ssl.SSLError as e:
            if e.args[0] != ssl.SSL_ERROR_EOF:
                self.log.debug("TLS error serving %s: %s", conn.client, e)
        except OSError as e:
            if e.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                self.log.exception("socket error serving a request")
        except Exception as e:
            self.handle_error(req, conn.sock, conn.client, e)
        return False


def worker_class(limits: Limits) -> type[ThreadWorker]:
    """The gunicorn ``worker_class``: :class:`ThreadWorker` with these limits."""

    class Worker(ThreadWorker):
        pass

    Worker.limits = limits
    Worker.__name__ = Worker.__qualname__ = "ThreadWorker"
    return Worker
