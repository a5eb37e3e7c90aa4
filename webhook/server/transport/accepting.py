"""Accepting connections for :class:`~webhook.server.transport.worker.ThreadWorker` (a mixin
of it): which worker takes a new connection (:mod:`webhook.server.transport.shares`), the
kernel's deferred accept, and the connection limits at the door."""

from __future__ import annotations

import errno
import math
import selectors
import socket
import time
from typing import Any

from webhook.server.transport.conns import WAITING_FACTOR, Conn
from webhook.server.transport.poller import Front
from webhook.server.transport.shares import ACCEPT_BURST, ACCEPT_YIELD, FEW_CONNECTIONS, Turns

#: At most one warning this often that other workers missed the turns left to them.
MISSED_REPORT_INTERVAL = 60.0

__all__ = ["MISSED_REPORT_INTERVAL", "Accepting"]


class Accepting:
    """The accepting side of the worker; the worker sets these up (``__init__``, ``run``)."""

    _front: Front
    _turns: Turns
    _accept_pause_until: float
    _woke: float
    _missed: set[int]
    _misses: int
    _missed_reported: float
    _addresses: dict[int, Any]
    _accepting: bool
    limits: Any
    log: Any
    cfg: Any
    sockets: list[Any]
    worker_connections: int
    nr_conns: int

    def _update_accepting(self) -> None:
        raise NotImplementedError

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

    # ----------------------------------------------------------------------------- accept

    def _count(self, held: int) -> None:
        self.nr_conns = held
        self._turns.count(held)

    def _yield_accept(self) -> bool:
        """Whether to leave the next connection to a worker that holds fewer and is taking
        connections now (:mod:`webhook.server.transport.shares`); then accepting pauses briefly."""
        now = time.monotonic()
        if not self._turns.should_yield(len(self._front.t.open), now, self._woke):
            self._report_missed(now)
            return False
        self._accept_pause_until = now + ACCEPT_YIELD
        self._update_accepting()
        return True

    def _report_missed(self, now: float) -> None:
        """Warn (at most every :data:`MISSED_REPORT_INTERVAL`) that workers did not take
        connections left to them: a worker stuck in a way the table does not show."""
        missed = self._turns.missed()
        self._missed.update(missed)
        self._misses += len(missed)
        if self._misses and now - self._missed_reported >= MISSED_REPORT_INTERVAL:
            self.log.warning(
                "worker(s) %s did not take connections left to them (%d times): this worker "
                "takes them without waiting until they accept again",
                sorted(self._missed),
                self._misses,
            )
            self._missed, self._misses, self._missed_reported = set(), 0, now

    def accept(self, listener: Any) -> None:
        if self._yield_accept():
            return
        for _ in range(1 if len(self._front.t.open) < FEW_CONNECTIONS else ACCEPT_BURST):
            if (
                len(self._front.t.full) >= self.worker_connections
                and len(self._front.t.full) <= self._front.t.busy
            ):
                return  # every connection is being served: the rest wait in the backlog
            try:
                sock, addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self.log.warning("cannot accept a connection: %s", e)
                    if not self._front.evict():
                        self._accept_pause_until = time.monotonic() + 0.5
                        self._update_accepting()
                    return
                if e.errno == errno.ECONNABORTED:
                    continue
                raise
            self._turns.accepted()
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
        conn = Conn(sock, addr, server, tls)
        self._front.t.open[conn] = None
        self._count(len(self._front.t.open))
        # TLS is set up once the ClientHello is in (until then a connection costs a socket
        # only); a plain connection's first request byte is due when a handshake would be done.
        self._front.set_deadline(conn, time.monotonic() + self.limits.handshake_timeout)
        if tls:
            self._front.t.waiting[conn] = None
            if len(self._front.t.waiting) > WAITING_FACTOR * self.worker_connections:
                self._front.close(self._front.reset(next(iter(self._front.t.waiting))), "evicted")
        else:
            self._front.make_room(conn)
            if conn.closed:
                return
            self._front.t.full[conn] = None
        self._front.want(conn, selectors.EVENT_READ)
