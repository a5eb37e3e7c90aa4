"""Where an HTTP/1.1 request ends in the bytes read from a connection (RFC 9112 sections 2-7).

The worker's poller reads each connection without blocking and hands a request to a request
thread only once it is complete; :class:`Framer` tells, from the bytes buffered so far, whether
they hold a whole request (head and body), the start of one whose body is over the cap, or
something that is not HTTP/1.1 framing at all. It reads only what framing needs (the request
line, ``Content-Length``, ``Transfer-Encoding``, ``Expect``): gunicorn's parser validates the
complete request again in the thread. Pure: no I/O, incremental (every byte is looked at a
bounded number of times however the request is split into reads).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: Longest chunk-size line (size, extensions, CRLF) accepted in a chunked body.
MAX_CHUNK_LINE = 4096
#: Chunked framing may take more bytes than the data it carries; past this many raw body bytes
#: per allowed data byte, a chunked body is oversized whatever it decodes to.
RAW_OVERHEAD = 2

_HEX = frozenset(b"0123456789abcdefABCDEF")
_DIGITS = frozenset(b"0123456789")


class Verdict(enum.Enum):
    """What the buffered bytes are, so far."""

    MORE = "more"  #: an incomplete request: read more
    COMPLETE = "complete"  #: a whole request ends at :attr:`Framer.end`
    DRAINED = "drained"  #: the body over the cap has been read to its end (answer 413)
    BAD = "bad"  #: not a request we can frame: answer :attr:`Framer.error` and close


@dataclass(frozen=True)
class Head:
    """What framing needs of a request's head."""

    method: bytes
    target: bytes
    version: bytes
    length: int | None  #: Content-Length, when given
    chunked: bool
    expect_continue: bool  #: ``Expect: 100-continue`` on HTTP/1.1


class _State(enum.Enum):
    HEAD = 1
    BODY = 2  # Content-Length body kept
    SKIP = 3  # Content-Length body over the cap, read and dropped
    CHUNK_SIZE = 4
    CHUNK_DATA = 5
    CHUNK_CRLF = 6
    TRAILER = 7
    DONE = 8


