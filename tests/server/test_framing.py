"""HTTP/1.1 request framing: where a request ends, however its bytes are split into reads."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from gunicorn.config import Config
from gunicorn.http import get_parser
from hypothesis import given
from hypothesis import strategies as st

from webhook.server.transport.framing import MAX_FIELD, MAX_FIELDS, MAX_LINE, Framer, Verdict

MAX_HEAD, MAX_BODY, DRAIN = 1024, 100, 400


def framer() -> Framer:
    return Framer(max_head=MAX_HEAD, max_body=MAX_BODY, drain_limit=DRAIN)


def feed(data: bytes, cuts: list[int] | None = None) -> tuple[Verdict, Framer, bytearray]:
    """Feed ``data`` to a framer in pieces cut at ``cuts``; the first verdict that is not MORE
    (or MORE at the end), the framer and what is left of the buffer."""
    f = framer()
    buf = bytearray()
    points = [*sorted({c for c in cuts or [] if 0 < c < len(data)}), len(data)]
    start = 0
    verdict = Verdict.MORE
    for point in points:
        buf += data[start:point]
        start = point
        verdict = f.scan(buf)
        if verdict is not Verdict.MORE:
            return verdict, f, buf
        if f.oversized:
            f.discard(buf)
    return verdict, f, buf


def chunked(*pieces: bytes, trailer: bytes = b"") -> bytes:
    out = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p)
    return out + b"0\r\n" + trailer + b"\r\n"


GET = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
POST = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
CHUNKED = b"POST /mutate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(
    b"hel", b"lo", trailer=b"X-T: 1\r\n"
)


@pytest.mark.parametrize("request_bytes", [GET, POST, CHUNKED])
def test_a_whole_request_is_complete_and_ends_where_it_ends(request_bytes: bytes) -> None:
    verdict, f, _ = feed(request_bytes + b"GET /next HTTP/1.1\r\n")  # pipelined next request
    assert verdict is Verdict.COMPLETE and f.end == len(request_bytes)


@given(
    st.sampled_from([GET, POST, CHUNKED]),
    st.lists(st.integers(min_value=0, max_value=200), max_size=20),
)
def test_any_split_into_reads_frames_the_same(request_bytes: bytes, cuts: list[int]) -> None:
    verdict, f, _ = feed(request_bytes, cuts)
    assert verdict is Verdict.COMPLETE and f.end == len(request_bytes)
    for n in range(len(request_bytes)):  # and no prefix is complete
        assert feed(request_bytes[:n])[0] is Verdict.MORE


def test_the_head_is_read_for_framing() -> None:
    data = b"POST /mutate HTTP/1.1\r\nexpect: 100-Continue\r\ncontent-length:  5 \r\n\r\n"
    verdict, f, _ = feed(data)
    assert verdict is Verdict.MORE and f.head is not None
    assert (f.head.method, f.head.target, f.head.length) == (b"POST", b"/mutate", 5)
    assert f.head.expect_continue and not f.head.chunked
    assert feed(data.replace(b"HTTP/1.1", b"HTTP/1.0"))[1].head.expect_continue is False  # type: ignore[union-attr]


def test_started_tells_an_idle_connection_from_one_sending() -> None:
    f = framer()
    assert not f.started
    assert f.scan(bytearray(b"GE")) is Verdict.MORE and f.started


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GET /\r\n\r\n", 400),
        (b"GET / HTTP/2\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nName : v\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n folded\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\n", 400),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY", 400),
        (b"GET / HTTP/1.1\r\nX: " + b"a" * MAX_HEAD, 431),
        (b"GET / HTTP/1.1\r\nX: " + b"a" * MAX_HEAD + b"\r\n\r\n", 431),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * MAX_FIELD, 400),
    ],
)
def test_what_cannot_be_framed_is_bad(data: bytes, status: int) -> None:
    verdict, f, _ = feed(data)
    assert verdict is Verdict.BAD and f.error[0] == status


def gunicorn_reads(data: bytes) -> bool:
    """Whether gunicorn's own (pure Python) parser takes ``data`` as a request, body and
    trailer included."""
    cfg = Config()
    cfg.set("http_parser", "python")
    cfg.set("limit_request_line", MAX_LINE)  # as the server sets them (webhook.server.run)
    cfg.set("limit_request_fields", MAX_FIELDS)
    cfg.set("limit_request_field_size", MAX_FIELD)
    try:
        req = next(get_parser(cfg, iter([data]), ("127.0.0.1", 1)))
        req.body.read()
    except Exception:
        return False
    return True


CHUNKED_HEAD = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
#: What gunicorn refuses on a request thread, and the framer refuses first (issue 26 item 1).
STRICT = {
    "identical Content-Lengths": b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
    "Content-Length list": b"POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nab",
    "NUL in a value": b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n",
    "CR in a value": b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
    "LF in a value": b"GET / HTTP/1.1\r\nX: a\nb\r\n\r\n",
    "DEL in a value": b"GET / HTTP/1.1\r\nX: a\x7fb\r\n\r\n",
    "chunked on HTTP/1.0": b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "chunk size then space": CHUNKED_HEAD + b"1 \r\na\r\n0\r\n\r\n",
    "chunk size then tab": CHUNKED_HEAD + b"1\t\r\na\r\n0\r\n\r\n",
    "bad chunk extension": CHUNKED_HEAD + b"1;=x\r\na\r\n0\r\n\r\n",
    "Content-Length trailer": CHUNKED_HEAD + b"0\r\nContent-Length: 5\r\n\r\n",
    "Transfer-Encoding trailer": CHUNKED_HEAD + b"0\r\nTransfer-Encoding: chunked\r\n\r\n",
    "Host trailer": CHUNKED_HEAD + b"0\r\nHost: y\r\n\r\n",
    "NUL in a trailer": CHUNKED_HEAD + b"0\r\nX: a\x00\r\n\r\n",
    "obs-fold": b"GET / HTTP/1.1\r\nX: a\r\n  b\r\n\r\n",
    "space before colon": b"GET / HTTP/1.1\r\nX : a\r\n\r\n",
    "not a token": b"GET / HTTP/1.1\r\nX(y): a\r\n\r\n",
    "Transfer-Encoding identity": b"POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
    "chunked twice": b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
    "chunked in two headers": b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "chunked not last": b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
    "unknown coding": b"POST / HTTP/1.1\r\nTransfer-Encoding: foo, chunked\r\n\r\n0\r\n\r\n",
    "TE and CL": b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n0\r\n\r\n",
    "two Hosts": b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "two Content-Types": b"GET / HTTP/1.1\r\nContent-Type: a\r\nContent-Type: b\r\n\r\n",
    "lowercase method": b"get / HTTP/1.1\r\n\r\n",
    "control in target": b"GET /a\x01b HTTP/1.1\r\n\r\n",
    "authority form": b"GET example.com:80 HTTP/1.1\r\n\r\n",
    "asterisk not OPTIONS": b"GET * HTTP/1.1\r\n\r\n",
    "version HTTP/1.x": b"GET / HTTP/1.x\r\n\r\n",
    "bare LF head": b"GET / HTTP/1.1\nHost: x\n\n",
    "bare LF trailer": CHUNKED_HEAD + b"0\r\nX: 1\n\n",
    "two empty lines first": b"\r\n\r\nGET / HTTP/1.1\r\n\r\n",
    "an empty LF line first": b"\nGET / HTTP/1.1\r\n\r\n",
}


@pytest.mark.parametrize("name", list(STRICT))
def test_what_gunicorn_refuses_the_framer_refuses_with_400(name: str) -> None:
    data = STRICT[name]
    assert not gunicorn_reads(data)  # the case is one gunicorn's parser refuses
    verdict, f, _ = feed(data)
    assert verdict is Verdict.BAD and f.error[0] == 400, f.error
    for n in range(len(data)):  # however it arrives: refused, or waiting for more of it
        assert feed(data, [n])[0] in (Verdict.BAD, Verdict.MORE)


@pytest.mark.parametrize(
    "data",
    [
        GET,
        POST,
        CHUNKED,
        CHUNKED_HEAD + b"1 ; a = b\r\na\r\n0\r\n\r\n",  # whitespace before an extension
        CHUNKED_HEAD + b'1;a="q \\" x"\r\na\r\n0\r\n\r\n',  # a quoted extension value
        b"GET / HTTP/1.1\r\nX: a\tb\r\n\r\n",  # HTAB inside a value
        b"GET / HTTP/1.0\r\nX: \x80\xff\r\n\r\n",  # obs-text
        b"OPTIONS * HTTP/1.1\r\n\r\n",
        b"GET http://h/x HTTP/1.1\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        # found by the differential fuzz (test_framing_fuzz.py):
        b"\r\nGET / HTTP/1.1\r\n\r\n",  # one empty line before the request line is ignored
        CHUNKED_HEAD + b"0" * 20 + b"1\r\na\r\n0\r\n\r\n",  # a chunk size's leading zeros
        b"POST / HTTP/1.1\r\nContent-Length: %s1\r\n\r\na" % (b"0" * 30),  # and a length's
        b"POST / HTTP/1.1\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n",  # a no-op
    ],
)
def test_what_both_read_is_complete(data: bytes) -> None:
    assert gunicorn_reads(data)
    verdict, f, _ = feed(data)
    assert verdict is Verdict.COMPLETE and f.end == len(data)


def test_a_content_length_of_many_digits_is_oversized_not_a_crash() -> None:
    f = Framer(max_head=10_000, max_body=MAX_BODY, drain_limit=DRAIN)
    verdict = f.scan(b"POST / HTTP/1.1\r\nContent-Length: %s\r\n\r\n" % (b"9" * 4000))
    assert verdict is Verdict.MORE and f.oversized and f.drain_exceeded


@pytest.mark.parametrize("digits", [b"9" * 5000, b"0" * 5000])
def test_a_content_length_past_ints_digits_is_refused_as_gunicorn_does(digits: bytes) -> None:
    """Past int()'s 4,300 digits (leading zeros counted) gunicorn refuses the request; the
    framer took 5,000 zeros for 0 and the request as plain (found by the fuzz)."""
    data = b"POST / HTTP/1.1\r\nContent-Length: %s\r\n\r\n" % digits
    assert not gunicorn_reads(data)
    f = Framer(max_head=10_000, max_body=MAX_BODY, drain_limit=DRAIN)
    assert f.scan(data) is Verdict.BAD and f.error[0] == 400


def test_a_long_trailer_is_bad() -> None:
    head = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
    verdict, f, _ = feed(head + b"X: " + b"a" * MAX_HEAD + b"\r\n\r\n")
    assert verdict is Verdict.BAD and f.error[0] == 431


@given(st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_an_oversized_body_is_dropped_as_it_arrives_and_drained(cuts: list[int]) -> None:
    body = b"x" * (MAX_BODY + 50)
    data = b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    verdict, f, buf = feed(data, cuts)
    assert verdict is Verdict.DRAINED and f.oversized and not f.drain_exceeded
    assert len(buf) <= len(data) - len(body) + 400  # dropped, not kept


def test_a_content_length_past_the_drain_limit_is_known_at_once() -> None:
    verdict, f, _ = feed(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (DRAIN + 1))
    assert verdict is Verdict.MORE and f.oversized and f.drain_exceeded


@given(st.lists(st.integers(min_value=0, max_value=600), max_size=10))
def test_a_chunked_body_over_the_cap_is_oversized_and_drained(cuts: list[int]) -> None:
    data = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(
        b"a" * 60, b"b" * 60, b"c" * 60
    )
    verdict, f, _ = feed(data, cuts)
    assert verdict is Verdict.DRAINED and f.oversized and not f.drain_exceeded


def test_a_chunked_body_past_the_drain_limit_is_exceeded() -> None:
    data = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(*[b"a" * 90] * 6)
    verdict, f, _ = feed(data)
    assert verdict is Verdict.MORE or verdict is Verdict.DRAINED
    assert f.oversized and f.drain_exceeded


def test_chunked_framing_overhead_counts_against_the_cap() -> None:
    # 90 data bytes (under the cap) in 1-byte chunks with long extensions: raw > 2 x cap
    pieces = b"".join(b"1;ext=%s\r\na\r\n" % (b"e" * 10) for _ in range(90))
    data = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + pieces + b"0\r\n\r\n"
    _verdict, f, _ = feed(data)
    assert f.oversized


def _line(n: int) -> bytes:  # a request line of n bytes
    return b"GET /%s HTTP/1.1" % (b"a" * (n - len(b"GET / HTTP/1.1")))


def _fields(n: int) -> bytes:
    return b"X: a\r\n" * n


def _field(n: int) -> bytes:  # a field line of n bytes with its CRLF
    return b"X: %s\r\n" % (b"a" * (n - 5))


#: gunicorn's limits on the head, applied by the framer first: (request of n over the limit).
LIMITS: dict[str, tuple[Callable[[int], bytes], int]] = {
    "long request line": (lambda d: _line(MAX_LINE + d) + b"\r\n\r\n", 414),
    "long request line, unfinished": (lambda d: _line(MAX_LINE + 2 + d), 414),
    "too many fields": (lambda d: b"GET / HTTP/1.1\r\n" + _fields(MAX_FIELDS + d) + b"\r\n", 431),
    "long field": (lambda d: b"GET / HTTP/1.1\r\n" + _field(MAX_FIELD + d) + b"\r\n", 431),
    "too many trailer fields": (
        lambda d: CHUNKED_HEAD + b"0\r\n" + _fields(MAX_FIELDS + d) + b"\r\n",
        431,
    ),
    "long trailer field": (
        lambda d: CHUNKED_HEAD + b"0\r\n" + _field(MAX_FIELD + d) + b"\r\n",
        431,
    ),
}


@pytest.mark.parametrize("name", list(LIMITS))
def test_gunicorns_limits_on_the_head_are_the_framers(name: str) -> None:
    make, status = LIMITS[name]
    over = make(1)
    assert not gunicorn_reads(over)
    f = Framer(max_head=1 << 20, max_body=MAX_BODY, drain_limit=DRAIN)
    assert f.scan(over) is Verdict.BAD and f.error[0] == status, f.error
    within = make(0)  # at the limit: both read it (or wait for the rest of it)
    f = Framer(max_head=1 << 20, max_body=MAX_BODY, drain_limit=DRAIN)
    if within.endswith(b"\r\n\r\n"):
        assert gunicorn_reads(within)
        assert f.scan(within) is Verdict.COMPLETE
    else:
        assert f.scan(within) is Verdict.MORE


#: What the API server sends a webhook (Go's net/http client; its field order).
APISERVER = (
    b"POST /mutate?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n"
    b"User-Agent: kube-apiserver-admission\r\nContent-Length: 2\r\n"
    b"Accept: application/json, */*\r\nContent-Type: application/json\r\n"
    b"Accept-Encoding: gzip\r\n\r\n{}"
)


def test_the_api_servers_head_is_plain_and_one_gunicorn_keeps_alive() -> None:
    """A plain head is one a worker may answer without gunicorn's parser
    (webhook.server.transport.worker's direct path): gunicorn reads it and keeps the
    connection, and its environ holds nothing but the plain fields beyond the request line."""
    verdict, f, _ = feed(APISERVER)
    assert verdict is Verdict.COMPLETE and f.head is not None and f.head.plain
    req = next(get_parser(Config(), iter([APISERVER]), ("127.0.0.1", 1)))
    assert not req.should_close()
    assert {name.lower() for name, _ in req.headers} <= {
        "host", "user-agent", "accept", "accept-encoding", "content-type", "content-length"
    }  # fmt: skip


@pytest.mark.parametrize(
    "extra",
    [
        b"Connection: keep-alive\r\n",  # gunicorn acts on it (and on "close")
        b"Expect: 100-continue\r\n",
        b"Expect: something\r\n",  # gunicorn refuses it (417)
        b"X-Forwarded-Proto: https\r\n",  # gunicorn checks it from 127.0.0.1
        b"X-Anything: 1\r\n",
    ],
)
def test_a_head_with_any_other_field_is_not_plain(extra: bytes) -> None:
    line, rest = APISERVER.split(b"\r\n", 1)
    verdict, f, _ = feed(line + b"\r\n" + extra + rest)
    assert verdict is Verdict.COMPLETE and f.head is not None and not f.head.plain


def test_an_http_1_0_head_is_not_plain() -> None:
    verdict, f, _ = feed(APISERVER.replace(b"HTTP/1.1", b"HTTP/1.0"))
    assert verdict is Verdict.COMPLETE and f.head is not None and not f.head.plain
