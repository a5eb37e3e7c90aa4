"""webhook.jq.native.evaluate against the real libjq (the ``jq`` package): same outputs in the same order,
same ``path()`` results, same error messages.

(a) every catalog expression (and every upstream one, when ``KARTA_UPSTREAM_DIR`` names a
folder of upstream definitions; no default) on every catalog sample, in both modes;
(b) generated expressions of the subset's grammar on generated objects (hypothesis);
plus libjq 1.8 facts the evaluator mirrors, pinned. Refusals and bounds:
``tests/jq/test_jqnative_bounds.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jqdiff import assert_same, libjq, native, strict

from webhook.base.documents import read_documents
from webhook.jq.native import evaluate as jqnative
from webhook.karta.loading import catalog_dir, load_files
from webhook.karta.model import jq_fields, parse

SAMPLES = [
    obj for f in sorted((catalog_dir() / "samples").rglob("*.yaml")) for _, obj in read_documents(f)
]


def _exprs(karta: Any) -> list[str]:
    out = []
    for f in jq_fields(karta):
        out.append(f.expr)
        if f.role == "byExpression.expression":  # the status code evaluates these so
            out.append(f"({f.expr}\n) | tostring")
    return out


CATALOG = sorted({e for k in load_files([catalog_dir()]) for e in _exprs(k)})


def _upstream() -> list[str]:
    name = os.environ.get("KARTA_UPSTREAM_DIR")  # no default: no machine's path in the tests
    root = Path(name) if name else None
    found: set[str] = set()
    for f in sorted(root.rglob("*.yaml")) if root is not None and root.is_dir() else []:
        for label, doc in read_documents(f):
            try:
                found.update(_exprs(parse(doc, label)))
            except Exception:
                continue
    return sorted(found - set(CATALOG))


UPSTREAM = _upstream()


# ------------------------------------------------------------------ (a) catalog and upstream


def test_the_catalog_has_non_plain_expressions_to_check() -> None:
    assert len(CATALOG) > 100 and len(SAMPLES) > 40
    assert ".spec.services | to_entries[] | .key" in CATALOG


#: Catalog expressions outside the native subset, each with why. They run in the libjq sandbox;
#: none is evaluated on /mutate (pod-side selectors, read by live describe).
NEEDS_LIBJQ = {
    "fromjson: the pod's workflows.argoproj.io/template annotation holds the template as JSON"
    " text (Argo Workflow's componentInstanceSelector.idPath)": "| fromjson? | .name",
}


def _needs_libjq(expr: str) -> bool:
    return any(part in expr for part in NEEDS_LIBJQ.values())


@pytest.mark.parametrize("expr", CATALOG)
def test_catalog_expression_on_every_sample(expr: str) -> None:
    if _needs_libjq(expr):  # still outside the subset (else it leaves the list) and libjq runs it
        assert jqnative.compile(expr) is None, f"native now: take it off NEEDS_LIBJQ: {expr!r}"
        assert all(libjq(expr, obj, "values")[0] == "ok" for obj in SAMPLES)
        return
    for mode in ("values", "paths"):
        for obj in SAMPLES:
            assert assert_same(expr, obj, mode), f"needed libjq: {expr!r} ({mode})"


def test_what_needs_libjq_is_never_evaluated_on_mutate() -> None:
    """The listed expressions are all pod-side (a mutation evaluates the workload's only)."""
    listed = [
        (f.role, f.field.subject)
        for k in load_files([catalog_dir()])
        for f in jq_fields(k)
        if _needs_libjq(f.expr)
    ]
    assert listed and all(subject == "pod" for _, subject in listed), listed


#: Upstream expressions that are not jq (a path without its leading dot): libjq reports them.
NOT_JQ_PREFIXES = ("spec.", "metadata")


@pytest.mark.skipif(not UPSTREAM, reason="no upstream definitions (KARTA_UPSTREAM_DIR)")
@pytest.mark.parametrize("expr", UPSTREAM)
def test_upstream_expression_on_every_sample(expr: str) -> None:
    if expr.startswith(NOT_JQ_PREFIXES):
        assert jqnative.compile(expr) is None
        return
    for mode in ("values", "paths"):
        for obj in SAMPLES:
            assert assert_same(expr, obj, mode), f"needed libjq: {expr!r} ({mode})"


#: libjq 1.8 behaviour the evaluator mirrors, pinned (a libjq upgrade that changes one fails
#: here first): (expression, input, mode, libjq's result or error).
FACTS = [
    ("(5 | .a) // 7", None, "values", ("error", 'Cannot index number with string ("a")')),
    ("[.a // .b]", {"b": 1}, "values", ("ok", [[1]])),
    ("1 + .a as $x | $x * $x", {"a": 3}, "values", ("ok", [16])),  # source: 1 + .a
    ("[1, .a as $x | $x, 5]", {"a": 3}, "values", ("ok", [[1, 3, 5]])),
    ("[(1,2) + (10,20)]", None, "values", ("ok", [[11, 12, 21, 22]])),
    ('{(1, "a"): error("v")}', None, "values", ("error", "v")),
    ('[(1, error("x"), 2)?]', None, "values", ("ok", [[1]])),
    ("last", [1, 2], "paths", ("ok", [(-1,)])),
    (
        ".a and .b",
        {"a": True, "b": 1},
        "paths",
        ("error", 'Invalid path expression near attempt to access element "b" of {"a":true,"b":1}'),
    ),
    (".a | any", {"a": [True]}, "paths", ("ok", [("a", 0)])),
    ("last(.a[])", {"a": [1, 2]}, "paths", ("error", "Invalid path expression with result 2")),
    ("first(.a[])", {"a": [1, 2]}, "paths", ("ok", [("a", 0)])),
    (".a | . + null", {"a": 3}, "paths", ("ok", [("a",)])),
    (".a | tostring", {"a": "s"}, "paths", ("ok", [("a",)])),
    (
        ".a | ascii_downcase",
        {"a": "s"},
        "paths",
        ("error", "Invalid path expression near attempt to iterate through [115]"),
    ),
    (
        "[.a, .b] | min",
        {"a": 2, "b": 1},
        "paths",
        ("error", "Invalid path expression with result 1"),
    ),
    ('ltrimstr("a")', 1, "values", ("error", "startswith() requires string inputs")),
    (
        "[.[] * 1 | tostring]",
        [1e-5, 1e16, 1.5e16, -0.0],
        "values",
        ("ok", [["1e-05", "1e+16", "15000000000000000", "-0"]]),
    ),
    ("[.[] | tostring]", [1e-5, 1e16, 1.0], "values", ("ok", [["0.00001", "1E+16", "1.0"]])),
    (".", [1.0, 2**60 + 1], "values", ("ok", [[1, 2**60]])),
    ("[.[] | floor]", [3.7, 2, 0.5], "values", ("ok", [[3, 2, 0]])),
    ('"a" | floor', None, "values", ("error", 'string ("a") number required')),
    (".a | floor", {"a": 1.5}, "paths", ("error", "Invalid path expression with result 1")),
    ('[.[] | IN("", "Pending")]', ["", "x", "Pending"], "values", ("ok", [[True, False, True]])),
    ("IN(.a[])", {"a": [1]}, "values", ("ok", [False])),
]


@pytest.mark.parametrize(("expr", "obj", "mode", "want"), FACTS)
def test_libjq_facts(expr: str, obj: Any, mode: str, want: tuple[str, Any]) -> None:
    assert strict(libjq(expr, obj, mode)) == strict(want)
    prog = jqnative.compile(expr)
    if expr.startswith("{(1") or "error" in expr:  # error/1 is not in the subset
        assert prog is None
        return
    assert prog is not None
    assert strict(native(prog, obj, mode)) == strict(want)


# ------------------------------------------------------------------ (b) generated


FIELDS = ["a", "b", "spec", "replicas", "name", "if", "é"]
KEYS = [*FIELDS, "", "x y", "k/1"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0, 1, 2, 10, 2**31, -7, 2**53, 2**60]),
    st.sampled_from([0.5, 1.5, -2.5, 1.0, 0.1, 1e-5, 1e16, 1e17, 3.0, -0.0, 123.456, 1e300]),
    st.sampled_from(["", "a", "b", "A", "é", "x y", "spec", "1", "-3", "Ab-c", 'a\n"b']),
    st.text(max_size=4),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
    ),
    max_leaves=12,
)
objects = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5)

