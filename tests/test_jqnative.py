"""webhook.jqnative against the real libjq (the ``jq`` package): same outputs in the same order,
same ``path()`` results, same error messages.

(a) every catalog expression (and every upstream one, when ``KARTA_UPSTREAM_DIR`` or
/work/upstream-karta holds upstream definitions) on every catalog sample, in both modes;
(b) generated expressions of the subset's grammar on generated objects (hypothesis);
(c) what the parser refuses, and the bounds (depth, outputs, work).
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import jq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from webhook import jqnative
from webhook.definitions import catalog_dir, jq_fields, load_files, parse, read_documents
from webhook.jqnative import JqError, LimitError, NeedsLibjq
from webhook.jqsyntax import WalkError

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
    root = Path(os.environ.get("KARTA_UPSTREAM_DIR", "/work/upstream-karta"))
    found: set[str] = set()
    for f in sorted(root.rglob("*.yaml")) if root.is_dir() else []:
        for label, doc in read_documents(f):
            try:
                found.update(_exprs(parse(doc, label)))
            except Exception:
                continue
    return sorted(found - set(CATALOG))


UPSTREAM = _upstream()


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


# ------------------------------------------------------------------ (a) catalog and upstream


def test_the_catalog_has_non_plain_expressions_to_check() -> None:
    assert len(CATALOG) > 100 and len(SAMPLES) > 40
    assert ".spec.services | to_entries[] | .key" in CATALOG


@pytest.mark.parametrize("expr", CATALOG)
def test_catalog_expression_on_every_sample(expr: str) -> None:
    for mode in ("values", "paths"):
        for obj in SAMPLES:
            assert assert_same(expr, obj, mode), f"needed libjq: {expr!r} ({mode})"


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


@settings(max_examples=150, deadline=None)
@given(st.lists(json_values, max_size=5))
def test_ordering_builtins_match_libjq(items: list[Any]) -> None:
    for expr in (
        "min",
        "max",
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


# ------------------------------------------------------------------ (c) refusals and bounds


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "..",
        ".a[1:2]",
        ".[.a]",
        '.["a","b"]',
        "reduce .[] as $x (0; . + $x)",
        "def f: 1; f",
        "try .a catch 1",
        "label $out | 1",
        ". as [$a] | $a",
        ".a = 1",
        ".a |= 1",
        "$ENV",
        "$__loc__",
        "env",
        "input",
        "@base64",
        "1e3",
        ".5",
        "-0",
        "9007199254740993",
        "limit(1; .[])",
        "foreach .[] as $x (0; 1)",
        "1 < 2 < 3",
        "$undefined",
        "length(1)",
        "splits(1)",
        'test("a")',
        ". as $__loc__ | 1",
        '"\\ud800"',
        "{a: 1 as $x | $x}",
        "{(1,2)}",
        "{a: 1,}",
        "a::b",
        ".a ?// 1",
        "(",
        ")",
        '"unterminated',
        'getpath(["a"])',
        "paths",
        "tojson",
        "sort",
    ],
)
def test_parser_refuses_what_is_outside_the_subset(expr: str) -> None:
    assert jqnative.compile(expr) is None


@pytest.mark.parametrize(
    "expr",
    [
        "(" * 600 + "." + ")" * 600,
        "[" * 600 + "." + "]" * 600,
        "{a:" * 300 + "1" + "}" * 300,
        " + ".join(["1"] * 5000),
        " and ".join(["true"] * 3000),
        "if . then 1 " + "elif . then 1 " * 2000 + "else 2 end",
        '"' + "\\(" * 300 + "1" + ")" * 300 + '"',
        "[.[]" + "|[.[]" * 700 + "]" * 701,
    ],
)
def test_hostile_nesting_is_refused_without_exceptions(expr: str) -> None:
    assert jqnative.compile(expr) is None


def test_moderate_nesting_is_accepted_and_bounded_by_a_parameter() -> None:
    expr = "(" * 40 + ".a" + ")" * 40
    assert jqnative.compile(expr) is not None
    assert jqnative.compile(expr, max_depth=10) is None


@pytest.mark.parametrize(
    ("expr", "obj", "values", "paths"),
    [
        (" | ".join(["."] * 5000), 1, [1], [()]),  # pipes, // and paths are flat: no depth
        (" // ".join([".a"] * 5000) + " // .b", {"b": 2}, [2], [("b",)]),
        (".a" * 3000, {"a": None}, [None], [("a",) * 3000]),
    ],
    ids=["pipes", "alternatives", "fields"],
)
def test_long_flat_chains_evaluate(expr: str, obj: Any, values: Any, paths: Any) -> None:
    prog = jqnative.compile(expr)
    assert prog is not None
    assert prog.values(obj) == values
    assert [p for p, _ in prog.paths(obj)] == paths


def test_errors_are_walk_errors_and_iterating_null_is_recognisable() -> None:
    prog = jqnative.compile(".spec.workerGroupSpecs[] | .template")
    assert prog is not None
    with pytest.raises(WalkError) as e:
        prog.paths({"spec": {}})
    assert e.value.iterates_null and str(e.value) == "Cannot iterate over null (null)"
    with pytest.raises(WalkError) as e:
        prog.values({"spec": {"workerGroupSpecs": 3}})
    assert not e.value.iterates_null
    assert str(e.value) == "Cannot iterate over number (3)"


def test_output_cap_and_work_budget() -> None:
    prog = jqnative.compile(".[]")
    assert prog is not None
    assert len(prog.values(list(range(10)), max_outputs=10)) == 10
    with pytest.raises(LimitError, match="more than 9 results"):
        prog.values(list(range(10)), max_outputs=9)
    blowup = jqnative.compile("[.[] | [.[] , .[]] | .[] | [.[], .[]]] | length")
    assert blowup is not None
    with pytest.raises(LimitError, match="work budget"):
        blowup.values([[list(range(30))] * 30] * 30, budget=10_000)
    try_all = jqnative.compile("(.[] | .[] | .[])?")
    assert try_all is not None
    with pytest.raises(LimitError):  # `?` does not swallow a cap
        try_all.values([[list(range(50))] * 50] * 50, budget=1_000)


def _deep(n: int) -> Any:
    v: Any = {"x": 1.5}
    for _ in range(n):
        v = {"a": v}
    return v


DEEP = _deep(700)


@pytest.mark.parametrize(
    ("expr", "obj"),
    [
        (".a + 1", {"a": 2**60}),
        (".a < 1", {"a": 2**60}),
        ('"12.5" | tonumber', None),
        ('"ab" * 2', None),
        ('"a,b" / ","', None),
        (".a * .a", {"a": 1e200}),
        ('"abc" | index("b")', None),
        (".a | tostring", {"a": DEEP}),
        (". * .", DEEP),
        ("[.a] == [.a | .]", {"a": DEEP}),
        (".a", {"a": DEEP}),  # values are exported (numbers normalised) recursively
        ('.a | ltrimstr("x")', {"a": "xy"}),  # paths mode only, below
    ],
)
def test_needs_libjq_where_exactness_needs_it(expr: str, obj: Any) -> None:
    prog = jqnative.compile(expr)
    assert prog is not None
    mode = "paths" if "ltrimstr" in expr else "values"
    with pytest.raises(NeedsLibjq):
        prog.paths(obj) if mode == "paths" else prog.values(obj)


def test_paths_give_the_objects_inside_the_input() -> None:
    obj = {"spec": {"services": {"b": {"x": 1}, "a": {"y": 2}}}}
    prog = jqnative.compile(".spec.services[] | select(.x // .y)")
    assert prog is not None
    pairs = prog.paths(obj)
    assert [p for p, _ in pairs] == [("spec", "services", "b"), ("spec", "services", "a")]
    assert pairs[0][1] is obj["spec"]["services"]["b"]


def test_values_are_exported_as_the_binding_returns_them() -> None:
    prog = jqnative.compile("[.a, .a * 2, .b, .c]")
    assert prog is not None
    obj = {"a": 1.0, "b": 12345678901234567890, "c": [1.5, 2.0]}
    assert strict(("ok", prog.values(obj))) == strict(libjq("[.a, .a * 2, .b, .c]", obj, "values"))
