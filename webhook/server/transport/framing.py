"""Where an HTTP/1.1 request ends in the bytes read from a connection (RFC 9112 sections 2-7).

The worker's poller reads each connection without blocking and hands a request on only once it
is complete; :class:`Framer` tells, from the bytes buffered so far, whether they hold a whole
request (head and body), the start of one whose body is over the cap, or something that is not
HTTP/1.1 framing at all. Pure: no I/O, incremental (every byte is looked at a bounded number of
times however the request is split into reads).

For the admission webhooks' own requests it is the only parser: a complete head it finds
:attr:`Head.plain` is answered without gunicorn's (:mod:`webhook.server.transport.direct`).
So it is held to gunicorn's parser by a differential fuzz (tests/server/test_framing_fuzz.py):

- complete and plain only where gunicorn reads the same method, target, version and body
  from the same bytes, keeps the connection and has no other field;
- a complete request ends where gunicorn's ends (the next one starts at the same byte);
- every 400 is one gunicorn makes too: a request line, header, chunk or trailer line it would
  refuse (``framing_syntax``), a repeated singleton field, Transfer-Encoding with
  Content-Length, on HTTP/1.0 or not ending with one ``chunked``; its line and field limits
  give 414 and 431;
- its own stricter answers: 501 for a coding before ``chunked`` (gunicorn would pass the body
  on undecoded), 431 past ``max_head``, 413 past ``max_body``.

Refused requests are answered by the poller, which closes: what was pipelined after them is
never read as a request.
"""

from __future__ import annotations

import enum
import re
import sys
from dataclasses import dataclass

from webhook.server.transport import framing_syntax as syntax

#: gunicorn's limits on the head (its ``limit_request_line``, ``limit_request_fields`` and
#: ``limit_request_field_size``; the server sets both from :class:`webhook.server.transport.conns.Limits`):
#: the longest request line (414 past it), the most header (or trailer) fields and the
#: longest field line with its CRLF (431 past them).
MAX_LINE, MAX_FIELDS, MAX_FIELD = 8190, 100, 16380
#: Chunked framing may take more bytes than the data it carries; past this many raw body bytes
#: per allowed data byte, a chunked body is oversized whatever it decodes to.
RAW_OVERHEAD = 2

