"""The real server under hostile connections, with client authentication and a metrics port.

One server for the module, with 2 workers of only 2 request threads each and deadlines of a
few seconds (``--handshake-timeout``, ``--request-timeout``): 650 hostile connections at once
(silent TCP, stalled TLS handshakes, headers or bodies sent a byte at a time) would hold every
thread of a server that read requests on its threads. Behaviour is asserted, not latency: a
normal ``/mutate`` is answered while all of them are still connected, and then the server
closes every one of them (the ones still sending included). ``bench/bench_hostile.py``
measures the latency under such attacks.
"""

from __future__ import annotations

import contextlib
import json
import re
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clientcerts import client_ca
from helpers import JOBSET, POLICY, load, patch_of, review
from running import (
    SERVER_NAME,
    Server,
    ServerFailed,
    TLSConn,
    free_port,
    raise_fd_limit,
    serving,
    start,
)

#: Seconds, for the handshake and for a whole request. Silent connections wait in the kernel
#: about as long before the server sees them (TCP_DEFER_ACCEPT), then as long again.
DEADLINE = 4
SILENT, STALLED, SLOW_HEADERS, SLOW_BODIES = 500, 50, 50, 50
HOSTILE = SILENT + STALLED + SLOW_HEADERS + SLOW_BODIES
#: Only a wedged server misses these (they are not latency goals).
ANSWER_BOUND = 20.0
CLOSE_BOUND = 60.0


@pytest.fixture(scope="module")
def hsrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    raise_fd_limit(4 * HOSTILE + 256)  # the clients' sockets here; the server inherits it
    tmp = tmp_path_factory.mktemp("hostile")
    ca, client = client_ca(tmp / "apiserver", "kube-apiserver")
    args = [
        "--workers=2",
        "--threads=2",
        f"--handshake-timeout={DEADLINE}",
        f"--request-timeout={DEADLINE}",
        f"--client-ca={ca}",
    ]
    with serving(tmp, POLICY, args, metrics_port=free_port(), client=client) as server:
        yield server


