"""gunicorn's threaded worker with an event-driven front: only complete requests reach a thread.

Stock ``gthread`` hands every new connection to a request thread, which then blocks reading
it, so slow or stalled clients can hold every thread. Here the worker's main thread (its
poller) does all the waiting, within the bounds of :class:`Limits`:

* silent connections wait in the kernel (``TCP_DEFER_ACCEPT``); the TLS handshake runs
  without blocking once the ClientHello is in, all within ``handshake_timeout``;
* a request is buffered and framed (:mod:`~webhook.server.transport.framing`) and handed to a
  thread only once complete, within ``request_timeout`` of its first byte (400 for framing
  it cannot parse, 413 past ``max_body``);
* connections and buffered bytes per worker are bounded; past a bound the oldest
  connection not yet answered, else the least recently used idle one, is closed;
* the API server's plain POSTs skip gunicorn's parser (:mod:`~webhook.server.transport.direct`),
  and a small ``/mutate`` that never waits is answered by the poller itself (``Limits.inline``).

This module is the gunicorn glue (the loop, the requests; every bound and the order of
closing: docs/architecture.md, "The worker's transport"). The rest of the transport:

* the per-connection work: :class:`~webhook.server.transport.poller.Front`, over
  :mod:`~webhook.server.transport.conns`; accepting: :mod:`~webhook.server.transport.accepting`;
* which worker takes a connection: :mod:`~webhook.server.transport.shares`;
* a request thread's reads and one-send answer: :mod:`~webhook.server.transport.thread_io`,
  off the queue of :mod:`~webhook.server.transport.threads`.
"""

from __future__ import annotations

import errno
import functools
import os
import selectors
import ssl
import time
from collections import deque
from typing import Any

from gunicorn import http as _ghttp
from gunicorn import sock as _gsock
from gunicorn.workers import gthread as _gthread

from webhook.server.transport.accepting import MISSED_REPORT_INTERVAL, Accepting
from webhook.server.transport.conns import WAITING_FACTOR, Conn, Limits, Phase, pieces
from webhook.server.transport.direct import encode, run_app
from webhook.server.transport.poller import Front
from webhook.server.transport.shares import (
    Shares,
    Turns,
)
from webhook.server.transport.thread_io import Answering, OneSend, take_body
from webhook.server.transport.threads import Job, RequestThreads

#: The heartbeat gunicorn's master watches (``timeout``, 30 s) and the check that the master
#: is alive, at most this often: the loop goes round once per request.
HEARTBEAT = 1.0

__all__ = ["WAITING_FACTOR", "Limits", "Shares", "ThreadWorker", "worker_class"]

_BaseThreadWorker: Any = _gthread.ThreadWorker


