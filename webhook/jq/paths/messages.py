"""libjq 1.8's error messages, byte for byte: kind names, value dumps and their truncation.

The walks of :mod:`webhook.jq.paths` and the native evaluator (:mod:`webhook.jq.native`)
build their messages from these, so that an error reads exactly as libjq's would.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any, Final

__all__ = ["dump", "escape", "kind", "trunc"]


def kind(value: Any) -> str:
    """jq's kind name of a decoded JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def dump(value: Any) -> str:
    """Compact JSON as libjq 1.8 dumps a scalar in an error message.

    Numbers keep their literal (libjq 1.8 preserves number literals) in decNumber's canonical
    form: ``1e+16`` → ``1E+16``, ``1e-05`` → ``0.00001``, ``3.0`` stays ``3.0``; Python's
    ``Decimal`` implements the same specification. Strings escape ``"``, ``\\``, control
    characters and DEL; other characters, ``/`` included, stay raw.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        try:
            return str(Decimal(repr(value)))
        except InvalidOperation:  # inf/nan are not JSON; say something sensible
            return repr(value)
    if isinstance(value, str):
        return '"' + "".join(escape(c) for c in value) + '"'
    raise TypeError(f"cannot describe {type(value).__name__} in a jq message")


def escape(c: str) -> str:
    """One character of a string as libjq 1.8 dumps it."""
    o = ord(c)
    if c == '"':
        return '\\"'
    if c == "\\":
        return "\\\\"
    if c in "\b\f\n\r\t":
        return {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[c]
    if o < 0x20 or o == 0x7F:
        return f"\\u{o:04x}"
    if 0xD800 <= o < 0xE000:
        return "\ufffd"  # libjq replaces a lone surrogate
    return c


#: libjq copies the dump into a 30-byte buffer (29 bytes plus NUL).
_ERRBUF: Final = 30


def trunc(text: str) -> str:
    """Truncate a dump as libjq 1.8 does in error messages.

    Up to 29 UTF-8 bytes are kept whole. Longer dumps keep 26 bytes then ``...``; a string
    (array, object) keeps 25 and closes with ``..."`` (``...]``, ``...}``). The cut backs off
    to a UTF-8 character boundary, so it never splits a character (it may split an escape).
    """
    raw = text.encode()
    if len(raw) <= _ERRBUF - 1:
        return text
    closer = {'"': '"', "[": "]", "{": "}"}.get(text[:1], "")
    cut = _ERRBUF - 5 if closer else _ERRBUF - 4
    while cut > 0 and (raw[cut] & 0xC0) == 0x80:
        cut -= 1
    return raw[:cut].decode() + "..." + closer