def _counter(srv: Server, name: str, **labels: str) -> float:
    status, body = srv.plain("GET", "/metrics")
    assert status == 200
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _client_hello(srv: Server) -> bytes:
    """The bytes of a real ClientHello for the server (made in memory, never sent whole)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = srv.context().wrap_bio(incoming, outgoing, server_hostname=SERVER_NAME)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def _tls(srv: Server) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", srv.port), 10)
    return srv.context().wrap_socket(raw, server_hostname=SERVER_NAME)


def _still_open(sock: socket.socket) -> bool:
    """Whether the server has neither closed nor answered this connection."""
    if isinstance(sock, ssl.SSLSocket):  # TLS: session tickets may be waiting, answers not
        sock.setblocking(False)
        try:
            sock.recv(1)
        except ssl.SSLWantReadError:
            return True
        except OSError:
            return False
        finally:
            sock.settimeout(10)
        return False
    sock.setblocking(False)
    try:
        socket.socket.recv(sock, 1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(10)
    return False


def _wait_closed(socks: list[socket.socket], bound: float) -> list[socket.socket]:
    """Read (raw, discarding) until the server has closed each; returns those still open."""
    left = set(socks)
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s.fileno(), selectors.EVENT_READ, s)
    until = time.monotonic() + bound
    while left and time.monotonic() < until:
        for key, _ in sel.select(0.5):
            s = key.data
            try:
                data = socket.socket.recv(s, 65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(key.fd)
                left.discard(s)
    sel.close()
    return list(left)


def test_hostile_connections_hold_no_request_thread(hsrv: Server) -> None:
    cut_before = _counter(hsrv, "karta_webhook_connections_cut_total")
    hello = _client_hello(hsrv)
    socks: list[socket.socket] = []
    slow: list[ssl.SSLSocket] = []
    stop = threading.Event()
    lock = threading.Lock()  # an SSL connection is used by one thread at a time
    told = _tls(hsrv)  # one more slow body, read through TLS at the end
    try:
        told.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
        # Slowest to set up first: their deadlines start with their first byte.
        for _ in range(SLOW_HEADERS):
            s = _tls(hsrv)
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: karta-webhook\r\nX-Slow: ")
            slow.append(s)
        for _ in range(SLOW_BODIES):
            s = _tls(hsrv)
            s.sendall(
                b"POST /mutate HTTP/1.1\r\nHost: karta-webhook\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
            )
            slow.append(s)
        for _ in range(STALLED):
            s = socket.create_connection(("127.0.0.1", hsrv.port), 10)
            s.sendall(hello[: len(hello) // 2])
            socks.append(s)
        for _ in range(SILENT):
            socks.append(socket.create_connection(("127.0.0.1", hsrv.port), 10))
        socks += slow

        def trickle() -> None:  # one more byte on every slow connection, twice a second
            while not stop.wait(0.5):
                with lock:
                    for s in slow:
                        with contextlib.suppress(OSError, ValueError):
                            s.send(b"a")

        t = threading.Thread(target=trickle, daemon=True)
        t.start()

        # With every hostile connection in place, a normal call is answered...
        r = hsrv.admit("/mutate", review(load(JOBSET)), timeout=ANSWER_BOUND)
        assert r["allowed"] is True and patch_of(r)
        # ...while every one of them is still connected (so none had to be cut to make room)
        with lock:
            assert [s for s in socks if not _still_open(s)] == []
        # and then the server cuts them all at their deadline (the trickling ones included),
        assert _wait_closed(socks, CLOSE_BOUND) == []
        # telling those that were sending a request why.
        told.settimeout(CLOSE_BOUND)
        answer = b""
        while chunk := told.recv(4096):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 ") and b"Connection: close" in answer
    finally:
        stop.set()
        for s in [*socks, told]:
            s.close()
    cut = _counter(hsrv, "karta_webhook_connections_cut_total") - cut_before
    assert cut >= HOSTILE
    assert _counter(hsrv, "karta_webhook_connections_cut_total", reason="request_timeout") >= (
        SLOW_HEADERS + SLOW_BODIES
    )
    assert _counter(hsrv, "karta_webhook_connections_cut_total", reason="handshake_timeout") >= (
        SILENT + STALLED
    )
    assert hsrv.admit("/mutate", review(load(JOBSET)))["allowed"] is True


# ------------------------------------------------------------------------------ bodies


def _raw_exchange(srv: Server, data: bytes, then: bytes = b"") -> bytes:
    """Send ``data`` over TLS (with the client certificate), read one answer, send ``then``."""
    s = _tls(srv)
    s.settimeout(30)
    try:
        s.sendall(data)
        answer = s.recv(65536)
        if then:
            s.sendall(then)
            answer += b"||" + s.recv(65536)
        return answer
    finally:
        s.close()


def test_chunked_bodies(hsrv: Server) -> None:
    body = json.dumps(review(load(JOBSET))).encode()
    conn = hsrv.connect(30)
    try:  # chunked within the cap: served
        pieces = [body[i : i + 1000] for i in range(0, len(body), 1000)]
        conn.request(
            "POST",
            "/mutate",
            body=iter(pieces),
            headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
            encode_chunked=True,
        )
        resp = conn.getresponse()
        out = json.loads(resp.read())
        assert resp.status == 200 and patch_of(out["response"])
        # chunked over the cap: 413, after the body was read (so the client sees the answer)
        blob = b" " * (1 << 16)
        conn.request(
            "POST",
            "/mutate",
            body=iter([blob] * 128),  # 8 MiB
            headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
            encode_chunked=True,
        )
        resp = conn.getresponse()
        text = resp.read()
        assert resp.status == 413 and b"larger than" in text
    finally:
        conn.close()


def test_expect_continue(hsrv: Server) -> None:
    body = json.dumps(review(load(JOBSET))).encode()
    head = (
        b"POST /mutate HTTP/1.1\r\nHost: karta-webhook\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
    )
    answer = _raw_exchange(hsrv, head % len(body), body)
    first, _, final = answer.partition(b"||")
    assert first == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert final.startswith(b"HTTP/1.1 200 ") and b"100 Continue" not in final
    # over the cap: 413 at once, without asking for the body
    answer = _raw_exchange(hsrv, head % (8 << 20))
    assert answer.startswith(b"HTTP/1.1 413 ")


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"POST /mutate HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", b"400"),
        (b"POST /mutate HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", b"400"),
        (b"POST /mutate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", b"400"),
        (b"GET /healthz HTTP/1.1\r\nX: " + b"a" * (70 << 10) + b"\r\n\r\n", b"431"),
    ],
)
def test_bad_framing_is_a_4xx(hsrv: Server, head: bytes, status: bytes) -> None:
    assert _raw_exchange(hsrv, head).startswith(b"HTTP/1.1 " + status + b" ")


NEXT = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
CHUNKED_POST = b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    ("data", "status", "says"),
    [  # what gunicorn's parser refuses, refused by the poller's framer before any thread
        (
            b"POST /mutate HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
            b"400",
            b"more than one Content-Length",
        ),
        (b"GET /healthz HTTP/1.1\r\nX: a\rb\r\n\r\n", b"400", b"control character"),
        (b"GET /healthz HTTP/1.1\r\nX: a\nb\r\n\r\n", b"400", b"bare LF"),
        (b"GET /healthz HTTP/1.1\r\nX: a\x00b\r\n\r\n", b"400", b"control character"),
        (
            b"POST /mutate HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            b"400",
            b"Transfer-Encoding on an HTTP/1.0 request",
        ),
        (CHUNKED_POST + b"2 \r\n{}\r\n0\r\n\r\n", b"400", b"invalid chunk size"),
        (
            CHUNKED_POST + b"2\r\n{}\r\n0\r\nContent-Length: 5\r\n\r\n",
            b"400",
            b"Content-Length is not allowed in a trailer",
        ),
        (b"GET /healthz HTTP/1.1\r\nX: a\r\n b\r\n\r\n", b"400", b"obsolete line folding"),
        (b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", b"400", b"invalid header name"),
        (b"GET /healthz HTTP/1.1\r\nX[1]: a\r\n\r\n", b"400", b"invalid header name"),
        (
            b"POST /mutate HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
            b"400",
            b"must end with chunked",
        ),
        (
            b"POST /mutate HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            b"501",
            b"transfer coding not supported",
        ),
        (
            b"POST /mutate HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"0\r\n\r\n",
            b"400",
            b"both Content-Length and Transfer-Encoding",
        ),
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", b"400", b"more than one Host"),
        (b"GET /healthz HTTP/1.1\nHost: x\n\n", b"400", b"bare LF"),
        (  # gunicorn's limits (as the server sets them), applied by the framer
            b"GET /healthz?%s HTTP/1.1\r\n\r\n" % (b"a" * 8190),
            b"414",
            b"request line longer than 8190 bytes",
        ),
        (b"GET /healthz HTTP/1.1\r\n" + b"X: a\r\n" * 101 + b"\r\n", b"431", b"more than 100"),
    ],
)
def test_ambiguous_framing_is_refused_and_what_follows_is_not_answered(
    hsrv: Server, data: bytes, status: bytes, says: bytes
) -> None:
    """Each is sent with a valid request pipelined after it, in one write: the poller answers
    the first (its own plain-text answer, not gunicorn's) and closes; the second is never read
    as a request."""
    s = _tls(hsrv)
    s.settimeout(30)
    try:
        s.sendall(data + NEXT)
        answers = b""
        while chunk := s.recv(65536):  # to the server's end of the connection
            answers += chunk
    finally:
        s.close()
    assert answers.startswith(b"HTTP/1.1 " + status + b" "), answers
    head, _, body = answers.partition(b"\r\n\r\n")
    assert b"Connection: close" in head and b"Content-Type: text/plain" in head
    assert says in body  # the framer's words: refused in the poller
    assert len(re.findall(rb"HTTP/1\.[01] [0-9]{3} ", answers)) == 1 and b"ok\n" not in body


def test_gunicorn_parses_with_its_python_parser(hsrv: Server) -> None:
    serving = [line for line in hsrv.log.read_text().splitlines() if '"serving"' in line]
    assert serving and json.loads(serving[0])["httpParser"] == "python", serving


def test_keep_alive_and_pipelining(hsrv: Server) -> None:
    conn = hsrv.connect()
    try:
        for _ in range(3):
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() == b"ok\n"
    finally:
        conn.close()
    s = _tls(hsrv)
    s.settimeout(10)
    try:
        s.sendall(
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        answers = b""
        while chunk := s.recv(65536):
            answers += chunk
    finally:
        s.close()
    assert answers.count(b"HTTP/1.1 200 ") == 2


def test_pipelined_bodies_each_reach_their_own_request(hsrv: Server) -> None:
    """Requests with bodies sent in one write, of known length and chunked: each is answered
    for its own body (the poller hands a known-length body over apart from its head)."""

    def post(uid: str, *, chunked: bool = False, close: bool = False) -> bytes:
        rv = review(load(JOBSET))
        rv["request"]["uid"] = uid
        body = json.dumps(rv).encode()
        head = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        head += b"Connection: close\r\n" if close else b""
        if chunked:
            return head + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (
                len(body),
                body,
            )
        return head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    s = _tls(hsrv)
    s.settimeout(10)
    try:
        s.sendall(post("one") + post("two", chunked=True) + post("three", close=True))
        answers = b""
        while chunk := s.recv(65536):
            answers += chunk
    finally:
        s.close()
    uids = [json.loads(a.split(b"\r\n\r\n", 1)[1])["response"] for a in _split(answers)]
    assert [r["uid"] for r in uids] == ["one", "two", "three"]
    assert all(patch_of(r) for r in uids)


def _split(answers: bytes) -> list[bytes]:
    """HTTP/1.1 answers one after another, each with a Content-Length, one by one."""
    out = []
    while answers:
        head, _, rest = answers.partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        assert found is not None, head
        length = int(found.group(1))
        out.append(head + b"\r\n\r\n" + rest[:length])
        answers = rest[length:]
    return out


# ------------------------------------------------------------------------------ callers


def test_a_client_certificate_of_the_ca_is_accepted(hsrv: Server) -> None:
    r = hsrv.admit("/mutate", review(load(JOBSET)))
    assert r["allowed"] is True and patch_of(r)


def test_a_client_certificate_of_another_ca_is_refused(hsrv: Server, tmp_path: Path) -> None:
    _, intruder = client_ca(tmp_path / "other", "kube-apiserver")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        # TLS 1.3: the client may finish its side first and see the alert on the first read
        hsrv.request("POST", "/mutate", json.dumps(review(load(JOBSET))).encode(), client=intruder)


def test_no_client_certificate_gets_probes_only(hsrv: Server) -> None:
    ctx = ssl.create_default_context(cafile=str(hsrv.ca))  # no certificate to present

    def call(method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        conn = TLSConn(hsrv.port, ctx, 10)
        try:
            conn.request(method, path, body=body)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    body = json.dumps(review(load(JOBSET))).encode()
    assert call("POST", "/mutate", body) == (403, b"client certificate required\n")
    assert call("POST", "/validate", body)[0] == 403
    assert call("GET", "/healthz") == (200, b"ok\n")
    assert call("GET", "/readyz")[0] == 200


def test_client_ca_that_does_not_load_fails_startup(tmp_path: Path) -> None:
    (tmp_path / "bad-ca.crt").write_text("garbage\n")
    with pytest.raises(ServerFailed, match=r"cannot load client CA .*bad-ca\.crt"):
        start(tmp_path, POLICY, [f"--client-ca={tmp_path / 'bad-ca.crt'}"])


# ------------------------------------------------------------------------------ metrics port


def test_metrics_port_serves_metrics_and_probes_only(hsrv: Server) -> None:
    hsrv.admit("/mutate", review(load(JOBSET)))
    status, body = hsrv.plain("GET", "/metrics")
    assert status == 200 and b"karta_webhook_requests_total" in body
    assert hsrv.plain("GET", "/healthz") == (200, b"ok\n")
    assert hsrv.plain("GET", "/readyz")[0] == 200
    assert hsrv.plain("POST", "/mutate")[0] == 404
    assert hsrv.plain("POST", "/validate")[0] == 404


def test_webhook_port_serves_the_webhooks_not_metrics(hsrv: Server) -> None:
    assert hsrv.request("GET", "/metrics")[0] == 404
    assert hsrv.admit("/mutate", review(load(JOBSET)))["allowed"] is True


# ------------------------------------------------------------------------------ bound


def test_past_the_connection_bounds_the_oldest_unanswered_connections_are_closed(
    tmp_path: Path,
) -> None:
    # Deadlines far away: only the bounds can close these connections during the test.
    args = ["--workers=1", "--max-connections=10", "--handshake-timeout=300",
            "--request-timeout=300"]  # fmt: skip
    srv = start(tmp_path, POLICY, args)
    hello = _client_hello(srv)
    stalled: list[socket.socket] = []
    slow: list[socket.socket] = []
    keep = srv.connect()
    try:
        keep.request("GET", "/healthz")  # a client that has had an answer
        assert keep.getresponse().read() == b"ok\n"
        # Half a ClientHello: cheap (no TLS yet), up to 4 x --max-connections of them.
        for _ in range(60):
            s = socket.create_connection(("127.0.0.1", srv.port), 10)
            s.sendall(hello[: len(hello) // 2])
            stalled.append(s)
        assert _wait_closed(stalled[:20], CLOSE_BOUND) == []  # the oldest made room
        assert all(_still_open(s) for s in stalled[-20:])
        # TLS connections sending a request: up to --max-connections with the kept-alive one.
        for _ in range(15):
            s = _tls(srv)
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
            slow.append(s)
        assert srv.admit("/mutate", review(load(JOBSET)), timeout=ANSWER_BOUND)["allowed"]
        assert _wait_closed(slow[:7], CLOSE_BOUND) == []  # the oldest unanswered made room
        assert all(_still_open(s) for s in slow[-3:])
        keep.request("GET", "/healthz")  # and the kept-alive one was spared
        assert keep.getresponse().read() == b"ok\n"
    finally:
        keep.close()
        for s in stalled + slow:
            s.close()
        srv.stop()


def test_silent_connections_wait_in_the_kernel_not_in_a_worker(tmp_path: Path) -> None:
    """With a bound of 5 connections (and 20 waiting for their ClientHello), 100 connections
    that never send a byte take no worker's place: none is evicted, and /mutate is answered."""
    args = ["--workers=1", "--max-connections=5"]
    srv = start(tmp_path, POLICY, args, metrics_port=free_port())
    socks = []
    try:
        for _ in range(100):
            socks.append(socket.create_connection(("127.0.0.1", srv.port), 10))
        assert srv.admit("/mutate", review(load(JOBSET)), timeout=ANSWER_BOUND)["allowed"]
        assert all(_still_open(s) for s in socks)
        assert _counter(srv, "karta_webhook_connections_cut_total", reason="evicted") == 0
    finally:
        for s in socks:
            s.close()
        srv.stop()
