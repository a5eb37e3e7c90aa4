"""The framer read against gunicorn's own (pure Python) parser, request by request, for the
differential fuzz (test_framing_fuzz.py).

:func:`framer_reads` and :func:`gunicorn_reads` turn the bytes a client sent on one connection
into the requests each reads, and how each stops; :func:`divergence` says where they differ in
a way that matters:

- the framer says a request is complete and plain (answered without gunicorn's parser) only
  when gunicorn reads the same method, target, version and body from the same bytes, keeps
  the connection open and has no field the direct path leaves out;
- a complete request ends where gunicorn's ends (its body has the same length, the next
  request starts at the same byte);
- a refusal is one gunicorn makes too, on these bytes or on any of a few ways to go on
  (``CONTINUATIONS``); save the 501 the framer answers a coding it cannot decode (gunicorn
  passes such a body on undecoded);
- the framer never waits for more of a request gunicorn has read whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gunicorn.config import Config
from gunicorn.http import get_parser
from gunicorn.http.body import LengthReader
from gunicorn.http.errors import NoMoreData

from webhook.server.transport import conns
from webhook.server.transport.framing import Verdict

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "framing-seeds"
#: The fields a plain head may hold (framing._PLAIN), as gunicorn names them.
PLAIN = {"HOST", "USER-AGENT", "ACCEPT", "ACCEPT-ENCODING", "CONTENT-TYPE", "CONTENT-LENGTH"}
#: Ways a client could go on after bytes gunicorn has not read a whole request from.
CONTINUATIONS = (b"\r\n", b"\r\n\r\n", b"0\r\n\r\n", b"\r\n0\r\n\r\n", b"x\r\n\r\n")


def seeds() -> dict[str, bytes]:
    """The seed corpus: requests as the API server, the kubelet and Prometheus send them,
    chunked and pipelined variants."""
    return {p.stem: p.read_bytes() for p in sorted(SEEDS.glob("*.http"))}


@dataclass(frozen=True)
class Read:
    """One request as a reader took it."""

    method: str
    target: str
    version: str
    body: bytes | None  # None: chunked (the framer does not decode it)
    end: int  # offset just after it in the connection's bytes
    plain: bool = False  # the framer's: answered without gunicorn's parser
    keep: bool = True  # gunicorn's: the connection stays open after it
    fields: frozenset[str] = frozenset()  # gunicorn's: the names of its fields


@dataclass(frozen=True)
class Reading:
    requests: list[Read]
    #: How reading stopped: "end" (all read), "more" (waiting), "close" (gunicorn closes the
    #: connection), "bad" (refused); with a status or exception name.
    stop: str
    why: str = ""


def _limits() -> conns.Limits:
    return conns.Limits()


def framer_reads(data: bytes) -> Reading:
    limits = _limits()
    buf = bytearray(data)
    base = 0
    out: list[Read] = []
    while buf:
        f = limits.framer()
        verdict = f.scan(buf)
        if verdict is Verdict.MORE:
            return Reading(out, "more")
        if verdict is Verdict.BAD:
            return Reading(out, "bad", f"{f.error[0]} {f.error[1]}")
        if verdict is Verdict.DRAINED:
            return Reading(out, "bad", "413 body over the cap")
        head = f.head
        assert head is not None
        body = None if head.chunked else bytes(buf[f.end - (head.length or 0) : f.end])
        out.append(
            Read(
                head.method.decode("latin-1"),
                head.target.decode("latin-1"),
                head.version.decode("latin-1"),
                body,
                base + f.end,
                plain=head.plain,
            )
        )
        base += f.end
        del buf[: f.end]
    return Reading(out, "end")


def gunicorn_config() -> Config:
    cfg = Config()
    limits = _limits()
    for key, value in {  # as webhook.server.run sets them
        "http_parser": "python",
        "limit_request_line": limits.max_line,
        "limit_request_fields": limits.max_fields,
        "limit_request_field_size": limits.max_field,
    }.items():
        cfg.set(key, value)
    return cfg


_CFG = gunicorn_config()


def gunicorn_reads(data: bytes) -> Reading:
    parser = get_parser(_CFG, iter([data]), ("127.0.0.1", 1))
    out: list[Read] = []
    try:
        while True:
            req = next(parser)
            reader = req.body.reader
            length = reader.length if isinstance(reader, LengthReader) else None
            body = req.body.read()
            if length is not None and len(body) < length:  # LengthReader stops at the end
                return Reading(out, "more")
            chunked = any(n == "TRANSFER-ENCODING" for n, _ in req.headers)
            left = len(parser.unreader.buf.getvalue())  # the one piece is read by now
            keep = not req.should_close()
            out.append(
                Read(
                    req.method,
                    req.uri,
                    "HTTP/{}.{}".format(*req.version),
                    None if chunked else body,
                    len(data) - left,
                    keep=keep,
                    fields=frozenset(n for n, _ in req.headers),
                )
            )
            if not keep:
                return Reading(out, "close")
    except StopIteration:
        return Reading(out, "end")
    except NoMoreData:
        return Reading(out, "more")
    except Exception as e:  # any refusal of gunicorn's parser
        return Reading(out, "bad", type(e).__name__)


def _deliberate(ours: Reading, data: bytes) -> bool:
    """Whether the framer's refusal is one of its own on purpose: 501 for a coding it cannot
    decode; 413 for a body over the cap; 431 for a head past the worker's own bound
    (``Limits.max_head``, far below the 1.6 MB gunicorn's field limits allow); a chunk size
    line as long as gunicorn's field size limit (gunicorn's bound on it too, but only when the
    line comes in more than one read)."""
    start = ours.requests[-1].end if ours.requests else 0
    if ours.why.startswith(("501 ", "413 ", "400 chunk size line too long")):
        return True
    return ours.why.startswith("431 request header") and len(data) - start > _limits().max_head


def divergence(data: bytes) -> str | None:
    """What the framer and gunicorn read differently in ``data``, or None."""
    ours, theirs = framer_reads(data), gunicorn_reads(data)
    if ours.stop == "bad" and _deliberate(ours, data):
        ours = Reading(ours.requests, "deliberate", ours.why)
    for i, mine in enumerate(ours.requests):
        if i >= len(theirs.requests):
            if theirs.stop == "close":
                return None  # gunicorn closes before it; so does the worker (its keep rule)
            if mine.plain or theirs.stop != "bad":
                return f"request {i}: the framer reads {mine}, gunicorn stops ({theirs.stop} {theirs.why})"
            return None  # a request thread hands it to gunicorn, which refuses it
        other = theirs.requests[i]
        same = (mine.method, mine.target, mine.version, mine.end) == (
            other.method,
            other.target,
            other.version,
            other.end,
        )
        if not same or (mine.body is not None and mine.body != other.body):
            return f"request {i}: the framer reads {mine}, gunicorn {other}"
        if mine.plain and not (other.keep and other.fields <= PLAIN):
            return f"request {i}: plain to the framer, gunicorn reads {other}"
    n = len(ours.requests)
    if len(theirs.requests) > n and ours.stop != "deliberate":
        return (
            f"request {n}: gunicorn reads {theirs.requests[n]}, the framer {ours.stop} {ours.why}"
        )
    if ours.stop == "bad" and theirs.stop != "bad":
        if theirs.stop == "close":
            return None
        for more in CONTINUATIONS:  # gunicorn had not read enough to refuse: go on
            later = gunicorn_reads(data + more)
            if len(later.requests) > n:
                return (
                    f"request {n}: the framer refuses ({ours.why}); gunicorn reads "
                    f"{later.requests[n]} once {more!r} follows"
                )
    return None