_DIGITS = frozenset(b"0123456789")
#: An LF that is not the end of a CRLF (RFC 9112 section 2.2: every line ends with CRLF).
_BARE_LF = re.compile(rb"(?<!\r)\n")
#: Fields a request may hold once only (RFC 9110 section 5.3; gunicorn refuses a repeat).
_SINGLETONS = frozenset({b"host", b"content-type", b"content-length"})
#: More Content-Length digits than this is more than any cap (and than int() takes).
_MAX_DIGITS = 18
#: Header fields that, once framed, leave gunicorn nothing to refuse or to act on in a
#: request (no ``Connection``, ``Expect``, ``Transfer-Encoding`` nor the forwarding headers
#: gunicorn checks): what the API server sends a webhook. See :attr:`Head.plain`.
_PLAIN = frozenset(
    {b"host", b"user-agent", b"accept", b"accept-encoding", b"content-type", b"content-length"}
)


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
    #: An HTTP/1.1 request whose fields are all in :data:`_PLAIN`: gunicorn's parser would
    #: take it as framed, keep its connection alive and put nothing else in its environ that
    #: the head does not say (a worker may answer it without that parser).
    plain: bool = False


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

    def __init__(
        self,
        *,
        max_head: int,
        max_body: int,
        drain_limit: int,
        max_line: int = MAX_LINE,
        max_fields: int = MAX_FIELDS,
        max_field: int = MAX_FIELD,
    ) -> None:
        self.max_head = max_head
        self.max_line = max_line
        self.max_fields = max_fields
        self.max_field = max_field
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
        self._trailer_fields = 0

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
        # One empty line before the request line is ignored (RFC 9112 section 2.2), as by
        # gunicorn: only one, and only CRLF.
        skip = 2 if buf[:2] == b"\r\n" else 0
        i = buf.find(b"\r\n\r\n", max(skip, self._searched - 3))
        if _BARE_LF.search(buf, max(0, self._searched - 1), len(buf) if i < 0 else i):
            return self._bad(400, "a line of the request head ends with a bare LF")
        if i < 0:
            if (
                self._searched <= self.max_line + 2 + skip < len(buf)
                and buf.find(b"\r\n", skip) < 0
            ):
                return self._bad(414, f"request line longer than {self.max_line} bytes")
            self._searched = len(buf)
            if len(buf) > self.max_head:
                return self._bad(431, "request header fields too large")
            return Verdict.MORE
        end = i + 4
        if end > self.max_head:
            return self._bad(431, "request header fields too large")
        lines = bytes(buf[skip:i]).split(b"\r\n")
        if len(lines[0]) > self.max_line:
            return self._bad(414, f"request line longer than {self.max_line} bytes")
        if len(lines) - 1 > self.max_fields:
            return self._bad(431, f"more than {self.max_fields} header fields")
        if any(len(line) + 2 > self.max_field for line in lines[1:]):
            return self._bad(431, f"a header field longer than {self.max_field} bytes")
        problem = syntax.request_line_problem(lines[0])
        if problem:
            return self._bad(400, problem)
        method, target, version = lines[0].split(b" ")
        length: int | None = None
        codings: list[bytes] = []
        expect = False
        plain = version == b"HTTP/1.1"
        seen: set[bytes] = set()
        for line in lines[1:]:
            field = syntax.field(line)
            if isinstance(field, str):
                return self._bad(400, field)
            name, value = field
            plain = plain and name in _PLAIN
            if name in _SINGLETONS:
                if name in seen:
                    return self._bad(400, f"more than one {syntax.title(name)} header")
                seen.add(name)
            if name == b"content-length":
                if not value or not set(value) <= _DIGITS:
                    return self._bad(400, "invalid Content-Length: not a decimal number")
                if len(value) > (sys.get_int_max_str_digits() or len(value)):
                    # gunicorn's int() refuses it, leading zeros counted (fuzz-found).
                    return self._bad(400, "invalid Content-Length: too many digits")
                digits = value.lstrip(b"0")  # leading zeros are allowed (and many of them)
                length = int(digits or b"0") if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS
            elif name == b"transfer-encoding":
                codings += [c.strip(b" \t").lower() for c in value.split(b",")]
            elif name == b"expect" and value.lower() == b"100-continue":
                expect = version == b"HTTP/1.1"
        if codings:
            refused = syntax.transfer_coding_problem(codings, length, version)
            if refused:
                return self._bad(*refused)
        self.head = Head(method, target, version, length, bool(codings), expect, plain)
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
                # gunicorn's bound on a chunk size line is its field size limit.
                j = buf.find(b"\r\n", self._pos, self._pos + self.max_field)
                if j < 0:
                    if n - self._pos >= self.max_field:
                        return self._bad(400, "chunk size line too long")
                    if buf.find(b"\n", self._pos) >= 0:
                        return self._bad(400, "a chunk size line ends with a bare LF")
                    return Verdict.MORE
                problem = syntax.chunk_line_problem(bytes(buf[self._pos : j]))
                if problem:
                    return self._bad(400, problem)
                size = bytes(buf[self._pos : j]).split(b";", 1)[0].rstrip(b" \t").lstrip(b"0")
                self._advance(j + 2)
                # More significant digits than this is more than any cap (and drained).
                self._remaining = int(size or b"0", 16) if len(size) <= 15 else 1 << 60
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
                    if buf.find(b"\n", self._pos) >= 0:
                        return self._bad(400, "a trailer line ends with a bare LF")
                    return Verdict.MORE
                empty = j == self._pos
                self._trailer += j + 2 - self._pos
                if self._trailer > self.max_head:
                    return self._bad(431, "request trailer fields too large")
                if not empty:
                    self._trailer_fields += 1
                    if self._trailer_fields > self.max_fields:
                        return self._bad(431, f"more than {self.max_fields} trailer fields")
                    if j + 2 - self._pos > self.max_field:
                        return self._bad(431, f"a trailer field longer than {self.max_field} bytes")
                    problem = syntax.trailer_problem(bytes(buf[self._pos : j]))
                    if problem:
                        return self._bad(400, problem)
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
