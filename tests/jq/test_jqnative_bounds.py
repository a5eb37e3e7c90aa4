"""webhook.jq.native.evaluate: what the parser refuses, the bounds (depth, outputs, work), the cases
that hand over to libjq, and what the results are made of."""

from __future__ import annotations

from typing import Any

import pytest
from jqdiff import libjq, strict

from webhook.jq.native import evaluate as jqnative
from webhook.jq.native.evaluate import LimitError, NeedsLibjq
from webhook.jq.paths import WalkError


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
        # pipes, // and paths are flat: no depth (as long as the text is within its limit)
        (" | ".join(["."] * 4000), 1, [1], [()]),
        (" // ".join([".a"] * 2500) + " // .b", {"b": 2}, [2], [("b",)]),
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