class ThreadWorker(Accepting, _BaseThreadWorker):  # type: ignore[misc]
    """The worker (see the module text). :func:`worker_class` makes one with its limits."""

    limits = Limits()
    alive: bool  # gunicorn's: whether the worker goes on serving

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._front: Front  # made in run(), once the poller is
        self._turns = Turns(self.limits.shares)
        self._accept_pause_until = 0.0
        self._woke = 0.0  # when the poller last returned
        self._missed: set[int] = set()  # pids of workers that missed turns, not yet reported
        self._misses = 0  # how many turns they missed, not yet reported
        self._missed_reported = -MISSED_REPORT_INTERVAL
        self._addresses: dict[int, Any] = {}
        # read per request on the direct path (gunicorn's Config looks each up by name)
        self._keepalive = bool(self.cfg.keepalive)
        self._multiprocess = self.cfg.workers > 1
        self._here: deque[Job] = deque()  # requests the poller answers itself, in order

    # ----------------------------------------------------------------------------- the loop

    def run(self) -> None:
        self._front = Front(
            poller=self.poller,
            log=self.log,
            limits=self.limits,
            worker_connections=self.worker_connections,
            keepalive=self.cfg.keepalive or self.limits.request_timeout,
            tls_context=lambda: _gsock.ssl_context(self.cfg),
            on_request=self._dispatch,
            on_count=self._count,
            on_replied=self._replied,
        )
        self._turns.claim(os.getpid())
        self._defer_accept()
        self.poller.register(
            self.method_queue.fileno(), selectors.EVENT_READ, self.method_queue.run_callbacks
        )
        checked = -HEARTBEAT
        while self.alive:
            now = time.monotonic()
            if now - checked >= HEARTBEAT:  # not per request: a system call each
                self.notify()
                if not self.is_parent_alive():
                    break
                checked = now
            self._update_accepting()
            self._poll(self._timeout())
            self._front.expire()
            self._answer_here()
        self._shutdown()

    def _shutdown(self) -> None:
        self.set_accept_enabled(False)
        now = time.monotonic()
        # Kept-alive connections stay open briefly, for a request a client may be sending
        # already (answered with "Connection: close"); everything else runs to its deadline.
        for conn in list(self._front.t.idle):
            self._front.set_deadline(conn, min(conn.deadline, now + _gthread.STOP_KEEPALIVE_LINGER))
        for conn in list(self._front.t.open):
            if conn.phase is Phase.HANDSHAKE:
                self._front.close(conn)
        until = now + self.cfg.graceful_timeout
        while self._front.t.open and time.monotonic() < until:
            self.notify()
            self._poll(self._timeout())
            self._front.expire()
            self._answer_here()
        for conn in list(self._front.t.open):
            self._front.close(conn)
        self.tpool.shutdown(wait=False)
        self.poller.close()
        self.method_queue.close()
        for s in self.sockets:
            s.close()

    def _poll(self, timeout: float) -> None:
        self._turns.sleeping(self._accepting)  # whether a new connection wakes this worker
        try:
            events = self.poller.select(timeout)
        except OSError as e:
            if e.errno != errno.EINTR:
                raise
            return
        finally:
            self._woke = time.monotonic()
            self._turns.woke(self._woke)
        later = []
        for key, _mask in events:
            data = key.data
            if isinstance(data, Conn):
                self._front.on_event(data)
            else:
                later.append(key)
        for key in later:  # new connections after the ones already open
            key.data(key.fileobj)
        self._answer_here()

    def _timeout(self) -> float:
        if self._here:
            return 0.0
        due = self._front.t.next_due()
        now = time.monotonic()
        if self._accept_pause_until > now:  # accepting resumes then
            due = self._accept_pause_until if due is None else min(due, self._accept_pause_until)
        if due is None:
            return 1.0
        return max(0.0, min(1.0, due - now))

    def _update_accepting(self) -> None:
        can = self.alive and time.monotonic() >= self._accept_pause_until
        can = can and (
            len(self._front.t.full) < self.worker_connections
            or len(self._front.t.full) > self._front.t.busy
        )
        if can != self._accepting:
            self.set_accept_enabled(can)

    # ----------------------------------------------------------------------------- requests

    def _dispatch(self, conn: Conn) -> None:
        framer = conn.framer
        assert framer is not None and framer.head is not None
        end = framer.end
        # A body of known length goes to the thread apart from the head (see thread_io.take_body).
        head = framer.head
        known = not head.chunked
        start = end - (head.length or 0) if known else end
        path = head.target.partition(b"?")[0]
        direct = (
            head.plain
            and known
            and head.method == b"POST"
            and path in self.limits.direct_paths
            and isinstance(conn.server, tuple)
        )
        with memoryview(conn.buf) as view:
            data = bytes(view[:start])
            body = bytes(view[start:end]) if known else None
        del conn.buf[:end]
        conn.framer = None
        conn.continued = False
        conn.phase = Phase.BUSY
        self._front.want(conn, 0)
        self._front.account(conn)
        self._front.t.busy += 1
        job = (conn, data, body, head.target if direct else None)
        if (
            direct
            and path in self.limits.inline_paths
            and body is not None
            and len(body) <= self.limits.inline_body
            and self.limits.inline is not None
        ):
            self._here.append(job)  # answered by :meth:`_answer_here`, after this event
        else:
            self.tpool.submit(job)
        self._front.resume()

    def _answer_here(self) -> None:
        """Answer the requests :meth:`_dispatch` left to the poller, one after another (one
        answered may frame the next on its connection, which joins the queue: a loop, never
        a recursion). One that would wait goes to the request threads, from its start."""
        inline = self.limits.inline
        while self._here:
            job = self._here.popleft()
            conn, _, body, target = job
            assert inline is not None and body is not None and target is not None  # _dispatch's
            if conn.closed:  # closed since (the worker stopping): no longer being served
                self._front.t.busy -= 1
                continue
            try:
                answered = inline(functools.partial(self._respond, conn, target, body))
            except Exception:  # a bug here must cost one connection, not the worker
                self.log.exception("answering on the poller failed for %s", conn.client)
                self._front.t.busy -= 1
                self._front.close(conn)
                continue
            if answered is None:
                self.tpool.submit(job)
                continue
            self._front.t.busy -= 1
            conn.served += 1
            self._front.reply(conn, *answered)

    def _replied(self, conn: Conn) -> None:
        """The poller has written its answer to ``conn``'s request."""
        self._next_request(conn, conn.keep)

    def get_thread_pool(self) -> RequestThreads:
        """The request threads (gunicorn's hook, called as the worker starts)."""
        return RequestThreads(self.cfg.threads, self._serve, self._answered, self.log)

    def _answered(self, conn: Conn, keep: bool) -> None:
        """From a request thread: hand ``conn`` back to the poller."""
        self.method_queue.defer(self._served, conn, keep)

    def _served(self, conn: Conn, keep: bool) -> None:
        """Back on the poller after a request thread answered (or failed)."""
        self._front.t.busy -= 1
        conn.served += 1
        if keep:
            try:
                conn.sock.setblocking(False)  # the thread gave it a timeout
            except OSError:
                keep = False
        self._next_request(conn, keep)

    def _next_request(self, conn: Conn, keep: bool) -> None:
        """``conn``'s request is answered: close it, or wait for (or frame) the next one."""
        if not keep:
            self._front.close(conn)
            return
        now = time.monotonic()
        if conn.buf:  # the client sent its next request already
            conn.phase = Phase.REQUEST
            self._front.set_deadline(conn, now + self.limits.request_timeout)
            self._front.want(conn, selectors.EVENT_READ)
            self._front.frame(conn)
        else:
            self._front.to_idle(conn, now + self._front.keepalive)
        if (
            not conn.closed
            and conn.phase not in (Phase.BUSY, Phase.REPLY)
            and conn.tls
            and conn.sock.pending()
        ):
            self._front.read(conn)

    def _serve(
        self, conn: Conn, data: bytes, body: bytes | None, direct: bytes | None = None
    ) -> bool:
        """Serve one complete request (a request thread): ``data`` is its head and ``body``
        its body, or ``data`` the whole request when its body is chunked (``body`` None);
        ``direct``: its target, when :meth:`_direct` answers it. True: keep the connection."""
        req = None
        try:
            conn.sock.settimeout(self.limits.request_timeout)  # bounds writing the answer
            if direct is not None and body is not None:
                return self._direct(conn, direct, body)
            parser = _ghttp.get_parser(self.cfg, pieces(data), conn.client)
            req = next(parser)
            if not req:
                return False
            if body is not None and not take_body(req, body):
                self.log.debug("%s: gunicorn reads another body length", conn.client)
                return False
            req._expected_100_continue = False  # the poller has sent it
            out = OneSend(conn.sock)
            keep = self.handle_request(req, Answering(out, conn.client, conn.server))
            out.flush()
            # A body the poller framed is all here: nothing to drain before the next request.
            return bool(keep) and (body is not None or bool(parser.finish_body()))
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

    def _direct(self, conn: Conn, target: bytes, body: bytes) -> bool:
        """Answer a plain POST to one of ``direct_paths`` on a request thread
        (:mod:`webhook.server.transport.direct`). True: keep the connection."""
        out, keep = self._respond(conn, target, body)
        conn.sock.sendall(out)
        return keep

    def _respond(self, conn: Conn, target: bytes, body: bytes) -> tuple[bytes, bool]:
        """The direct path's answer and whether to keep the connection: gunicorn's request
        count and keep-alive rules, counted once the app has answered (a request the poller
        gave up on is counted by the request thread that answers it)."""
        answer = run_app(self.wsgi, conn, target, body, self._multiprocess)
        self.nr += 1
        if self.nr >= self.max_requests and self.alive:
            self.log.info("Autorestarting worker after current request.")
            self.alive = False
        keep = bool(
            self.alive and self._keepalive and len(self.keepalived_conns) < self.max_keepalived
        )
        return encode(answer, keep), keep


def worker_class(limits: Limits) -> type[ThreadWorker]:
    """The gunicorn ``worker_class``: :class:`ThreadWorker` with these limits."""

    class Worker(ThreadWorker):
        pass

    Worker.limits = limits
    Worker.__name__ = Worker.__qualname__ = "ThreadWorker"
    return Worker
