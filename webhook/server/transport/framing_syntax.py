"""The syntax of the lines framing reads (RFC 9112 sections 3-7, as gunicorn checks them):
the request line, a header or trailer field line, a chunk size line with its extensions, and
the Transfer-Encoding list. Each check gives what is wrong (the text the framer answers with)
or ``None``; :mod:`webhook.server.transport.framing` decides when to ask. Pure.
"""

from __future__ import annotations

import re

_HEX = frozenset(b"0123456789abcdefABCDEF")
#: RFC 9110 section 5.6.2: a token (field names, methods, transfer codings).
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: RFC 9110 section 5.5: a field value holds no control character but HTAB.
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
#: RFC 9112 section 3.2: a request target is printable ASCII (the rest is percent-encoded).
_BAD_TARGET = re.compile(rb"[^\x21-\x7e]")
_VERSION = re.compile(rb"HTTP/1\.[0-9]")
#: RFC 9112 section 7.1.1, from the first ";" of a chunk size line (as gunicorn checks it).
_EXT_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = rb'"(?:[\t !#-\[\]-~\x80-\xff]|\\[\t -~\x80-\xff])*"'
_CHUNK_EXT = re.compile(
    rb"(?:[ \t]*;[ \t]*"
    + _EXT_TOKEN
    + rb"(?:[ \t]*=[ \t]*(?:"
    + _EXT_TOKEN
    + rb"|"
    + _QUOTED
    + rb"))?)*"
)
#: Fields forbidden in a trailer (RFC 9110 section 6.5.1; gunicorn refuses them there).
_NOT_IN_TRAILER = frozenset(
    {b"content-length", b"transfer-encoding", b"host", b"trailer", b"te", b"authorization"}
)
#: Codings a server may know but this one does not decode (RFC 9112 section 6.1: 501).
_CODINGS = frozenset({b"gzip", b"x-gzip", b"deflate", b"compress", b"x-compress"})


def request_line_problem(line: bytes) -> str | None:
    """What is wrong with a request line (RFC 9112 section 3, as gunicorn checks it)."""
    parts = line.split(b" ")
    if len(parts) != 3:
        return "invalid request line: not method, target and version apart by single spaces"
    method, target, version = parts
    if not (3 <= len(method) <= 20 and set(method) <= _TOKEN) or any(
        c in b"abcdefghijklmnopqrstuvwxyz#" for c in method
    ):
        return "invalid request line: the method is not an uppercase token of 3-20 characters"
    if not target or _BAD_TARGET.search(target):
        return "invalid request line: the target is empty or holds a byte outside printable ASCII"
    if target == b"*" and method != b"OPTIONS":
        return "invalid request line: the target * is for OPTIONS only"
    if (
        method != b"CONNECT"
        and target != b"*"
        and not target.startswith(b"/")
        and b"://" not in target
    ):
        return "invalid request line: the target is not a path or an absolute URI"
    if not _VERSION.fullmatch(version):
        return "invalid request line: the version is not HTTP/1.0 or HTTP/1.1"
    return None


def field(line: bytes) -> tuple[bytes, bytes] | str:
    """A header or trailer line's lowercase name and its value without surrounding
    whitespace, or what is wrong with it."""
    if line[:1] in (b" ", b"\t"):
        return "obsolete line folding (a header line starting with whitespace)"
    name, colon, value = line.partition(b":")
    if not colon:
        return "a header line without a colon"
    if not name or not set(name) <= _TOKEN:
        return "invalid header name: not a token (whitespace before the colon?)"
    if _BAD_VALUE.search(value):
        return f"a control character (CR, LF, NUL, ...) in the value of header {title(name)}"
    return name.lower(), value.strip(b" \t")


def trailer_problem(line: bytes) -> str | None:
    parsed = field(line)
    if isinstance(parsed, str):
        return f"in the trailer: {parsed}"
    if parsed[0] in _NOT_IN_TRAILER:
        return f"{title(parsed[0])} is not allowed in a trailer"
    return None


def chunk_line_problem(line: bytes) -> str | None:
    """What is wrong with a chunk size line (without its CRLF): hex digits, then an optional
    extension; whitespace after the size only before the extension (RFC 9112 section 7.1.1)."""
    size, semi, ext = line.partition(b";")
    if semi:
        size = size.rstrip(b" \t")
    if not size or not set(size) <= _HEX:
        return "invalid chunk size: not hexadecimal digits"
    if semi and not _CHUNK_EXT.fullmatch(semi + ext):
        return "invalid chunk extension"
    return None


def title(name: bytes) -> str:
    """A header name (a token, so ASCII) as it is usually written, for messages."""
    return "-".join(part.capitalize() for part in name.decode("ascii").split("-"))


def transfer_coding_problem(
    codings: list[bytes], length: int | None, version: bytes
) -> tuple[int, str] | None:
    """The status and text to refuse a request whose Transfer-Encoding lists ``codings`` (not
    empty) with, given its Content-Length and version (RFC 9112 section 6.1)."""
    if length is not None:
        return 400, "both Content-Length and Transfer-Encoding"
    if version == b"HTTP/1.0":
        return 400, "Transfer-Encoding on an HTTP/1.0 request"
    if codings[-1] != b"chunked" or codings.count(b"chunked") > 1:
        return 400, "Transfer-Encoding must end with chunked, once"
    before = [c for c in codings[:-1] if c != b"identity"]  # a no-op, as gunicorn reads it
    if before:
        if all(c in _CODINGS for c in before):
            return 501, "transfer coding not supported"
        return 400, "unknown or empty transfer coding"
    return None
