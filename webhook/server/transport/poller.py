"""One connection's bytes, driven by the worker's poller without blocking: the TLS handshake
(once the whole ClientHello is in), reading and framing each request until it is complete,
the answers the poller gives itself (400, 408, 413), and closing under each deadline.

:class:`Front` owns the :class:`webhook.server.transport.conns.Table` of connections; the worker
(:mod:`webhook.server.transport.worker`) accepts them, hands each complete request to a thread, and takes it
back when answered.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from webhook.server.transport.conns import (
    CONTINUE,
    LINGER,
    MAX_RECORD,
    PAUSE_MIN,
    READ_BUDGET,
    RESET,
    Conn,
    Limits,
    Phase,
    Table,
    hello_need,
    response,
)
from webhook.server.transport.framing import Verdict


class Front:
    """The poller's side of every connection of one worker (see the module text)."""

    def __init__(
        self,
        *,
        poller: selectors.BaseSelector,
        log: Any,
        limits: Limits,
        worker_connections: int,
        keepalive: float,
        tls_context: Callable[[], ssl.SSLContext],
        on_request: Callable[[Conn], None],
        on_count: Callable[[int], None],
        on_replied: Callable[[Conn], None] = lambda conn: None,
    ) -> None:
        self.t = Table()
        self.poller = poller
        self.log = log
        self.limits = limits
        self.worker_connections = worker_connections
        self.keepalive = float(keepalive)
        self._tls_context = tls_context
        self._on_request = on_request
        self._on_count = on_count
        self._on_replied = on_replied

    def set_deadline(self, conn: Conn, deadline: float) -> None:
        self.t.set_deadline(conn, deadline)

    def expire(self) -> None:
        now = time.monotonic()
        for conn in self.t.due_rechecks(now):
            self.on_event(conn)
        for conn in self.t.expired(now):
            if conn.phase is Phase.HANDSHAKE:
                self.close(conn, "handshake_timeout")
            elif conn.phase in (Phase.REQUEST, Phase.OVERSIZED):
                self._send_once(conn, response(408, "request not received in time"))
                self.close(conn, "request_timeout")
            else:
                self.close(conn)

    def make_room(self, conn: Conn) -> None:
        """Before ``conn`` joins the connections ``worker_connections`` bounds: at the bound,
        close one of the others (:meth:`_evict`), or ``conn`` itself when all are served."""
        if len(self.t.full) >= self.worker_connections and not self.evict(waiting=False):
            self.close(conn, "evicted")

    def evict(self, *, waiting: bool = True) -> bool:
        """Close a connection to make room (:meth:`Table.victim` says which)."""
        victim = self.t.victim(waiting=waiting)
        if victim is None:
            return False
        self.log.debug("connection limit reached: closing %s (%s)", victim.client, victim.phase)
        self.close(self.reset(victim), "evicted")
        return True

    def reset(self, conn: Conn) -> Conn:
        """Have ``conn`` reset when closed, if it never got as far as TLS (it spares both
        ends the closing handshake)."""
        if conn.phase is Phase.HANDSHAKE and not isinstance(conn.sock, ssl.SSLSocket):
            with contextlib.suppress(OSError):
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
        return conn

    def want(self, conn: Conn, events: int) -> None:
        if events == conn.events or conn.closed:
            return
        if conn.events == 0:
            self.poller.register(conn.sock, events, conn)
        elif events == 0:
            self.poller.unregister(conn.sock)
        else:
            self.poller.modify(conn.sock, events, conn)
        conn.events = events

    def on_event(self, conn: Conn) -> None:
        if conn.closed:  # closed by an earlier event of the same batch
            return
        try:
            if conn.phase is Phase.HANDSHAKE:
                self._handshake(conn)
            elif conn.phase in (Phase.IDLE, Phase.REQUEST, Phase.OVERSIZED):
                self.read(conn)
            elif conn.phase is Phase.ANSWER:
                self._write(conn)
            elif conn.phase is Phase.REPLY:
                self._write_reply(conn)
            elif conn.phase is Phase.CLOSING:
                self._linger(conn)
        except Exception:  # a bug here must cost one connection, not the worker
            self.log.exception("connection handling failed for %s", conn.client)
            self.close(conn)

    def _hello_is_in(self, conn: Conn) -> bool:
        """Whether the first TLS record (the ClientHello) has arrived whole, by peeking.
        If not, the connection waits off the poller and is looked at again later (a peeked
        byte keeps a socket readable, so waiting for readiness would spin)."""
        try:
            head = conn.sock.recv(MAX_RECORD, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            self.want(conn, selectors.EVENT_READ)
            return False
        except OSError:
            self.close(conn, "reset")
            return False
        if not head:
            self.close(conn, "eof")
            return False
        need = hello_need(head)
        if need is None or len(head) >= need:
            return True
        self.want(conn, 0)
        self.t.recheck_later(conn, time.monotonic())
        return False

    def _handshake(self, conn: Conn) -> None:
        if not isinstance(conn.sock, ssl.SSLSocket):
            if not self._hello_is_in(conn):
                return
            self.t.waiting.pop(conn, None)
            self.make_room(conn)
            if conn.closed:
                return
            self.t.full[conn] = None
            self.want(conn, 0)  # wrapping takes the file descriptor over
            try:
                conn.sock = self._tls_context().wrap_socket(
                    conn.sock, server_side=True, do_handshake_on_connect=False
                )
            except (OSError, ValueError) as e:
                self.log.debug("cannot set up TLS for %s: %s", conn.client, e)
                self.close(conn)
                return
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self.want(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self.want(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
            self.log.debug("TLS handshake failed with %s: %s", conn.client, e)
            self.close(conn, "handshake_failed")
            return
        self.to_idle(conn, time.monotonic() + self.keepalive)
        self.read(conn)  # the request may have come with the handshake's last flight

    def to_idle(self, conn: Conn, deadline: float) -> None:
        conn.phase = Phase.IDLE
        self.t.idle[conn] = None
        self.set_deadline(conn, deadline)
        self.want(conn, selectors.EVENT_READ)

    def read(self, conn: Conn) -> None:
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
                self.close(conn, "reset" if conn.phase is not Phase.IDLE else None)
                return
            if not data:
                self.close(conn, "eof" if conn.phase is not Phase.IDLE else None)
                return
            if conn.phase is Phase.IDLE:
                conn.phase = Phase.REQUEST
                self.t.idle.pop(conn, None)
                self.set_deadline(conn, time.monotonic() + self.limits.request_timeout)
            conn.buf += data
            got += len(data)
            if got >= READ_BUDGET and not (conn.tls and sock.pending()):
                break
        if not conn.paused:
            self.want(conn, events)
        if got:
            self.frame(conn)

    def frame(self, conn: Conn) -> None:
        framer = conn.framer
        if framer is None:
            framer = conn.framer = self.limits.framer()
        verdict = framer.scan(conn.buf)
        if verdict is Verdict.COMPLETE:
            self._on_request(conn)
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
            self._send_once(conn, CONTINUE)
        self.account(conn)
        if (
            self.t.buffered > self.limits.buffer_budget
            and len(conn.buf) > PAUSE_MIN
            and not conn.paused
        ):
            conn.paused = True
            self.want(conn, 0)
            self.t.paused.append(conn)

    def _too_large(self) -> str:
        return f"request body larger than {self.limits.max_body} bytes"

    def account(self, conn: Conn) -> None:
        self.t.account(conn)

    def resume(self) -> None:
        for conn in self.t.resumable(self.limits.buffer_budget):
            self.want(conn, selectors.EVENT_READ)
            if conn.tls and conn.sock.pending():
                self.read(conn)

    def _send_once(self, conn: Conn, data: bytes) -> None:
        """Best effort, without blocking: a 100 Continue, or a 408 before closing."""
        with contextlib.suppress(OSError, ValueError):
            conn.sock.send(data)

    def _answer(self, conn: Conn, status: int, text: str, *, reason: str) -> None:
        """Answer ``status`` from the poller, then close (after a linger)."""
        self._cut(reason)
        conn.phase = Phase.ANSWER
        conn.out = response(status, text)
        conn.buf = bytearray()
        self.account(conn)
        self.set_deadline(conn, time.monotonic() + min(LINGER, self.limits.request_timeout))
        self._write(conn)

    def reply(self, conn: Conn, data: bytes, keep: bool) -> None:
        """Write the answer the poller computed for ``conn``'s request without blocking, then
        hand the connection back (``on_replied``); a client that does not read it has
        ``request_timeout`` to, as a request thread's send would give it."""
        conn.phase = Phase.REPLY
        conn.out, conn.keep = data, keep
        self.set_deadline(conn, time.monotonic() + self.limits.request_timeout)
        self._write_reply(conn)

    def _write_reply(self, conn: Conn) -> None:
        if self._send(conn):
            self._on_replied(conn)

    def _send(self, conn: Conn) -> bool:
        """Send ``conn.out`` as far as the socket takes it without blocking: True when all of
        it went; False when the rest waits for the socket (or the connection is closed)."""
        while conn.out:
            try:
                n = conn.sock.send(conn.out)
            except (ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                self.want(conn, selectors.EVENT_WRITE)
                return False
            except ssl.SSLWantReadError:
                self.want(conn, selectors.EVENT_READ)
                return False
            except (OSError, ValueError):
                self.close(conn)
                return False
            conn.out = conn.out[n:]
        return True

    def _write(self, conn: Conn) -> None:
        if not self._send(conn):
            return
        conn.phase = Phase.CLOSING
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except (OSError, ValueError):
            self.close(conn)
            return
        self.want(conn, selectors.EVENT_READ)
        self._linger(conn)

    def _linger(self, conn: Conn) -> None:
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
        self.close(conn)

    def _cut(self, reason: str) -> None:
        if self.limits.on_cut is not None:
            try:
                self.limits.on_cut(reason)
            except Exception:
                self.log.exception("connection metric failed")

    def close(self, conn: Conn, reason: str | None = None) -> None:
        if conn.closed:
            return
        if reason in ("handshake_timeout", "request_timeout", "evicted", "handshake_failed"):
            self._cut(reason)
        if reason:
            self.log.debug("closing connection from %s: %s", conn.client, reason)
        with contextlib.suppress(OSError, KeyError, ValueError):
            self.want(conn, 0)
        self.t.forget(conn)
        self._on_count(len(self.t.open))
        with contextlib.suppress(OSError):
            conn.sock.close()
        self.resume()
