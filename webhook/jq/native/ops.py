"""jq value semantics for the native evaluator (:mod:`webhook.jq.native.evaluate`): pure functions on
decoded JSON values, each matching libjq 1.8 (as bundled with the ``jq`` Python package),
error messages included.

Numbers. jq computes with doubles but keeps the literal text of a number it parsed (input or
program) until arithmetic touches it, and prints the two differently (``1.0`` stays ``1.0``,
``1e-05`` prints as ``0.00001``; a computed ``1e-05`` prints as ``1e-05``). Here a number from
the input or the program is a Python ``int``/``float`` (a literal); a computed number is an
``int`` when it is integral and below 1e16 (where both spellings agree) and a :class:`Double`
otherwise. :func:`export` turns results into what the ``jq`` binding returns (integral numbers
become ``int``).

:class:`NeedsLibjq` is raised where exactness would need libjq's decimal arithmetic or a rare
builtin variant: integers beyond 2**53 in arithmetic or comparisons, non-finite results,
``tonumber`` on anything but a plain integer, ``string * number``, ``string / string``, values
nested deeper than :data:`MAX_VALUE_DEPTH`.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any, Final

# jqsyntax's message helpers (libjq's dump escaping and 29-byte cut), the only private names
# of another module used by the native evaluator.
from webhook.jq.paths import WalkError, _escape
from webhook.jq.paths import _trunc as trunc

__all__ = [
    "Double",
    "JqError",
    "LimitError",
    "NeedsLibjq",
    "cmp",
    "desc",
    "dump",
    "equal",
    "export",
    "is_num",
    "kind",
    "trunc",
    "truthy",
]

#: Deeper values are handed to libjq (dump, compare and export recurse on values).
MAX_VALUE_DEPTH: Final = 200
_EXACT: Final = 2**53


class JqError(WalkError):
    """A jq runtime error (libjq's message); ``?`` and ``try`` catch these."""


class LimitError(WalkError):
    """The evaluation hit a cap (outputs or work); never caught by ``?``."""


class NeedsLibjq(Exception):
    """This evaluation needs libjq for an exact answer; re-run the expression there."""


class Double(float):
    """A computed number that is not a small integer (printed like libjq prints doubles)."""

    __slots__ = ()


def is_num(v: Any) -> bool:
    t = type(v)
    return t is int or t is float or t is Double


def truthy(v: Any) -> bool:
    return v is not None and v is not False


_KINDS: Final[dict[type, str]] = {
    type(None): "null",
    bool: "boolean",
    int: "number",
    float: "number",
    Double: "number",
    str: "string",
    list: "array",
    dict: "object",
}


def kind(v: Any) -> str:
    """jq's kind name of a value."""
    return _KINDS[type(v)]


# ------------------------------------------------------------------------------ printing

_PLAIN_STR = re.compile(r'[^\x00-\x1f"\\\x7f\ud800-\udfff]*\Z')


def _dump_str(s: str) -> str:
    if _PLAIN_STR.match(s):
        return '"' + s + '"'
    return '"' + "".join(_escape(c) for c in s) + '"'


def dtoa(x: float) -> str:
    """A computed double as libjq 1.8 prints it: shortest round-trip digits, exponent form
    (``1e+17``, ``1e-05``) below 1e-4 or when there are more than 15 trailing zeros."""
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    _sign, digits_t, exp = Decimal(repr(abs(x))).as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    exp += len(digits_t) - len(digits)
    nd = len(digits)
    decpt = nd + exp
    neg = "-" if x < 0 else ""
    if decpt <= -4 or decpt > nd + 15:
        e = decpt - 1
        mant = digits[0] + ("." + digits[1:] if nd > 1 else "")
        return f"{neg}{mant}e{'+' if e >= 0 else '-'}{abs(e):02d}"
    if decpt <= 0:
        return f"{neg}0.{'0' * -decpt}{digits}"
    if decpt >= nd:
        return neg + digits + "0" * (decpt - nd)
    return f"{neg}{digits[:decpt]}.{digits[decpt:]}"


def dump(v: Any, depth: int = 0) -> str:
    """Compact JSON as libjq 1.8 prints a value (``tostring``, error messages)."""
    t = type(v)
    if t is str:
        return _dump_str(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if t is int:
        return str(v)
    if t is Double:
        return dtoa(v)
    if t is float:
        if not math.isfinite(v):
            raise NeedsLibjq("non-finite number")
        return str(Decimal(repr(v)))  # a literal: decNumber's canonical spelling
    if depth > MAX_VALUE_DEPTH:
        raise NeedsLibjq("value nested too deeply")
    if t is list:
        return "[" + ",".join([dump(e, depth + 1) for e in v]) + "]"
    if t is dict:
        return "{" + ",".join([_dump_str(k) + ":" + dump(e, depth + 1) for k, e in v.items()]) + "}"
    raise TypeError(f"not a JSON value: {t.__name__}")


def desc(v: Any) -> str:
    """``kind (dump)`` as libjq's type errors describe a value (dump cut to 29 bytes)."""
    return f"{kind(v)} ({trunc(dump(v))})"


def tostring(v: Any) -> str:
    return v if type(v) is str else dump(v)


# ------------------------------------------------------------------------------ numbers


def to_float(v: Any) -> float:
    """The double libjq computes with; integers it could not represent exactly need libjq."""
    if type(v) is int and not -_EXACT <= v <= _EXACT:
        raise NeedsLibjq("integer beyond 2**53")
    return float(v)


def num(x: float) -> Any:
    """A computed number in this module's representation (see the module docstring)."""
    if not math.isfinite(x):
        raise NeedsLibjq("non-finite number")
    if x.is_integer() and -1e16 < x < 1e16 and (x != 0 or math.copysign(1.0, x) > 0):
        return int(x)
    return Double(x)


def export(v: Any, depth: int = 0) -> Any:
    """A result as the ``jq`` binding returns it: integral numbers as ``int`` (through a
    double, as libjq holds them), other numbers as ``float``. Unchanged values are returned
    as they are (no copy)."""
    t = type(v)
    if t is str or t is bool or v is None:
        return v
    if t is int:
        return v if -_EXACT <= v <= _EXACT else int(float(v))
    if t is float or t is Double:
        if not math.isfinite(v):
            raise NeedsLibjq("non-finite number")
        return int(v) if v.is_integer() else float(v)
    if t is not list and t is not dict:
        raise TypeError(f"not a JSON value: {t.__name__}")
    if _exported(v, depth):
        return v
    if t is list:
        return [export(e, depth + 1) for e in v]
    return {k: export(e, depth + 1) for k, e in v.items()}


def _exported(v: Any, depth: int) -> bool:
    """Whether a container already is as the binding returns it (a scan, scalars inline)."""
    if depth > MAX_VALUE_DEPTH:
        raise NeedsLibjq("value nested too deeply")
    for e in v.values() if type(v) is dict else v:
        t = type(e)
        if t is str or e is None or t is bool:
            continue
        if t is int:
            if -_EXACT <= e <= _EXACT:
                continue
            return False
        if t is float:
            if math.isfinite(e) and not e.is_integer():
                continue
            return False
        if (t is dict or t is list) and _exported(e, depth + 1):
            continue
        return False
    return True


# ------------------------------------------------------------------------------ ordering

_RANK: Final[dict[type, int]] = {
    type(None): 0,
    int: 3,
    float: 3,
    Double: 3,
    str: 4,
    list: 5,
    dict: 6,
}


def _rank(v: Any) -> int:
    if v is False:
        return 1
    if v is True:
        return 2
    return _RANK[type(v)]


def cmp(a: Any, b: Any, depth: int = 0) -> int:
    """jq's total order: null < false < true < numbers < strings < arrays < objects; arrays
    element-wise, objects by their sorted key lists, then values in key order."""
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        return -1 if ra < rb else 1
    if ra == 3:
        fa, fb = (a, b) if type(a) is type(b) is int else (to_float(a), to_float(b))
        if type(a) is int and type(b) is int and not (-_EXACT <= a <= _EXACT):
            to_float(a)  # exact either way; but keep libjq's decimal path out of it
        return -1 if fa < fb else (0 if fa == fb else 1)
    if ra == 4:
        return -1 if a < b else (0 if a == b else 1)
    if ra < 3:
        return 0
    if depth > MAX_VALUE_DEPTH:
        raise NeedsLibjq("value nested too deeply")
    if ra == 5:
        for x, y in zip(a, b, strict=False):
            c = cmp(x, y, depth + 1)
            if c:
                return c
        return -1 if len(a) < len(b) else (0 if len(a) == len(b) else 1)
    ka, kb = sorted(a), sorted(b)
    if ka != kb:
        return -1 if ka < kb else 1
    for k in ka:
        c = cmp(a[k], b[k], depth + 1)
        if c:
            return c
    return 0


def equal(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta is str and tb is str:
        return bool(a == b)
    if a is None or b is None or ta is bool or tb is bool:
        return a is b
    return cmp(a, b) == 0


def compare(op: str, a: Any, b: Any) -> bool:
    if op == "==":
        return equal(a, b)
    if op == "!=":
        return not equal(a, b)
    c = cmp(a, b)
    if op == "<":
        return c < 0
    if op == "<=":
        return c <= 0
    if op == ">":
        return c > 0
    return c >= 0


# ------------------------------------------------------------------------------ arithmetic


def plus(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int and -_EXACT < (r := a + b) < _EXACT:
        return r  # exact, hence what the double sum is
    if a is None:
        return b
    if b is None:
        return a
    if is_num(a) and is_num(b):
        return num(to_float(a) + to_float(b))
    ta, tb = type(a), type(b)
    if ta is str and tb is str:
        return a + b
    if ta is list and tb is list:
        return a + b if b else a
    if ta is dict and tb is dict:
        if not b:
            return a
        merged = dict(a)
        merged.update(b)
        return merged
    raise JqError(f"{desc(a)} and {desc(b)} cannot be added")


def minus(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int and -_EXACT < (r := a - b) < _EXACT:
        return r
    if is_num(a) and is_num(b):
        return num(to_float(a) - to_float(b))
    if type(a) is list and type(b) is list:
        return [x for x in a if not any(equal(x, y) for y in b)]
    raise JqError(f"{desc(a)} and {desc(b)} cannot be subtracted")


def _deep_merge(a: dict[str, Any], b: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    if not b:
        return a
    if depth > MAX_VALUE_DEPTH:
        raise NeedsLibjq("value nested too deeply")
    out = dict(a)
    for k, v in b.items():
        old = out.get(k)
        out[k] = _deep_merge(old, v, depth + 1) if type(old) is dict and type(v) is dict else v
    return out


def times(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int and -_EXACT < (r := a * b) < _EXACT:
        return r if r or (a < 0) == (b < 0) else num(float(a) * b)  # 0 * -1 is -0
    if is_num(a) and is_num(b):
        return num(to_float(a) * to_float(b))
    ta, tb = type(a), type(b)
    if ta is dict and tb is dict:
        return _deep_merge(a, b)
    if (ta is str and is_num(b)) or (is_num(a) and tb is str):
        raise NeedsLibjq("string repetition")
    raise JqError(f"{desc(a)} and {desc(b)} cannot be multiplied")


def divide(a: Any, b: Any) -> Any:
    if is_num(a) and is_num(b):
        fb = to_float(b)
        if fb == 0.0:
            raise JqError(f"{desc(a)} and {desc(b)} cannot be divided because the divisor is zero")
        return num(to_float(a) / fb)
    if type(a) is str and type(b) is str:
        raise NeedsLibjq("string division (split)")
    raise JqError(f"{desc(a)} and {desc(b)} cannot be divided")


def modulo(a: Any, b: Any) -> Any:
    if is_num(a) and is_num(b):
        fa, fb = to_float(a), to_float(b)
        if not (abs(fa) < _EXACT and abs(fb) < _EXACT):
            raise NeedsLibjq("remainder of a large number")
        ia, ib = int(fa), int(fb)
        if ib == 0:
            raise JqError(
                f"{desc(a)} and {desc(b)} cannot be divided (remainder) because the divisor is zero"
            )
        r = abs(ia) % abs(ib)
        return -r if ia < 0 else r
    raise JqError(f"{desc(a)} and {desc(b)} cannot be divided (remainder)")


ARITH: Final = {"+": plus, "-": minus, "*": times, "/": divide, "%": modulo}
COMPARISONS: Final = frozenset({"==", "!=", "<", "<=", ">", ">="})
