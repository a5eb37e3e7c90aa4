"""The jq engine (webhook.jq.engine): the sandbox's bounds, absent values, native walk = libjq."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jq
import pytest
from helpers import ENGINE, SAMPLES

from webhook.base.documents import read_documents
from webhook.jq import engine
from webhook.jq.engine import Mode, Outcome, plain, prepare, walked
from webhook.jq.paths import parse_guarded
from webhook.karta.loading import catalog_dir, load_files
from webhook.karta.model import jq_fields


def test_sandbox_has_no_environment_and_is_bounded() -> None:
    # Even past the screen, the sandbox child has an empty environment.
    out = ENGINE.values("$ENV | length", {})
    assert out.items == [0]
    slow = ENGINE.values("def f: f; f", {}, timeout=0.5)
    assert slow.error and "timed out" in slow.error
    assert ENGINE.values(".a + 1", {"a": 1}).items == [2]  # a fresh child after the kill
    assert ENGINE.compile_errors([".a |"])[0]


def test_iterating_absent_list_is_absent_not_error() -> None:
    out = ENGINE.locations(".spec.workerGroupSpecs[].template", {"spec": {}})
    assert out.absent and out.error is None and out.items == []
    out = ENGINE.locations(".spec.x[] | select(.a) | .t", {"spec": {}})
    assert out.absent and out.error is None
    out = ENGINE.locations(".spec.x[] | {a: .}", {"spec": {"x": [1]}})
    assert out.error and "Invalid path expression" in out.error


def _catalog_workload_fields() -> Iterator[tuple[str, Any, list[Any]]]:
    """Each catalog definition's jq fields read on the workload, with its kind's stem and
    samples."""
    for karta in load_files([catalog_dir()]):
        stem = Path(karta.source).stem
        objs = [
            obj for f in sorted((SAMPLES / stem).glob("*.yaml")) for _, obj in read_documents(f)
        ]
        for field in jq_fields(karta):
            if field.subject == "workload":
                yield stem, field, objs


def _plain_catalog_cases() -> list[Any]:
    return [
        pytest.param(field.expr, objs, id=f"{stem}:{field.path}")
        for stem, field, objs in _catalog_workload_fields()
        if plain(field.expr) is not None
    ]


@pytest.mark.parametrize(("expr", "objs"), _plain_catalog_cases())
def test_native_walk_equals_libjq_on_every_catalog_path(expr: str, objs: list[Any]) -> None:
    program = jq.compile(f"[path({expr})]")
    for obj in objs:
        try:
            want = program.input_value(obj).first()
        except ValueError as e:
            got = ENGINE.locations(expr, obj)
            assert got.items == [] and (got.absent or got.error), (expr, str(e))
            continue
        got = ENGINE.locations(expr, obj)
        assert [list(p) for p, _ in got.items] == want


def _guarded_catalog_cases() -> list[Any]:
    """Every catalog expression the engine walks as a guarded form (``(P // empty)[]...``,
    ``P // empty | .template``, ``P // empty | "name"``), with its kind's samples."""
    return [
        pytest.param(field.expr, found[1], objs, id=f"{stem}:{field.path}")
        for stem, field, objs in _catalog_workload_fields()
        if plain(field.expr) is None and (found := parse_guarded(field.expr)) is not None
    ]


@pytest.mark.parametrize(("expr", "const", "objs"), _guarded_catalog_cases())
def test_guarded_walk_equals_libjq_on_every_catalog_expression(
    expr: str, const: str | None, objs: list[Any]
) -> None:
    """Values (and, without a constant tail, locations) as libjq gives them, on every sample
    and on the sample with parts missing or null."""
    values = jq.compile(f"[{expr}]")
    paths = jq.compile(f"[path({expr})]")
    variants = [*objs, {}, {"spec": {}}, {"spec": None}]
    for obj in variants:
        got = ENGINE.values(expr, obj)
        try:
            want = values.input_value(obj).first()
        except ValueError as e:
            assert got.items == [] and got.error == str(e), expr
            continue
        assert got.ok and got.items == want, (expr, obj)
        if const is None:
            located = ENGINE.locations(expr, obj)
            assert [list(p) for p, _ in located.items] == paths.input_value(obj).first()


def test_the_catalog_optional_parts_are_guarded_forms() -> None:
    assert len(_guarded_catalog_cases()) > 100


#: The result bound these tests walk past: the engine's own (1.5 million, base.limits) made
#: small for them, as walking past it takes minutes and the code is the same at any bound.
SMALL_BOUND = 1_000


@pytest.fixture
def small_bound(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(engine, "MAX_RESULTS", SMALL_BOUND)
    return SMALL_BOUND


def _shared_cases() -> list[Any]:
    many = {"spec": {"jobs": [{"name": str(i)} for i in range(engine.MAX_RESULTS + 1)]}}
    return [
        {"spec": {"jobs": [{"name": "a", "template": {"spec": {}}}, {"name": "b"}]}},
        {"spec": {"jobs": {"x": {"name": "a", "template": 1}, "y": None}}},
        {"spec": {"jobs": []}},
        {"spec": {}},  # iterating null: absent
        {"spec": {"jobs": [{"name": "a"}, 3]}},  # a key of a number: an error
        {"spec": {"jobs": [{"name": "a", "template": "t"}]}},  # .template.spec of a string
        {"spec": {"jobs": 7}},
        many,  # more results than allowed
    ]


def test_paths_iterating_the_same_places_are_walked_once_with_the_same_outcomes(
    small_bound: int,
) -> None:
    """A batch whose paths all iterate the same places (a definition's template and id paths)
    is walked once; its outcomes are those of walking each path, failures included."""
    batch = [
        (".spec.jobs[].name", "values"),
        (".spec.jobs[].template.spec", "paths"),
        (".spec.jobs[]", "values"),
    ]
    prepared = prepare(batch)
    assert prepared.shared == (
        (("spec", "jobs"),),
        ((("name",), False), (("template", "spec"), True), ((), False)),
    )
    alone = dataclasses.replace(prepared, shared=None)
    for obj in _shared_cases():
        assert ENGINE.evaluate(prepared, obj) == ENGINE.evaluate(alone, obj), obj
    many = ENGINE.evaluate(prepared, _shared_cases()[-1])
    assert all(o.error == f"more than {small_bound} results" for o in many)


@pytest.mark.parametrize(
    "batch",
    [
        [(".spec.jobs[].template.spec", "paths")],  # one path
        [(".spec.jobs[].name", "values")],
        [(".spec.jobs", "paths")],  # keys only
        [(".spec.jobs", "paths"), (".spec.name", "values"), (".spec", "values")],
        [(".", "paths")],
        [(".spec.jobs.x.template", "paths"), (".spec.jobs.y.template", "paths")],
    ],
)
def test_one_path_or_paths_of_keys_alone_are_walked_with_the_same_outcomes(
    batch: list[tuple[str, Mode]], small_bound: int
) -> None:
    """One path alone, or paths that do not iterate, are walked as one batch too (the fast
    lane then takes the walk's lists as they are); the outcomes are those of each path."""
    prepared = prepare(batch)
    assert prepared.shared is not None
    alone = dataclasses.replace(prepared, shared=None)
    cases = [*_shared_cases(), {"spec": "text"}, {"spec": None}, {}, 5, None, "s", [1]]
    for obj in cases:
        assert ENGINE.evaluate(prepared, obj) == ENGINE.evaluate(alone, obj), obj
        items = walked(prepared, obj)
        if items is not None:
            assert [Outcome(i) for i in items] == ENGINE.evaluate(alone, obj)


GUARDED_BATCHES: list[list[tuple[str, Mode]]] = [
    [
        ("(.spec.jobs // empty)[].template.spec", "paths"),
        ("(.spec.jobs // empty)[].name", "values"),
        ("(.spec.jobs // empty)[] | .template // empty | .spec", "values"),
        ('(.spec.jobs // empty)[] | .name // empty | "id"', "values"),
    ],
    [
        (".spec.jobs.x // empty | .template", "paths"),
        ('.spec.jobs.x // empty | "x"', "values"),
        (".spec.jobs.y // empty | .name", "values"),
        (".spec.name", "values"),
        (".spec.jobs // empty", "paths"),
    ],
    [("(. // empty)", "paths")],
]


@pytest.mark.parametrize("batch", GUARDED_BATCHES)
def test_guarded_paths_are_walked_together_with_the_same_outcomes(
    batch: list[tuple[str, Mode]], small_bound: int
) -> None:
    """Guarded forms and constant tails are walked as one batch too; the outcomes are those
    of evaluating each (the walk alone, and libjq's values)."""
    prepared = prepare(batch)
    assert prepared.shared is not None
    alone = dataclasses.replace(prepared, shared=None)
    extra = [{"spec": {"jobs": {"x": False, "y": {"name": None}}}}, {"spec": {"jobs": False}}]
    cases = [*_shared_cases(), *extra, {"spec": "text"}, {"spec": None}, {}, 5, None, "s", [1]]
    for obj in cases:
        outs = ENGINE.evaluate(alone, obj)
        assert ENGINE.evaluate(prepared, obj) == outs, obj
        items = walked(prepared, obj)
        if items is not None:
            assert [Outcome(i) for i in items] == outs
        for (expr, mode), out in zip(batch, outs, strict=True):
            if mode != "values" or out.absent or "more than" in (out.error or ""):
                continue
            try:
                want = jq.compile(f"[{expr}]").input_value(obj).first()
            except ValueError as e:
                assert out.error == str(e)
                continue
            assert out.items == want, (expr, obj)


def test_a_constant_tail_in_paths_mode_is_not_walked() -> None:
    """``path(P // empty | "name")`` is an error; the evaluators say which, as libjq does."""
    expr = '.spec.x // empty | "x"'
    prepared = prepare([(expr, "paths")])
    assert prepared.shared is None and prepared.forms[0][0] is None
    out = ENGINE.locations(expr, {"spec": {"x": 1}})
    with pytest.raises(ValueError) as e:
        jq.compile(f"[path({expr})]").input_value({"spec": {"x": 1}}).first()
    assert out.error == str(e.value)
    assert ENGINE.locations(expr, {"spec": {}}).items == []


@pytest.mark.parametrize(
    "batch",
    [
        [(".spec.jobs[].name", "values"), (".spec.other[].name", "values")],
        [(".spec.jobs[].name", "values"), (".spec.jobs[].x[].y", "paths")],
        [(".spec.jobs[].name", "values"), (".spec.name", "values")],  # one iterates
        [(".spec.jobs[].name", "values"), (".spec.jobs[0].name", "values")],  # an index
        [(".spec.jobs[].name", "values"), (".spec.jobs[] | keys[]", "values")],  # not plain
        [(".spec.jobs[].name", "values"), (".spec.jobs[].name", "compile")],
    ],
)
def test_paths_that_do_not_iterate_the_same_places_are_walked_each(
    batch: list[tuple[str, Mode]],
) -> None:
    assert prepare(batch).shared is None