class Framer:
    """Frames one request in a growing buffer.

    Call :meth:`scan` with the connection's buffer after each read; positions are relative to
    that buffer. Once :attr:`oversized` is set the body will not be kept: call :meth:`discard`
    after each scan to drop the bytes already framed (the buffer shrinks, the framer follows).
    :attr:`drain_exceeded` says the oversized body is longer than the caller wants to read
    before answering.
    """

    def __init__(self, *, max_head: int, max_body: int, drain_limit: int) -> None:
        self.max_head = max_head
        self.max_body = max_body
        self.drain_limit = drain_limit
        self.head: Head | None = None
        #: Offset just after the request (valid when :meth:`scan` says COMPLETE or DRAINED).
        self.end = 0
        #: Status and text to answer when :meth:`scan` says BAD.
        self.error: tuple[int, str] = (400, "bad request")
        self.oversized = False
        self.drain_exceeded = False
        self._state = _State.HEAD
        self._pos = 0  # next byte to frame
        self._searched = 0  # the head's terminator is not before this offset
        self._remaining = 0  # bytes left of a Content-Length body or of a chunk's data
        self._decoded = 0  # chunk data bytes so far
        self._raw = 0  # body bytes framed so far (discarded ones included)
        self._trailer = 0  # trailer bytes so far

    @property
    def started(self) -> bool:
        """Whether any byte of a request is framed or waiting (for the caller's deadline)."""
        return self._state is not _State.HEAD or self._searched > 0

    def scan(self, buf: bytes | bytearray) -> Verdict:
        if self._state is _State.HEAD:
            verdict = self._scan_head(buf)
            if verdict is not None:
                return verdict
        if self._state is _State.BODY:
            return Verdict.COMPLETE if len(buf) >= self.end else Verdict.MORE
        if self._state is _State.SKIP:
            take = min(self._remaining, len(buf) - self._pos)
            self._pos += take
            self._remaining -= take
            self._raw += take
            if self._remaining:
                return Verdict.MORE
            self._state = _State.DONE
            self.end = self._pos
            return Verdict.DRAINED
        if self._state is _State.DONE:
            return Verdict.DRAINED if self.oversized else Verdict.COMPLETE
        return self._scan_chunks(buf)

    def discard(self, buf: bytearray) -> None:
        """Drop the framed bytes of an oversized request from ``buf``."""
        if self.oversized and self._pos:
            del buf[: self._pos]
            self.end = max(0, self.end - self._pos)
            self._pos = 0

    # ----------------------------------------------------------------------------- internals

    def _bad(self, status: int, text: str) -> Verdict:
        self.error = (status, text)
        return Verdict.BAD

    def _scan_head(self, buf: bytes | bytearray) -> Verdict | None:
        i = buf.find(b"\r\n\r\n", max(0, self._searched - 3))
        if i < 0:
            self._searched = len(buf)
            if len(buf) > self.max_head:
                return self._bad(431, "request header fields too large")
            return Verdict.MORE
        end = i + 4
        if end > self.max_head:
            return self._bad(431, "request header fields too large")
        lines = bytes(buf[:i]).split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2].startswith(b"HTTP/1."):
            return self._bad(400, "invalid request line")
        method, target, version = parts
        lengths: list[bytes] = []
        codings: list[bytes] = []
        expect = False
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip(b" \t"):
                return self._bad(400, "invalid header line")
            name = name.lower()
            value = value.strip(b" \t")
            if name == b"content-length":
                lengths += [v.strip(b" \t") for v in value.split(b",")]
            elif name == b"transfer-encoding":
                codings += [c.strip(b" \t").lower() for c in value.split(b",")]
            elif name == b"expect" and value.lower() == b"100-continue":
                expect = version == b"HTTP/1.1"
        length: int | None = None
        if codings:
            if lengths:
                return self._bad(400, "both Content-Length and Transfer-Encoding")
            if codings[-1] != b"chunked":
                return self._bad(400, "Transfer-Encoding must end with chunked")
            if len(codings) > 1:
                return self._bad(501, "transfer coding not supported")
        elif lengths:
            if any(not v or not set(v) <= _DIGITS for v in lengths) or len(set(lengths)) > 1:
                return self._bad(400, "invalid Content-Length")
            length = int(lengths[0])
        self.head = Head(method, target, version, length, bool(codings), expect)
        self._pos = end
        if codings:
            self._state = _State.CHUNK_SIZE
        elif length is not None and length > self.max_body:
            self.oversized = True
            self.drain_exceeded = length > self.drain_limit
            self._state = _State.SKIP
            self._remaining = length
        elif length:
            self._state = _State.BODY
            self.end = end + length
        else:
            self._state = _State.DONE
            self.end = end
            return Verdict.COMPLETE
        return None

    def _scan_chunks(self, buf: bytes | bytearray) -> Verdict:
        n = len(buf)
        while True:
            state = self._state
            if state is _State.CHUNK_SIZE:
                j = buf.find(b"\r\n", self._pos, self._pos + MAX_CHUNK_LINE)
                if j < 0:
                    if n - self._pos >= MAX_CHUNK_LINE:
                        return self._bad(400, "chunk size line too long")
                    return Verdict.MORE
                size = bytes(buf[self._pos : j]).split(b";", 1)[0].rstrip(b" \t")
                if not size or len(size) > 15 or not set(size) <= _HEX:
                    return self._bad(400, "invalid chunk size")
                self._advance(j + 2)
                self._remaining = int(size, 16)
                self._state = _State.CHUNK_DATA if self._remaining else _State.TRAILER
            elif state is _State.CHUNK_DATA:
                take = min(self._remaining, n - self._pos)
                self._advance(self._pos + take)
                self._remaining -= take
                self._decoded += take
                if self._decoded > self.max_body or self._raw > RAW_OVERHEAD * self.max_body:
                    self.oversized = True
                if self._remaining:
                    return Verdict.MORE
                self._state = _State.CHUNK_CRLF
            elif state is _State.CHUNK_CRLF:
                if n - self._pos < 2:
                    return Verdict.MORE
                if buf[self._pos : self._pos + 2] != b"\r\n":
                    return self._bad(400, "chunk data not followed by CRLF")
                self._advance(self._pos + 2)
                self._state = _State.CHUNK_SIZE
            elif state is _State.TRAILER:
                j = buf.find(b"\r\n", self._pos)
                if j < 0:
                    if self._trailer + n - self._pos > self.max_head:
                        return self._bad(431, "request trailer fields too large")
                    return Verdict.MORE
                empty = j == self._pos
                self._trailer += j + 2 - self._pos
                if self._trailer > self.max_head:
                    return self._bad(431, "request trailer fields too large")
                self._advance(j + 2)
                if empty:
                    self._state = _State.DONE
                    self.end = self._pos
                    return Verdict.DRAINED if self.oversized else Verdict.COMPLETE
            else:  # pragma: no cover - DONE, HEAD, BODY and SKIP are handled by scan
                raise AssertionError(state)

    def _advance(self, pos: int) -> None:
        self._raw += pos - self._pos
        self._pos = pos
        if self.oversized and self._raw > self.drain_limit:
            self.drain_exceeded = True
