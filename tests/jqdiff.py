"""Differential checking of webhook.jq.native.evaluate against the real libjq (the ``jq`` package),
shared by the jqnative tests."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jq

from webhook.jq.native import evaluate as jqnative
from webhook.jq.native.evaluate import JqError, NeedsLibjq


@cache
def _libjq(program: str) -> Any:
    return jq.compile(program)


def libjq(expr: str, obj: Any, mode: str) -> tuple[str, Any]:
    program = f"[path({expr}\n)]" if mode == "paths" else f"[{expr}\n]"
    try:
        out = _libjq(program).input_value(obj).first()
    except ValueError as e:
        return ("error", str(e))
    return ("ok", [tuple(p) for p in out] if mode == "paths" else out)


def native(prog: jqnative.Program, obj: Any, mode: str) -> tuple[str, Any]:
    try:
        if mode == "paths":
            pairs = prog.paths(obj, max_outputs=10**6)
            for path, value in pairs:  # values are the objects inside obj
                assert value is _getpath(obj, path) or value == _getpath(obj, path)
            return ("ok", [p for p, _ in pairs])
        return ("ok", prog.values(obj, max_outputs=10**6))
    except JqError as e:
        return ("error", str(e))


def _getpath(obj: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        if obj is None:
            return None
        obj = obj.get(k) if isinstance(k, str) else (obj[k] if -len(obj) <= k < len(obj) else None)
    return obj


def strict(result: tuple[str, Any]) -> str:
    """Equality that tells 1 from 1.0 and True from 1, and sees key order."""
    return json.dumps(result)


def assert_same(expr: str, obj: Any, mode: str) -> bool:
    """Native and libjq agree; False when native asked for libjq (NeedsLibjq)."""
    prog = jqnative.compile(expr)
    assert prog is not None, f"not in the subset: {expr!r}"
    try:
        got = native(prog, obj, mode)
    except NeedsLibjq:
        return False
    want = libjq(expr, obj, mode)
    assert strict(got) == strict(want), f"{expr!r} ({mode}) on {json.dumps(obj)[:300]}"
    return True
