"""The worker's write path: :class:`webhook.worker.OneSend` (the server's wire is checked in
``tests/e2e/test_server.py``)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from webhook.worker import OneSend


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