LITERALS = ["null", "true", "false", "0", "1", "2", "-1", "1.5", '"a"', '""', '"é"', '"x\\"y"']
UNARY = [
    "length",
    "keys",
    "keys_unsorted",
    "to_entries",
    "tostring",
    "tonumber",
    "type",
    "not",
    "ascii_downcase",
    "ascii_upcase",
    "min",
    "max",
    "add",
    "first",
    "last",
    "values",
    "any",
    "all",
    "empty",
]
CALL1 = [
    "select",
    "first",
    "last",
    "map",
    "any",
    "all",
    "ltrimstr",
    "rtrimstr",
    "startswith",
    "endswith",
    "split",
    "has",
    "index",
]
BINARY = ["|", ",", "//", "and", "or", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"]


def _path_step(draw: Any) -> str:
    return draw(
        st.sampled_from(
            [
                ".a",
                ".b",
                ".spec",
                ".replicas",
                ".name",
                '."x y"',
                '.["é"]',
                "[0]",
                "[1]",
                "[-1]",
                "[]",
                ".[]",
                "?",
                ".if",
            ]
        )
    )


@st.composite
def expressions(draw: Any, depth: int = 3, names: tuple[str, ...] = ()) -> str:
    if depth <= 0 or draw(st.integers(0, 4)) == 0:
        kind = draw(
            st.sampled_from(
                ["path", "path", "literal", "var"] if names else ["path", "path", "literal"]
            )
        )
        if kind == "literal":
            return draw(st.sampled_from(LITERALS))
        head = (
            "$" + draw(st.sampled_from(names))
            if kind == "var"
            else draw(st.sampled_from([".", ".a", ".b", ".spec", ".[]"]))
        )
        steps = "".join(_path_step(draw) for _ in range(draw(st.integers(0, 3))))
        if head == "." and steps.startswith("."):
            head = ""  # ".a", not "..a"
        return head + steps

    def sub(d: int = depth - 1, ns: tuple[str, ...] = names) -> str:
        return draw(expressions(d, ns))

    form = draw(st.integers(0, 11))
    if form <= 2:
        text = f"{sub()} {draw(st.sampled_from(BINARY))} {sub()}"
    elif form == 3:
        text = f"{sub()} | {draw(st.sampled_from(UNARY))}"
    elif form == 4:
        name = draw(st.sampled_from(CALL1))
        text = f"{name}({sub()})" if draw(st.booleans()) else f"{sub()} | {name}({sub()})"
    elif form == 5:
        text = f"any({sub()}; {sub()})" if draw(st.booleans()) else f"all({sub()}; {sub()})"
    elif form == 6:
        tail = f" elif {sub()} then {sub()}" if draw(st.booleans()) else ""
        other = f" else {sub()}" if draw(st.booleans()) else ""
        text = f"if {sub()} then {sub()}{tail}{other} end"
    elif form == 7:
        var = draw(st.sampled_from(["v", "w"]))
        text = f"{sub()} as ${var} | {sub(ns=(*names, var))}"
    elif form == 8:
        text = f"[{sub()}]" if draw(st.booleans()) else "[]"
    elif form == 9:
        key = draw(
            st.sampled_from(["a", "b", '"x y"', "if", f"({sub()})", "$v" if "v" in names else "a"])
        )
        text = f"{{{key}: {sub()}, b: {sub()}}}" if draw(st.booleans()) else f"{{{key}: {sub()}}}"
        if draw(st.integers(0, 3)) == 0:
            text = "{a, b}"
    elif form == 10:
        text = f'"<\\({sub()})-\\({sub()})>"'
    else:
        text = f"({sub()})?" if draw(st.booleans()) else f"{sub()}?"
    return f"({text})" if draw(st.booleans()) else text


def _check_generated(expr: str, obj: Any) -> None:
    prog = jqnative.compile(expr)
    assume(prog is not None)
    for mode in ("values", "paths"):
        assume(assert_same(expr, obj, mode))


@settings(
    max_examples=1200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(expressions(), objects)
def test_generated_expressions_match_libjq(expr: str, obj: Any) -> None:
    _check_generated(expr, obj)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["+", "-", "*", "/", "%"]),
    st.one_of(
        st.integers(-(10**6), 10**6),
        st.floats(-1e20, 1e20, allow_nan=False),
        st.sampled_from([1e-7, 2.5e15, 1.5e16, 1e-4]),
    ),
    st.one_of(st.integers(-1000, 1000), st.floats(-1e6, 1e6, allow_nan=False)),
)
def test_arithmetic_and_number_printing_match_libjq(op: str, a: Any, b: Any) -> None:
    obj = {"a": a, "b": b}
    for expr in (
        f".a {op} .b",
        f".a {op} .b | tostring",
        f"[.a {op} .b, .a] | tostring",
        f".a {op} .b | length",
        f".a {op} .b < .a",
    ):
        assert_same(expr, obj, "values")


#: Values that compare equal but print differently: which of tied elements wins shows.
TIES = [1, 1.0, 3.0, 3, 0, -0.0, 0.0, "a", None, False, [1], [1.0], {"a": 1}, {"a": 1.0}]


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.lists(json_values, max_size=5), st.lists(st.sampled_from(TIES), max_size=6)))
def test_ordering_builtins_match_libjq(items: list[Any]) -> None:
    for expr in (
        "min",
        "max",
        "min | tostring",
        "max | tostring",
        "[min, max, .[0]] | tostring",
        "[.[] | tostring]",
        "[.[0] < .[1], .[0] == .[1]]",
        "keys",
        "to_entries",
        "add",
        "any",
        "all",
        "map(type)",
        "index(1)",
        "[.[] | length?]",
    ):
        assert_same(expr, items, "values")
    assert_same(".[] | select(. != null)", items, "paths")
