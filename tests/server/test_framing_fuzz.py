"""The framer against gunicorn's parser, differential fuzz (issue 50 item 1): requests as
clients really send them (tests/fixtures/framing-seeds), mutated byte by byte, must be read
the same by both, or refused by both (framingdiff.divergence says what counts).

KARTA_FRAMING_EXAMPLES sets the number of cases (2,000 by default; 100,000 for a long run:
``KARTA_FRAMING_EXAMPLES=100000 python3 -m pytest tests/server/test_framing_fuzz.py``).
"""

from __future__ import annotations

import os
import re

import pytest
from framingdiff import divergence, seeds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.server.transport.framing import MAX_FIELD, MAX_LINE

EXAMPLES = int(os.environ.get("KARTA_FRAMING_EXAMPLES") or 2000)
SEEDS = seeds()

#: Single bytes worth putting anywhere: line ends, whitespace, separators, controls, obs-text.
BYTES = [b"\r", b"\n", b"\r\n", b"\x00", b" ", b"\t", b":", b",", b";", b"=", b'"', b"\\",
         b"0", b"9", b"a", b"F", b"_", b"-", b"\x0b", b"\x0c", b"\x7f", b"\x80", b"\xff",
         b"\xb2", b"/", b"?", b"#", b"%", b"*", b"+"]  # fmt: skip
#: Whole field lines (with CRLF) worth putting at a line start: framing fields repeated,
#: folded, listed, misspelled; fields gunicorn acts on.
LINES = [
    b"Content-Length: 0\r\n", b"Content-Length: 2\r\n", b"Content-Length: 02\r\n",
    b"Content-Length: +2\r\n", b"Content-Length: 2, 2\r\n", b"Content-Length:2\r\n",
    b"Content-Length : 2\r\n", b"content-length: 1\r\n", b"Content-Length: \xb2\r\n",
    b"Transfer-Encoding: chunked\r\n", b"Transfer-Encoding: chunked, chunked\r\n",
    b"Transfer-Encoding: identity\r\n", b"Transfer-Encoding: gzip, chunked\r\n",
    b"Transfer-Encoding: Chunked\r\n", b"Transfer-Encoding: \tchunked \r\n",
    b"Transfer-Encoding: chunked\r\n chunked\r\n", b"Transfer-Encoding: xchunked\r\n",
    b"Transfer_Encoding: chunked\r\n", b"Host: a\r\n", b"Content-Type: x\r\n",
    b"Expect: 100-continue\r\n", b"Expect: 100-Continue\r\n", b"Expect: x\r\n",
    b"Connection: close\r\n", b"Connection: keep-alive\r\n", b"Connection: upgrade\r\n",
    b"Upgrade: h2c\r\n", b"X-Forwarded-Proto: https\r\n", b"X-Forwarded-Proto: http\r\n",
    b"X-Forwarded-For: 1.2.3.4\r\n", b"Forwarded: for=1.2.3.4\r\n", b"Trailer: X-T\r\n",
    b" folded\r\n", b"\tfolded\r\n", b": empty name\r\n", b"no colon\r\n", b"\r\n",
    b"X-Empty:\r\n", b"Accept: */*\r\n", b"User-Agent: x\r\n", b"Accept-Encoding: gzip\r\n",
    b"0\r\n\r\n", b"5\r\nhello\r\n", b"ff;a=b\r\n", b"1 ;x\r\n",
]  # fmt: skip
#: Lengths around the limits gunicorn and the framer share.
LONG = [MAX_LINE - 1, MAX_LINE, MAX_LINE + 1, MAX_FIELD - 3, MAX_FIELD - 2, MAX_FIELD - 1, 300]

_at = st.integers(0, 1 << 16)
_mutation = st.one_of(
    st.tuples(st.just("insert"), _at, st.sampled_from(BYTES)),
    st.tuples(st.just("delete"), _at, st.integers(1, 4)),
    st.tuples(st.just("duplicate"), _at, st.integers(1, 40)),
    st.tuples(st.just("case"), _at, st.integers(1, 12)),
    st.tuples(st.just("replace"), _at, st.sampled_from(BYTES)),
    st.tuples(st.just("line"), _at, st.sampled_from(LINES)),
    st.tuples(st.just("repeat-line"), _at, st.integers(1, 3)),
    st.tuples(st.just("drop-line"), _at, st.just(0)),
    st.tuples(st.just("long"), _at, st.sampled_from(LONG)),
    st.tuples(st.just("cut"), _at, st.just(0)),
)


def mutate(data: bytes, op: str, at: int, arg: object) -> bytes:
    """``data`` with one mutation at ``at`` (taken modulo its length, or at a line start)."""
    n = len(data)
    i = at % (n + 1)
    starts = [0] + [j + 2 for j in range(n - 1) if data[j : j + 2] == b"\r\n"]
    line = starts[at % len(starts)]
    nxt = data.find(b"\r\n", line)
    line_end = n if nxt < 0 else nxt + 2
    if op == "insert":
        assert isinstance(arg, bytes)
        return data[:i] + arg + data[i:]
    if op == "replace":
        assert isinstance(arg, bytes)
        return data[:i] + arg + data[i + 1 :]
    if op == "delete":
        assert isinstance(arg, int)
        return data[:i] + data[i + arg :]
    if op == "duplicate":
        assert isinstance(arg, int)
        return data[: i + arg] + data[i : i + arg] + data[i + arg :]
    if op == "case":
        assert isinstance(arg, int)
        return data[:i] + data[i : i + arg].swapcase() + data[i + arg :]
    if op == "line":
        assert isinstance(arg, bytes)
        return data[:line] + arg + data[line:]
    if op == "repeat-line":
        assert isinstance(arg, int)
        return data[:line_end] + data[line:line_end] * arg + data[line_end:]
    if op == "drop-line":
        return data[:line] + data[line_end:]
    if op == "long":  # a byte of the line repeated to an overlong value
        assert isinstance(arg, int)
        j = max(line, line_end - 3)
        fill = data[j : j + 1] if data[j : j + 1] not in (b"\r", b"\n", b"") else b"a"
        return data[:j] + fill * max(0, arg - (line_end - line)) + data[j:]
    assert op == "cut"
    return data[:i]


def shown(data: bytes) -> str:
    """``data`` for a message: long runs of one byte shortened."""
    return repr(re.sub(rb"(.)\1{40,}", lambda m: b"<%r*%d>" % (m[1], len(m[0])), data))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("KARTA_FRAMING_EXAMPLES"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(st.sampled_from(sorted(SEEDS)), st.lists(_mutation, max_size=4))
def test_the_framer_and_gunicorn_read_the_same(
    seed: str, mutations: list[tuple[str, int, object]]
) -> None:
    data = SEEDS[seed]
    for op, at, arg in mutations:
        data = mutate(data, op, at, arg)
    problem = divergence(data)
    assert problem is None, f"{shown(data)}: {problem}"


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_the_seeds_are_read_alike(name: str) -> None:
    assert divergence(SEEDS[name]) is None
