"""The tokens of the native evaluator's paths mode (:mod:`webhook.jq.native.paths`): a token
says which jv a value is. Values reached by steps from the input are named by their place
``(id(parent), key)`` (the input is :data:`ROOT`); values built by the expression are fresh
(None); an element of a built container may still be a jv of the input, so it is
:data:`UNKNOWN`, and an identity check on it (:func:`identical`) needs libjq
(:class:`~webhook.jq.native.ops.NeedsLibjq`). (Elements of ``[...]`` and ``{...}`` keep their
tokens in a :class:`Built` token.) Here too: the token of a child, of ``a + b``, and a
builtin's output with its token (:func:`unary`, :func:`binary`).
"""

from __future__ import annotations

from typing import Any, Final

from webhook.jq.native import ops
from webhook.jq.native.functions import BINARY, UNARY, members, minmax, trimmed
from webhook.jq.native.ops import JqError, NeedsLibjq

__all__ = [
    "ROOT",
    "UNKNOWN",
    "Built",
    "Out",
    "binary",
    "child_token",
    "identical",
    "plus_token",
    "unary",
]


Out = tuple[Any, Any, Any]  # (value, token, state)

ROOT: Final = (0, None)
UNKNOWN: Final = object()


class Built:
    """The token of an array or object built by ``[...]`` or ``{...}``: a fresh value whose
    elements' tokens are known (``min`` of ``[.a, .b]`` is ``.a`` or ``.b`` itself)."""

    __slots__ = ("elems",)

    def __init__(self, elems: list[Any] | dict[str, Any]) -> None:
        self.elems = elems


def identical(v: Any, tok: Any, st: Any) -> bool:
    vap, vtok = st[1], st[2]
    if v is None or v is True or v is False or vap is None or vap is True or vap is False:
        return v is vap
    if tok is UNKNOWN:
        raise NeedsLibjq("identity of an element of a constructed value")
    return tok is not None and tok == vtok


def child_token(parent: Any, ptok: Any, key: Any) -> Any:
    if type(key) is int and key < 0 and type(parent) is list:
        key += len(parent)
    if type(ptok) is Built:
        elems = ptok.elems
        if isinstance(elems, list):
            return elems[key] if 0 <= key < len(elems) else None
        return elems.get(key)
    if ptok is None or ptok is UNKNOWN:
        return UNKNOWN
    return (id(parent), key)


def plus_token(a: Out, b: Out) -> Any:
    """The token of ``a + b``: libjq returns an operand itself when the other is null or an
    empty array/object (``. + []``), a new value otherwise."""
    av, bv = a[0], b[0]
    if av is None:
        return b[1]
    if bv is None or (type(av) is type(bv) and type(av) in (list, dict) and not bv):
        return a[1]
    return None


def unary(name: str, v: Any, tok: Any, st: Any) -> Out:
    if name in ("ascii_downcase", "ascii_upcase") and st is not None:
        if type(v) is not str:
            raise JqError("explode input must be a string")
        codes = ops.dump([ord(c) for c in v])  # libjq maps over explode's fresh array
        raise JqError(f"Invalid path expression near attempt to iterate through {ops.trunc(codes)}")
    if name == "add":
        if st is not None and not identical(v, tok, st):
            raise JqError(
                f"Invalid path expression near attempt to iterate through {ops.trunc(ops.dump(v))}"
            )
        acc: Out = (None, None, None)
        members(v)  # libjq's error for anything but an array or object
        pairs: Any = enumerate(v) if type(v) is list else v.items()
        for k, e in pairs:
            item = (e, child_token(v, tok, k), None)
            acc = (ops.plus(acc[0], e), plus_token(acc, item), None)
        return (acc[0], acc[1], st)
    if name in ("min", "max"):
        i = minmax(v, is_min=name == "min")
        if i is None:
            return (None, None, st)
        return (v[i], child_token(v, tok, i), st)
    r = UNARY[name](v)
    keep = (name == "tostring" and type(v) is str) or (name == "tonumber" and ops.is_num(v))
    return (r, tok if keep else None, st)


def binary(name: str, v: Any, tok: Any, st: Any, arg: Any) -> Out:
    if name == "index" and st is not None:
        raise NeedsLibjq("index in a path expression")
    if name in ("ltrimstr", "rtrimstr"):
        r = trimmed(v, arg, end=name == "rtrimstr")
        if r is None:
            return (v, tok, st)
        if st is not None:
            raise NeedsLibjq(f"{name} in a path expression (a slice)")
        return (r, None, st)
    return (BINARY[name](v, arg), None, st)
