"""The worker's request thread: the body it takes as the poller framed it
(:func:`webhook.server.transport.thread_io.take_body`) and its write path (:class:`webhook.server.transport.thread_io.OneSend`); the
server's wire is checked in ``tests/e2e/``."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from gunicorn import http as gunicorn_http
from gunicorn.config import Config

from webhook.server.transport.thread_io import OneSend, take_body


@pytest.fixture
def pair() -> Iterator[tuple[OneSend, socket.socket]]:
    a, b = socket.socketpair()
    b.settimeout(5)
    with a, b:
        yield OneSend(a), b


def _pending(sock: socket.socket) -> bytes:
    sock.setblocking(False)
    try:
        return sock.recv(1 << 16)
    except BlockingIOError:
        return b""
    finally:
        sock.settimeout(5)


def test_the_head_goes_out_with_the_first_piece_of_the_body(
    pair: tuple[OneSend, socket.socket],
) -> None:
    out, peer = pair
    out.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    assert _pending(peer) == b""  # held
    out.sendall(memoryview(b"body"))
    assert peer.recv(100) == b"HTTP/1.1 200 OK\r\n\r\nbody"
    out.sendall(b" and more")
    assert peer.recv(100) == b" and more"
    out.flush()
    assert _pending(peer) == b""


def test_a_head_without_a_body_goes_out_on_flush(pair: tuple[OneSend, socket.socket]) -> None:
    out, peer = pair
    out.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
    out.flush()
    assert peer.recv(100) == b"HTTP/1.1 204 No Content\r\n\r\n"
    out.flush()
    assert _pending(peer) == b""


def test_any_other_use_of_the_socket_sends_the_head_first(
    pair: tuple[OneSend, socket.socket],
) -> None:
    out, peer = pair
    out.sendall(b"head")
    out.shutdown(socket.SHUT_WR)  # as gunicorn's close_graceful after a failed body
    assert peer.recv(100) == b"head"
    assert peer.recv(100) == b""  # then the end


def _request(head: bytes) -> Any:
    return next(gunicorn_http.get_parser(Config(), iter([head]), ("127.0.0.1", 1)))


def test_a_framed_body_of_the_length_gunicorn_reads_is_read_as_it_is() -> None:
    body = b'{"kind": "AdmissionReview"}'
    req = _request(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
    assert take_body(req, body)
    assert req.body.read(len(body)) is body  # not a copy
    assert req.body.read() == b""


@pytest.mark.parametrize(
    "head",
    [
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n",  # another length
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
)
def test_a_body_gunicorn_frames_otherwise_is_not_taken(head: bytes) -> None:
    req = _request(head)
    before = req.body
    assert not take_body(req, b"four")
    assert req.body is before
