"""What a request thread reads and writes besides gunicorn: the body the poller framed, handed
to gunicorn's request as it is (:func:`take_body`), and the socket gunicorn writes the answer
on, holding the head until the body so both go out in one send (:class:`OneSend`). Used by
:class:`webhook.server.transport.worker.ThreadWorker`'s request threads.
"""

from __future__ import annotations

import io
from typing import Any

from gunicorn.http import body as _gbody


def take_body(req: Any, body: bytes) -> bool:
    """Give ``req`` the body the poller framed, to read as it is: through gunicorn's own
    readers it would be copied several times over (the cost for a 3 MB body: see
    docs/performance.md). Only when gunicorn, parsing the head, reads a body of the same length;
    otherwise the two disagree on where the request ends, and False: the connection closes."""
    reader: Any = getattr(req.body, "reader", None)
    if type(reader) is not _gbody.LengthReader or reader.length != len(body):
        return False
    req.body = io.BytesIO(body)
    return True


class OneSend:
    """The socket as gunicorn writes an answer on it, holding the answer's head until its
    body's first piece, so that both go out in one send: a small answer is then one TLS
    record and one TCP segment where gunicorn makes two of each (and two system calls, and
    two wake-ups of the client). Every other use of the socket (a later write, closing it,
    sendfile, its descriptor) sends what is held first, so the bytes keep their order;
    :meth:`flush` sends a head that had no body (HEAD, 204, 304)."""

    __slots__ = ("_head", "_started", "sock")

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self._head: bytes | None = None  # the first write, while held
        self._started = False  # whether the first write (the head) has come

    def sendall(self, data: bytes) -> None:
        if not self._started:
            self._started = True
            self._head = bytes(data)
            return
        head, self._head = self._head, None
        self.sock.sendall(head + data if head else data)

    def flush(self) -> None:
        head, self._head = self._head, None
        if head:
            self.sock.sendall(head)

    def __getattr__(self, name: str) -> Any:
        self.flush()
        return getattr(self.sock, name)


class Answering:
    """What gunicorn's ``handle_request`` reads of a connection, writing through a
    :class:`OneSend`."""

    __slots__ = ("client", "server", "sock")

    def __init__(self, sock: OneSend, client: Any, server: Any) -> None:
        self.sock, self.client, self.server = sock, client, server
