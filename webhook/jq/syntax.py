"""Pure-Python reading of jq expression text: jq's tokens and a safety screen.

Karta definitions carry jq expressions written by whoever may create a cluster-scoped CRD, so
they are untrusted input. This module never runs them; it only reads their text:

* :func:`screen` tokenizes an expression the way jq's own lexer does and names every token that
  could reach outside the object (environment, files, modules, stderr, halting), modify it, or
  explode its output (upstream Karta's deny list). A denied *name* only counts where it is an
  identifier in expression position: ``.env``, ``{env: 1}``, ``"env"`` and ``$env`` are data, not
  calls, and are accepted. The screen is deliberately conservative where jq's grammar is subtle
  (a user ``def env:`` or a parameter named ``env`` is still rejected): a false rejection costs a
  renamed function, a false acceptance costs the cluster.

* :func:`tokenize` splits an expression into jq's tokens; :mod:`webhook.jq.paths` builds on them
  to recognise and walk plain paths.

No libjq import here: this module must be usable where libjq is only available in a sandboxed
child process.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from webhook.base.limits import MAX_EXPRESSION_BYTES, MAX_INTERPOLATION_DEPTH

__all__ = [
    "Token",
    "TokenizeError",
    "screen",
    "tokenize",
]

# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

#: Token kinds produced by :func:`tokenize`.
IDENT: Final = "ident"  # name, possibly module-qualified (``a::b``); includes calls and defs
KEYWORD: Final = "keyword"  # reserved word (``if``, ``def``, ``import`` ...)
FIELD: Final = "field"  # ``.name``
VAR: Final = "var"  # ``$name``, ``$__loc__``
NUMBER: Final = "number"
STRING: Final = "string"  # ``"..."``, possibly with ``\\(...)`` interpolations
FORMAT: Final = "format"  # ``@base64``
REC: Final = "rec"  # ``..``
OP: Final = "op"  # operators and punctuation, brackets included

#: jq's reserved words (jq 1.8 lexer). ``not`` is a builtin function, not a keyword.
KEYWORDS: Final = frozenset(
    {
        "as", "import", "include", "module", "def", "if", "then", "elif", "else", "end",
        "and", "or", "reduce", "foreach", "try", "catch", "label", "__loc__",
    }
)  # fmt: skip

_IDENT_RE = r"(?:[a-zA-Z_][a-zA-Z_0-9]*::)*[a-zA-Z_][a-zA-Z_0-9]*"

# One alternative per rule of jq's flex lexer. Flex takes the longest match and, between equally
# long matches, the earliest rule; :func:`_lex` reproduces that by trying every rule.
_RULES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    # Comments end at a newline unless it is escaped by an odd run of backslashes (a ``\r`` may
    # sit between); jq >= 1.7.1 continues the comment on the next line then. A lone ``\r`` does
    # not end a comment. Both verified against libjq.
    ("comment", re.compile(r"#(?:[^\\\n]|\\\r?\n|\\.)*")),
    ("ws", re.compile(r"[ \t\r\n]+")),
    (
        OP,
        re.compile(r"\?//|//=|\|=|\+=|-=|\*=|/=|%=|<=|>=|==|!=|//|[.?=;,:|+\-*/%<>()\[\]{}]"),
    ),
    (REC, re.compile(r"\.\.")),
    (FORMAT, re.compile(r"@[a-zA-Z0-9_]+")),
    (NUMBER, re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")),
    (IDENT, re.compile(_IDENT_RE)),
    (FIELD, re.compile(r"\.[a-zA-Z_][a-zA-Z_0-9]*")),
    (VAR, re.compile(r"\$" + _IDENT_RE)),
    ("dollar", re.compile(r"\$")),
)

_OPENERS: Final = {"(": ")", "[": "]", "{": "}"}
_CLOSERS: Final = frozenset(_OPENERS.values())
_SIMPLE_ESCAPES: Final = {
    '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
}  # fmt: skip


class TokenizeError(ValueError):
    """Text that is not jq tokens: unterminated string, stray character, unbalanced bracket."""


@dataclass(frozen=True, slots=True)
class Token:
    """One jq token.

    ``value`` is the decoded text of a :data:`STRING` without interpolations (None when it has
    interpolations or an escape jq would reject, e.g. a lone surrogate); ``interpolations`` holds
    the token streams of each ``\\(...)`` of a string, so callers can screen them as expressions.
    """

    kind: str
    text: str
    pos: int
    value: str | None = None
    interpolations: tuple[tuple[Token, ...], ...] = field(default=())


def tokenize(expr: str) -> tuple[Token, ...]:
    """Split ``expr`` into significant jq tokens (whitespace and comments dropped).

    Raises :class:`TokenizeError` on text jq's lexer would reject, on unbalanced brackets
    (which jq's parser would reject) so that later passes may rely on bracket structure, and on
    text past the limits (:data:`~webhook.base.limits.MAX_EXPRESSION_BYTES`, interpolations nested
    deeper than :data:`~webhook.base.limits.MAX_INTERPOLATION_DEPTH`): the work is bounded.
    """
    too_long = length_error(expr)
    if too_long:
        raise TokenizeError(too_long)
    tokens, _ = _lex(expr, 0, in_interpolation=False, depth=0)
    return tokens


def length_error(expr: str) -> str | None:
    """Why ``expr`` is too long to read, or None."""
    if len(expr) <= MAX_EXPRESSION_BYTES // 4:  # no need to count bytes of short text
        return None
    size = len(expr.encode("utf-8", "surrogatepass"))
    if size <= MAX_EXPRESSION_BYTES:
        return None
    return f"expression is {size} bytes long; at most {MAX_EXPRESSION_BYTES} are allowed"


def _lex(
    src: str, pos: int, *, in_interpolation: bool, depth: int
) -> tuple[tuple[Token, ...], int]:
    """Tokenize from ``pos``; inside an interpolation, stop after its closing ``)``."""
    out: list[Token] = []
    stack: list[tuple[str, int]] = []
    n = len(src)
    while pos < n:
        if src[pos] == '"':
            tok, pos = _lex_string(src, pos, depth)
            out.append(tok)
            continue
        best_kind, best_end = "", pos
        for kind, rx in _RULES:
            m = rx.match(src, pos)
            if m and m.end() > best_end:
                best_kind, best_end = kind, m.end()
        if best_end == pos:
            raise TokenizeError(f"unexpected character {src[pos]!r} at offset {pos}")
        text = src[pos:best_end]
        start, pos = pos, best_end
        if best_kind in ("comment", "ws"):
            continue
        if best_kind == IDENT and text in KEYWORDS:
            best_kind = KEYWORD
        if best_kind == "dollar":
            # jq 1.8 lexes ``$name`` as one token and rejects ``$ name``; older jq accepted the
            # spaced form. Treat it as the variable anyway so the screen cannot be sidestepped.
            nxt, after = _next_name(src, pos)
            if nxt is None:
                raise TokenizeError(f"unexpected character '$' at offset {start}")
            out.append(Token(VAR, "$" + nxt, start))
            pos = after
            continue
        if best_kind == OP and text in _OPENERS:
            stack.append((text, start))
        elif best_kind == OP and text in _CLOSERS:
            if not stack:
                if in_interpolation and text == ")":
                    return tuple(out), pos
                raise TokenizeError(f"unbalanced {text!r} at offset {start}")
            opener, where = stack.pop()
            if _OPENERS[opener] != text:
                raise TokenizeError(
                    f"{text!r} at offset {start} does not close {opener!r} at offset {where}"
                )
        out.append(Token(best_kind, text, start))
    if in_interpolation:
        raise TokenizeError("unterminated string interpolation")
    if stack:
        opener, where = stack[-1]
        raise TokenizeError(f"unclosed {opener!r} at offset {where}")
    return tuple(out), pos


def _next_name(src: str, pos: int) -> tuple[str | None, int]:
    """The identifier after optional whitespace/comments at ``pos`` (for a spaced ``$ name``)."""
    while True:
        m = _RULES[0][1].match(src, pos) or _RULES[1][1].match(src, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
    m = re.compile(_IDENT_RE).match(src, pos)
    return (m.group(), m.end()) if m else (None, pos)


def _lex_string(src: str, pos: int, depth: int) -> tuple[Token, int]:
    """Lex a string literal starting at the ``"`` at ``pos``, recursing into interpolations
    (at most :data:`~webhook.base.limits.MAX_INTERPOLATION_DEPTH` deep)."""
    start = pos
    pos += 1
    n = len(src)
    chunks: list[str] = []
    interps: list[tuple[Token, ...]] = []
    decodable = True
    while True:
        if pos >= n:
            raise TokenizeError(f"unterminated string literal at offset {start}")
        c = src[pos]
        if c == '"':
            pos += 1
            break
        if c != "\\":
            chunks.append(c)
            pos += 1
            continue
        if pos + 1 >= n:
            raise TokenizeError(f"unterminated string literal at offset {start}")
        e = src[pos + 1]
        if e == "(":
            if depth >= MAX_INTERPOLATION_DEPTH:
                raise TokenizeError(
                    f"string interpolations nested more than {MAX_INTERPOLATION_DEPTH} deep "
                    f"at offset {pos}"
                )
            inner, pos = _lex(src, pos + 2, in_interpolation=True, depth=depth + 1)
            interps.append(inner)
            continue
        if e in _SIMPLE_ESCAPES:
            chunks.append(_SIMPLE_ESCAPES[e])
            pos += 2
            continue
        if e == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", src[pos + 2 : pos + 6]):
            cp = int(src[pos + 2 : pos + 6], 16)
            pos += 6
            if 0xD800 <= cp < 0xDC00:
                m = re.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})").match(src, pos)
                if m:
                    low = int(m.group(1), 16)
                    chunks.append(chr(0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)))
                    pos = m.end()
                    continue
                decodable = False  # jq rejects a lone high surrogate
            elif 0xDC00 <= cp < 0xE000:
                decodable = False  # jq replaces a lone low surrogate; not worth mirroring
            chunks.append(chr(cp))
            continue
        raise TokenizeError(f"invalid escape {src[pos : pos + 2]!r} at offset {pos}")
    value = "".join(chunks) if decodable and not interps else None
    return Token(STRING, src[start:pos], start, value, tuple(interps)), pos


# --------------------------------------------------------------------------------------------
# Safety screen
# --------------------------------------------------------------------------------------------

_ENV = "reads the environment"
_INPUT = "reads input beyond the object"
_STDERR = "writes to standard error"
_HALT = "stops the evaluating process"
_MODULES = "reads modules or the file system"
_INTERNALS = "reads interpreter internals"
_MODIFIES = "modifies the input"
_EXCESSIVE = "may produce excessive output"

#: Denied functions (any arity) and why. ``getpath``, ``error``, ``splits``, ``limit``,
#: ``while``, ``until`` and ``def`` are fine: unbounded loops are stopped by the evaluation
#: timeout, not by the screen.
DENIED_FUNCTIONS: Final[dict[str, str]] = {
    "env": _ENV,
    "input": _INPUT,
    "inputs": _INPUT,
    "input_filename": _INPUT,
    "input_line_number": _INPUT,
    "debug": _STDERR,
    "stderr": _STDERR,
    "halt": _HALT,
    "halt_error": _HALT,
    "modulemeta": _MODULES,
    "get_search_list": _MODULES,
    "get_prog_origin": _MODULES,
    "get_jq_origin": _MODULES,
    "builtins": _INTERNALS,
    # Upstream Karta's deny list.
    "del": _MODIFIES,
    "paths": _EXCESSIVE,
    "leaf_paths": _EXCESSIVE,
    "recurse": _EXCESSIVE,
    "recurse_down": _EXCESSIVE,
    "walk": _EXCESSIVE,
    "repeat": _EXCESSIVE,
    "range": _EXCESSIVE,
    # The primitives behind ``del`` and ``=``: denying those but not these would be a loophole.
    "delpaths": _MODIFIES,
    "setpath": _MODIFIES,
}

#: Denied keywords and why (only outside object-key position: ``{import: 1}`` is data).
DENIED_KEYWORDS: Final[dict[str, str]] = {
    "import": "loads modules",
    "include": "loads modules",
    "module": "declares a module",
}

#: Assignment operators (``==``, ``!=``, ``<=``, ``>=`` are comparisons and fine).
ASSIGNMENT_OPERATORS: Final = frozenset({"=", "|=", "+=", "-=", "*=", "/=", "%=", "//="})


def screen(expr: str) -> list[str]:
    """Reasons ``expr`` must not be evaluated; an empty list means it may be.

    Every offending token is reported once, in order of appearance, string interpolations
    included. Text that cannot be tokenized yields a single ``cannot tokenize: ...`` reason
    instead of an exception, because callers report reasons as field errors.
    """
    too_long = length_error(expr)
    if too_long:
        return [too_long]
    try:
        tokens = tokenize(expr)
    except TokenizeError as e:
        return [f"cannot tokenize: {e}"]
    reasons: list[str] = []
    _screen_tokens(tokens, reasons)
    return list(dict.fromkeys(reasons))


def _screen_tokens(tokens: Sequence[Token], reasons: list[str]) -> None:
    """Screen one expression's token stream (an interpolation is screened as its own stream).

    Tracks frames to tell object keys from expressions: ``(``, ``[``, ``{`` and ``if ... end``
    (whose branches may contain commas directly inside an object). An identifier or keyword is a
    key when its frame is an object, it follows ``{`` or an entry-separating ``,``, and is
    followed by ``:``, ``,`` or ``}`` (the last two are the ``{name}`` shorthand, which reads
    ``.name``).
    """
    frames: list[list[Any]] = []  # [opener, expect_key]
    for i, tok in enumerate(tokens):
        top = frames[-1] if frames else None
        nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
        in_key_slot = top is not None and top[0] == "{" and top[1]
        is_key = in_key_slot and tok.kind in (IDENT, KEYWORD) and nxt in (":", ",", "}")
        if top is not None and top[0] == "{":
            top[1] = tok.kind == OP and tok.text == ","

        if tok.kind == OP:
            if tok.text in _OPENERS:
                frames.append([tok.text, tok.text == "{"])
            elif tok.text in _CLOSERS:
                # Pop to the matching bracket, dropping an unclosed ``if`` (jq rejects those).
                while frames and frames.pop()[0] != _matching_opener(tok.text):
                    pass
            elif tok.text in ASSIGNMENT_OPERATORS:
                reasons.append(f"assignment operator {tok.text!r} is not allowed")
        elif tok.kind == KEYWORD and not is_key:
            if tok.text == "if":
                frames.append(["if", False])
            elif tok.text == "end" and top is not None and top[0] == "if":
                frames.pop()
            elif tok.text in DENIED_KEYWORDS:
                reasons.append(f"keyword {tok.text!r} is not allowed: {DENIED_KEYWORDS[tok.text]}")
            elif tok.text == "__loc__":  # only meaningful as ``$__loc__``; be safe anyway
                reasons.append(f"variable '$__loc__' is not allowed: {_INTERNALS}")
        elif tok.kind == IDENT and not is_key:
            if "::" in tok.text:
                reasons.append(
                    f"module-qualified name {tok.text!r} is not allowed: modules are disabled"
                )
            elif tok.text in DENIED_FUNCTIONS:
                reasons.append(
                    f"function {tok.text!r} is not allowed: {DENIED_FUNCTIONS[tok.text]}"
                )
        elif tok.kind == VAR:
            if tok.text == "$ENV":
                reasons.append(f"variable '$ENV' is not allowed: {_ENV}")
            elif tok.text.startswith("$__"):
                reasons.append(f"variable {tok.text!r} is not allowed: {_INTERNALS}")
        elif tok.kind == REC:
            reasons.append("recursive descent operator '..' is not allowed")
        elif tok.kind == STRING:
            for inner in tok.interpolations:
                _screen_tokens(inner, reasons)


def _matching_opener(closer: str) -> str:
    return {")": "(", "]": "[", "}": "{"}[closer]
