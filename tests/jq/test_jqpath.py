"""Tests for webhook.jq.paths: plain-path parsing and the native walk, against libjq.

The walk is only worth having if it is indistinguishable from libjq, so most walk tests compare
with the real thing (``import jq``) rather than with hand-written expectations.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jq
import pytest

from webhook.base.pointers import to_pointer
from webhook.jq.paths import (
    GStep,
    Guard,
    GuardedRun,
    Index,
    Iterate,
    Key,
    Step,
    WalkError,
    parse_guarded,
    parse_plain,
    segments,
    walk,
    walk_objects,
    walk_shared,
)

# --------------------------------------------------------------------------------------------
# parse_plain
# --------------------------------------------------------------------------------------------

PLAIN: list[tuple[str, tuple[Step, ...]]] = [
    (".", ()),
    (".a", (Key("a"),)),
    (
        ".spec.replicatedJobs[].template.spec.template",
        (
            Key("spec"),
            Key("replicatedJobs"),
            Iterate(),
            Key("template"),
            Key("spec"),
            Key("template"),
        ),
    ),
    (
        ".spec.pytorchReplicaSpecs.Master.template",
        (Key("spec"), Key("pytorchReplicaSpecs"), Key("Master"), Key("template")),
    ),
    (".spec.X | .[] | .template", (Key("spec"), Key("X"), Iterate(), Key("template"))),
    (".spec.X[] | .podTemplate", (Key("spec"), Key("X"), Iterate(), Key("podTemplate"))),
    (".spec.a.[0]", (Key("spec"), Key("a"), Index(0))),
    ('.["k/with/slash"].b', (Key("k/with/slash"), Key("b"))),
    ('."a b"', (Key("a b"),)),
    ('.a."b~c"', (Key("a"), Key("b~c"))),
    ('.a["b"][2][]', (Key("a"), Key("b"), Index(2), Iterate())),
    (".a.[]", (Key("a"), Iterate())),
    (".[0]", (Index(0),)),
    (".[00]", (Index(0),)),
    (".[]", (Iterate(),)),
    (".[][]", (Iterate(), Iterate())),
    (". | .a | .", (Key("a"),)),
    (" .a  .b ", (Key("a"), Key("b"))),
    (". .a", (Key("a"),)),
    (". [0]", (Index(0),)),
    (".a # the a\n| .b", (Key("a"), Key("b"))),
    ('.""', (Key(""),)),
    ('."\\u00e9\\n"', (Key("é\n"),)),
    (".if.end.and", (Key("if"), Key("end"), Key("and"))),
    (".__loc__", (Key("__loc__"),)),
    (".[2147483647]", (Index(2147483647),)),
]


@pytest.mark.parametrize(("expr", "steps"), PLAIN)
def test_parse_plain(expr: str, steps: tuple[Step, ...]) -> None:
    assert parse_plain(expr) == steps


NOT_PLAIN: list[str] = [
    "",
    "   ",
    "# only a comment",
    ".a?",
    ".a[]?",
    ".a // .b",
    ".a | select(.b)",
    ".[-1]",
    ".[1:2]",
    ".[:2]",
    ".[1.5]",
    ".[1e2]",
    ".[2147483648]",
    ".a + 1",
    ".a, .b",
    "$x",
    "$__loc__",
    "..",
    "..a",
    ".a..b",
    ".a.",
    ". .",
    ".a | [0]",  # array construction, not an index
    "[0]",
    "[]",
    ".a | []",
    '."\\(1)"',
    '.["\\(1)"]',
    '.[@base64 "x"]',
    '."\\ud800"',  # lone surrogate: jq rejects it
    ".[.a]",
    '.["a", "b"]',
    ".a as $x | .b",
    "env",
    "keys[]",
    ".a |",
    "| .a",
    '"abc',
    ".a | .b = 1",
    ".[0, 1]",
    "{a: .b}",
    "(.a)",
    ".a | not",
]


@pytest.mark.parametrize("expr", NOT_PLAIN)
def test_parse_plain_rejects(expr: str) -> None:
    assert parse_plain(expr) is None


@pytest.mark.parametrize(("expr", "steps"), PLAIN)
def test_plain_examples_mean_the_same_to_libjq(expr: str, steps: tuple[Step, ...]) -> None:
    """Each accepted spelling is a jq path expression that libjq evaluates as we walk it."""
    for obj in (None, {}, [], {"a": {"b": [1, {"x": 2}]}, "spec": {"X": [{"template": 3}]}}):
        assert native(expr, obj) == libjq(expr, obj)


# --------------------------------------------------------------------------------------------
# walk vs libjq
# --------------------------------------------------------------------------------------------


def libjq(expr: str, obj: Any) -> tuple[str, Any]:
    """What libjq says: ("ok", [(path, value), ...]) or ("error", message)."""
    try:
        paths = jq.compile(f"[path({expr})]").input_value(obj).first()
        values = jq.compile(f"[{expr}]").input_value(obj).first()
    except ValueError as e:
        return "error", str(e)
    assert len(paths) == len(values)
    return "ok", [(tuple(p), v) for p, v in zip(paths, values, strict=True)]


def native(expr: str, obj: Any) -> tuple[str, Any]:
    steps = parse_plain(expr)
    assert steps is not None, expr
    try:
        return "ok", [(p, _lossy(v)) for p, v in walk(steps, obj)]
    except WalkError as e:
        return "error", str(e)


def _lossy(value: Any) -> Any:
    """``value`` as the jq binding returns it: integers beyond 2**53 come back as doubles.

    libjq 1.8 keeps number literals in error messages, but the Python binding's results go
    through doubles (10**25 comes back as 10000000000000000905969664). The walk returns the
    object's own, exact values, so compare modulo that loss.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > 2**53:
        return int(float(value))
    if isinstance(value, list):
        return [_lossy(v) for v in value]
    if isinstance(value, dict):
        return {k: _lossy(v) for k, v in value.items()}
    return value


LONG = "x" * 40
JOBSET = {
    "spec": {
        "replicatedJobs": [
            {"name": "w", "template": {"spec": {"template": {"spec": {"containers": []}}}}},
            {"name": "d", "template": {"spec": {"template": None}}},
            {"name": "e", "template": {}},
        ]
    }
}
UNSORTED = {"spec": {"zeta": {"t": 1}, "alpha": {"t": 2}, "mid": {"t": 3}, "Beta": {"t": 4}}}

CASES: list[tuple[str, Any]] = [
    (".", {"a": 1}),
    (".", None),
    (".", 3),
    (".spec.replicatedJobs[].template.spec.template", JOBSET),
    (".spec.replicatedJobs[].template", {"spec": {}}),  # iterate over null
    (".spec.replicatedJobs[].template", {"spec": {"replicatedJobs": {}}}),
    (".spec.replicatedJobs[].template", {"spec": {"replicatedJobs": "abc"}}),
    (".spec.replicatedJobs[].template", {"spec": {"replicatedJobs": 3}}),
    (".spec.replicatedJobs[].template", {"spec": {"replicatedJobs": True}}),
    (".spec.replicatedJobs[].template", {"spec": {"replicatedJobs": [1]}}),
    (".spec.replicatedJobs[].template", {"spec": {"replicatedJobs": [None, {"template": 1}]}}),
    (".spec.pytorchReplicaSpecs.Master.template", {"spec": {"pytorchReplicaSpecs": {}}}),
    (".spec.pytorchReplicaSpecs.Master.template", {"spec": None}),
    (".spec.pytorchReplicaSpecs.Master.template", None),
    (".spec.pytorchReplicaSpecs.Master.template", {"spec": []}),
    (".spec.pytorchReplicaSpecs.Master.template", {"spec": "s"}),
    (".spec[] | .t", UNSORTED),  # insertion order, not sorted keys
    (".spec | .[] | .t", UNSORTED),
    (".spec.X | .[] | .template", {"spec": {"X": [{"template": 1}, {"template": None}, {}]}}),
    (".spec.X[] | .podTemplate", {"spec": {"X": {"b": {"podTemplate": 1}, "a": 2}}}),
    (".spec.a.[0]", {"spec": {"a": [7, 8]}}),
    (".spec.a.[0]", {"spec": {"a": []}}),
    (".spec.a.[5]", {"spec": {"a": [7, 8]}}),
    (".spec.a.[0]", {"spec": {"a": None}}),
    (".spec.a.[0]", {"spec": {"a": {"0": 1}}}),
    (".spec.a.[0]", {"spec": {"a": "abc"}}),
    (".spec.a.[0]", {"spec": {"a": 2.5}}),
    (".spec.a.[0]", {"spec": {"a": False}}),
    ('.["k/with/slash"].b', {"k/with/slash": {"b": [1]}}),
    ('.["a~b"]["c/d"]', {"a~b": {"c/d": 1}}),
    (".a", 3),
    (".a", "abc"),
    (".a", [1]),
    (".a", True),
    (".a", False),
    (".[0]", {"a": 1}),
    (".[0]", 3),
    (".[0]", True),
    (".[]", None),
    (".[]", "abc"),
    (".[]", 3),
    (".[]", -0.0),
    (".[]", 1.5),
    (".[]", 3.0),
    (".[]", 1e16),
    (".[]", 1.5e-7),
    (".[]", 1e-5),
    (".[]", 100000.0),
    (".[]", 10**30),  # a long number dump is truncated
    (".[]", 2**63),
    (".[]", True),
    (".[]", LONG),  # a long string dump is truncated and re-closed
    (".[]", "x" * 27),  # the longest dump kept whole (29 bytes)
    (".[]", "x" * 28),
    (".[]", "é" * 20),  # truncation backs off to a UTF-8 boundary
    (".[]", "a" * 10 + "\u2603" * 15),
    (".[]", "a" + "\U0001f600" * 15),
    (".[]", 'ab"cd\n' * 5),
    (".[]", "a\u0001" * 15),
    (".[]", "\x7f\x1f/\u2028\t\b\f\r"),
    (".[]", []),
    (".[]", {}),
    ("." + "k" * 40, 3),  # a long key in the message is truncated
    ('.["a\\"b\\n"]', "s"),
    ('."é\\u2603"', 1),
    (".a.b.c", {"a": {"b": 3}}),
    (".a[].b", {"a": [{"b": 1}, 2]}),  # error after a first result: no partial output
    (".a[].b.c", {"a": [{"b": 3}, 5]}),  # depth-first decides which error comes first
    (".[] | .[] | .x", [[{"x": 1}, {"x": 2}], [], {"k": {"x": 3}}]),
    (".[][]", [[1, 2], {"z": 3, "a": 4}]),
]


@pytest.mark.parametrize(("expr", "obj"), CASES)
def test_walk_matches_libjq(expr: str, obj: Any) -> None:
    assert native(expr, obj) == libjq(expr, obj)


def test_walk_error_flags_only_null_iteration() -> None:
    with pytest.raises(WalkError) as e:
        walk((Key("a"), Iterate()), {"a": None})
    assert str(e.value) == "Cannot iterate over null (null)" and e.value.iterates_null
    with pytest.raises(WalkError) as e:
        walk((Iterate(),), "null")
    assert str(e.value) == 'Cannot iterate over string ("null")' and not e.value.iterates_null
    with pytest.raises(WalkError) as e:
        walk((Key("a"),), 1)
    assert not e.value.iterates_null


def test_walk_returns_the_objects_themselves() -> None:
    inner = {"spec": {}}
    obj = {"a": [inner]}
    ((path, value),) = walk((Key("a"), Index(0)), obj)
    assert path == ("a", 0) and value is inner


# Property-style: random small JSON values x random plain paths, rendered in random spellings.

_KEYS = ["a", "b", "spec", "template", "x/y", "t~1", "if", "", "é", "k" * 30]
_SCALARS: list[Any] = [
    None, True, False, 0, 7, -3, 2.5, 1e16, 1.5e-7, 3.0, "", "s", "abc", LONG, "é" * 20,
    "a\nb", 10**25,
]  # fmt: skip


def _random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth <= 0 or roll < 0.3:
        return rng.choice(_SCALARS)
    if roll < 0.65:
        keys = rng.sample(_KEYS, rng.randint(0, 4))  # random insertion order
        return {k: _random_value(rng, depth - 1) for k in keys}
    return [_random_value(rng, depth - 1) for _ in range(rng.randint(0, 3))]


def _random_steps(rng: random.Random) -> tuple[Step, ...]:
    steps: list[Step] = []
    for _ in range(rng.randint(0, 4)):
        roll = rng.random()
        if roll < 0.55:
            steps.append(Key(rng.choice(_KEYS)))
        elif roll < 0.75:
            steps.append(Index(rng.randint(0, 3)))
        else:
            steps.append(Iterate())
    return tuple(steps)


def _render(rng: random.Random, steps: tuple[Step, ...]) -> str:
    """A jq spelling of ``steps``, mixing every plain form the parser accepts."""
    out = "."
    for s in steps:
        if rng.random() < 0.2:
            out += " | ."
        bare = out.endswith(".")  # nothing after the dot yet: only a bracket/string may follow
        if isinstance(s, Key):
            quoted = json.dumps(s.name, ensure_ascii=rng.random() < 0.5)
            simple = s.name.isidentifier() and s.name.isascii()
            form = rng.choice(["field", "dotstr", "bracket"] if simple else ["dotstr", "bracket"])
            if form == "field":
                out = (out[:-1] if bare else out) + "." + s.name
            elif form == "dotstr":
                out += ("" if bare else ".") + quoted
            else:
                out += ("" if bare or rng.random() < 0.5 else ".") + f"[{quoted}]"
        else:
            inner = "" if isinstance(s, Iterate) else str(s.i)
            out += ("" if bare or rng.random() < 0.5 else ".") + f"[{inner}]"
    return out


def _guided_value(rng: random.Random, steps: tuple[Step, ...]) -> Any:
    """A value shaped mostly as ``steps`` expects, so that paths often succeed with many results.

    Every level may instead be a random value (null, scalar, wrong container), which exercises
    the absent and wrong-type cases in the middle of a path rather than only at its root.
    """
    if not steps or rng.random() < 0.1:
        return _random_value(rng, 2)
    step, rest = steps[0], steps[1:]
    if isinstance(step, Key):
        others = rng.sample([k for k in _KEYS if k != step.name], rng.randint(0, 3))
        keys = [*others, step.name]
        rng.shuffle(keys)
        return {
            k: _guided_value(rng, rest) if k == step.name else rng.choice(_SCALARS) for k in keys
        }
    if isinstance(step, Index):
        return [_guided_value(rng, rest) for _ in range(rng.randint(0, step.i + 2))]
    children = [_guided_value(rng, rest) for _ in range(rng.randint(0, 4))]
    if rng.random() < 0.5:
        return children
    keys = rng.sample(_KEYS, len(children))  # random insertion order
    return dict(zip(keys, children, strict=True))


def _property_cases() -> list[tuple[str, Any]]:
    rng = random.Random(20240601)
    cases = []
    for _ in range(300):
        steps = _random_steps(rng)
        cases.append((_render(rng, steps), _random_value(rng, 4)))
    for _ in range(300):
        steps = _random_steps(rng)
        cases.append((_render(rng, steps), _guided_value(rng, steps)))
    return cases


@pytest.mark.parametrize(("expr", "obj"), _property_cases())
def test_walk_matches_libjq_property(expr: str, obj: Any) -> None:
    assert parse_plain(expr) is not None, expr
    assert native(expr, obj) == libjq(expr, obj)


def _without_indices(rng: random.Random) -> tuple[Step, ...]:
    return tuple(s for s in _random_steps(rng) if not isinstance(s, Index)) + (Iterate(),) * (
        rng.random() < 0.3
    )


def _level_walk_cases() -> list[tuple[tuple[Step, ...], Any]]:
    rng = random.Random(20261203)
    cases = [(parse_plain(expr), obj) for expr, obj in CASES]
    cases += [(parse_plain(expr), obj) for expr, obj in _property_cases()]
    for _ in range(600):
        steps = _without_indices(rng)
        cases.append(
            (steps, _guided_value(rng, steps) if rng.random() < 0.8 else _random_value(rng, 3))
        )
    return [(steps, obj) for steps, obj in cases if steps is not None]


def test_the_level_walk_gives_what_the_walk_gives_or_leaves_it_to_the_walk() -> None:
    """``walk_objects`` is the walk on objects, lists and nulls where they are expected; on
    anything else it declines, and the walk (whose messages are libjq's) fails."""
    taken = 0
    for steps, obj in _level_walk_cases():
        segs = segments(steps)
        if segs is None:
            assert any(isinstance(s, Index) for s in steps)
            continue
        got = walk_objects(segs, obj)
        try:
            want = walk(steps, obj)
        except WalkError:
            assert got is None, (steps, obj)
            continue
        # on JSON values it declines exactly where the walk fails
        assert got is not None and got == want, (steps, obj)
        assert all(a[1] is b[1] for a, b in zip(got, want, strict=True))  # the objects
        taken += 1
    assert taken > 500  # the cases are not all failures


def test_the_shared_walk_gives_each_path_what_the_level_walk_gives() -> None:
    """``walk_shared`` walks the common part of several paths once and gives, for each, what
    ``walk_objects`` gives for it (its values only when asked), or declines when that declines
    any of them: its tails here are the path's own, another key run, and none."""
    rng = random.Random(5)
    shared = declined = 0
    for steps, obj in _level_walk_cases():
        segs = segments(steps)
        if segs is None or len(segs) < 2:
            continue
        prefix = segs[:-1]
        other = tuple(rng.choice(["a", "b", "name", "template"]) for _ in range(rng.randint(1, 2)))
        tails = ((segs[-1], True), (other, rng.random() < 0.5), ((), False))
        got = walk_shared(prefix, tails, obj)
        want = [walk_objects((*prefix, keys), obj) for keys, _ in tails]
        if None in want:
            assert got is None, (steps, obj)
            declined += 1
            continue
        assert got is not None, (steps, obj)
        for found, pairs, (_, paths) in zip(got, want, tails, strict=True):
            assert pairs is not None
            assert found == (pairs if paths else [v for _, v in pairs]), (steps, obj)
        assert len({id(found) for found in got}) == len(got)  # a list of its own each
        shared += 1
    assert shared > 100 and declined > 10  # both kinds of case are met


def test_render_round_trips_through_parse_plain() -> None:
    rng = random.Random(99)
    for _ in range(500):
        steps = _random_steps(rng)
        expr = _render(rng, steps)
        assert parse_plain(expr) == steps, expr


# --------------------------------------------------------------------------------------------
# guarded forms: ``(P // empty)`` then more steps, ``P // empty | Q``, ``... | "text"``
# --------------------------------------------------------------------------------------------

GUARDED: list[tuple[str, tuple[GStep, ...], str | None]] = [
    (
        "(.spec.replicatedJobs // empty)[].template.spec.template",
        (
            Guard(2),
            Key("spec"),
            Key("replicatedJobs"),
            Iterate(),
            Key("template"),
            Key("spec"),
            Key("template"),
        ),
        None,
    ),
    (
        "(.spec.replicatedJobs // empty)[].name",
        (Guard(2), Key("spec"), Key("replicatedJobs"), Iterate(), Key("name")),
        None,
    ),
    (
        ".spec.pytorchReplicaSpecs.Master // empty | .template",
        (Guard(3), Key("spec"), Key("pytorchReplicaSpecs"), Key("Master"), Key("template")),
        None,
    ),
    (
        '.spec.pytorchReplicaSpecs.Master // empty | "master"',
        (Guard(3), Key("spec"), Key("pytorchReplicaSpecs"), Key("Master")),
        "master",
    ),
    (
        ".spec.leaderWorkerTemplate.leaderTemplate // empty",
        (Guard(3), Key("spec"), Key("leaderWorkerTemplate"), Key("leaderTemplate")),
        None,
    ),
    (".a // empty", (Guard(1), Key("a")), None),
    (". // empty", (Guard(0),), None),
    ("(. // empty)[]", (Guard(0), Iterate()), None),
    ("(.a[0] // empty).b", (Guard(2), Key("a"), Index(0), Key("b")), None),
    ('(.a // empty)["b"][1]', (Guard(1), Key("a"), Key("b"), Index(1)), None),
    ('(.a // empty)."b"', (Guard(1), Key("a"), Key("b")), None),
    ("(.a // empty).[]", (Guard(1), Key("a"), Iterate()), None),
    (".a[] | .b // empty | .c", (Key("a"), Iterate(), Guard(1), Key("b"), Key("c")), None),
    (".a | (.b // empty)[]", (Key("a"), Guard(1), Key("b"), Iterate()), None),
    (
        "(.a // empty)[] | (.b // empty)[]",
        (Guard(1), Key("a"), Iterate(), Guard(1), Key("b"), Iterate()),
        None,
    ),
    (".a.b", (Key("a"), Key("b")), None),  # plain paths are guarded forms without a guard
    ('.a | "x"', (Key("a"),), "x"),
    ('.a//empty|"é\n"', (Guard(1), Key("a")), "é\n"),
]


@pytest.mark.parametrize(("expr", "steps", "const"), GUARDED)
def test_parse_guarded(expr: str, steps: tuple[GStep, ...], const: str | None) -> None:
    assert parse_guarded(expr) == (steps, const)
    if const is not None or any(isinstance(s, Guard) for s in steps):
        assert parse_plain(expr) is None  # its other readers see no plain path


NOT_GUARDED: list[str] = [
    ".a[] // empty",  # P iterates: not one value
    "(.a[] // empty)",
    ".a // .b",
    ".a // null",
    ".a // empty // empty",
    "(.a // empty) // empty",
    "(.a // empty).b // empty",  # P with a guard in it
    ".a // empty.b",
    ".a // empty()",
    "(.a // empty",
    ".a // empty)",
    "(.a)",
    "(.a // empty) | (.b)",
    '.a // empty | "x" | .b',
    '"x"',
    '.a | "\\(.b)"',
    ".a | 1",
    ".a // empty?",
    ".a ?// empty",
    ".a // empty, .b",
    "(.a // empty)(.b)",
    ".a // empty | ",
]


@pytest.mark.parametrize("expr", NOT_GUARDED)
def test_parse_guarded_rejects(expr: str) -> None:
    assert parse_guarded(expr) is None


def libjq_values(expr: str, obj: Any) -> tuple[str, Any]:
    try:
        return "ok", jq.compile(f"[{expr}]").input_value(obj).first()
    except ValueError as e:
        return "error", str(e)


def native_guarded(expr: str, obj: Any) -> tuple[str, Any]:
    """The walk of a guarded form: (path, value) pairs, or the values for a constant tail."""
    found = parse_guarded(expr)
    assert found is not None, expr
    steps, const = found
    try:
        pairs = walk(steps, obj)
    except WalkError as e:
        return "error", str(e)
    if const is not None:
        return "ok", [const] * len(pairs)
    return "ok", [(p, _lossy(v)) for p, v in pairs]


#: what P meets: absent, null, false, a string, a number, an object, a list (and true, 0, "")
_AT_P: list[Any] = [None, False, True, "abc", "", 0, 3, 2.5, {}, {"x": 1}, [], [1, {"x": 2}]]


def _guard_objects(keys: tuple[str, ...]) -> list[Any]:
    """Objects where the chain of ``keys`` meets each of :data:`_AT_P`, is absent, or fails
    on the way (a scalar or a list where an object is wanted)."""
    out: list[Any] = [None, {}, 5, "s", [1]]
    for leaf in _AT_P:
        value: Any = leaf
        for key in reversed(keys):
            value = {key: value, "other": 1}
        out.append(value)
    if len(keys) > 1:
        for wrong in ("s", 7, [1], True):
            out.append({keys[0]: wrong})
    return out


#: the rest iterating: P's value shaped for ``(P // empty)[].name`` and ``| .template``
_ITEMS: list[Any] = [
    [{"name": "a", "template": {"spec": 1}}, {"name": "b"}, None],
    {"k": {"name": "c"}, "j": {"name": None}},
    [{"name": "a"}, 3],  # an error after the guard is the walk's, not suppressed
    ["s"],
    [[]],
]


GUARDED_WALKS: list[tuple[str, Any]] = [
    *[(e, o) for e in (".a.b // empty", "(.a.b // empty)", ". // empty") for o in _guard_objects(("a", "b"))],
    *[(e, o) for e in (".a // empty | .x", "(.a // empty).x", "(.a // empty)[]", '.a // empty | "A"') for o in _guard_objects(("a",))],
    *[(e, o) for e in ("(.a[1] // empty).x", "(.a[0] // empty)") for o in _guard_objects(("a",))],
    *[
        (e, {"spec": {"jobs": items}})
        for e in (
            "(.spec.jobs // empty)[].name",
            "(.spec.jobs // empty)[] | .template // empty | .spec",
            '(.spec.jobs // empty)[] | .name // empty | "id"',
            "(.spec.jobs // empty)[].template.spec",
            ".spec | (.jobs // empty)[] | (.template // empty)[]",
        )
        for items in [*_ITEMS, *_AT_P]
    ],
    (".a[] | .b // empty", {"a": [{"b": 1}, {"b": None}, {"b": False}, {"b": 0}, 3, "s", {}]}),
    (".a | .b // empty", {"a": "s"}),  # an error before the guard is not suppressed
    ("(.a // empty)[].b", {"a": [{"b": 1}, 2]}),
    ("(.a // empty)[]", {"a": "x" * 40}),
]  # fmt: skip


@pytest.mark.parametrize(("expr", "obj"), GUARDED_WALKS)
def test_guarded_walk_matches_libjq(expr: str, obj: Any) -> None:
    """Paths and values as libjq's ``path()`` and the expression give them (the values alone
    for a constant tail, whose ``path()`` is an error)."""
    got = native_guarded(expr, obj)
    found = parse_guarded(expr)
    assert found is not None
    if found[1] is not None:
        assert got == libjq_values(expr, obj)
    else:
        assert got == libjq(expr, obj)


def _postfix(rng: random.Random, steps: tuple[Step, ...]) -> str:
    """``steps`` as postfix steps in random spellings, none with a pipe (``.a["b"].[0][]``)."""
    out = ""
    for s in steps:
        if isinstance(s, Key):
            quoted = json.dumps(s.name, ensure_ascii=rng.random() < 0.5)
            simple = s.name.isidentifier() and s.name.isascii()
            forms = [f".{s.name}"] if simple else []
            out += rng.choice([*forms, f".{quoted}", f"[{quoted}]", f".[{quoted}]"])
        else:
            inner = "" if isinstance(s, Iterate) else str(s.i)
            out += rng.choice([f"[{inner}]", f".[{inner}]"])
    return out


def _random_guarded(rng: random.Random) -> tuple[str, tuple[Step, ...]]:
    """A guarded form from random plain steps: plain steps, then a chain of keys and indices
    in a guard (parenthesised with postfix steps after it, or as a whole segment with a pipe
    after it); and the steps the value is shaped for."""
    before = tuple(s for s in _random_steps(rng) if rng.random() < 0.7)
    chain = tuple(s for s in _random_steps(rng) if not isinstance(s, Iterate))
    after = _random_steps(rng)
    left = _render(rng, before) + " | " if before else ""
    inner = _postfix(rng, chain)
    inner = inner if inner.startswith(".") else "." + inner
    if rng.random() < 0.5:
        expr = f"{left}({inner} // empty){_postfix(rng, after)}"
    else:
        expr = f"{left}{inner} // empty" + (f" | {_render(rng, after)}" if after else "")
    return expr, before + chain + after


def _guarded_property_cases() -> list[tuple[str, Any]]:
    rng = random.Random(20261206)
    cases = []
    for _ in range(400):
        expr, steps = _random_guarded(rng)
        obj = _guided_value(rng, steps) if rng.random() < 0.8 else _random_value(rng, 4)
        cases.append((expr, obj))
    return cases


@pytest.mark.parametrize(("expr", "obj"), _guarded_property_cases())
def test_guarded_walk_matches_libjq_property(expr: str, obj: Any) -> None:
    assert parse_guarded(expr) is not None, expr
    assert native_guarded(expr, obj) == libjq(expr, obj)


def test_the_shared_walk_of_guarded_paths_gives_what_the_walk_gives() -> None:
    """With guards in the runs (:class:`GuardedRun`), ``walk_shared`` gives each path what the
    walk gives, or declines exactly where the walk fails; a guard that yields nothing leaves
    its locations out."""
    taken = declined = 0
    cases = [(e, o) for e, o in GUARDED_WALKS] + _guarded_property_cases()
    for expr, obj in cases:
        found = parse_guarded(expr)
        assert found is not None
        steps = found[0]
        segs = segments(steps)
        if segs is None:
            assert any(isinstance(s, Index) for s in steps)
            continue
        assert any(isinstance(r, GuardedRun) for r in segs) == any(
            isinstance(s, Guard) for s in steps
        )
        got = walk_shared(segs[:-1], ((segs[-1], True), (segs[-1], False)), obj)
        try:
            want = walk(steps, obj)
        except WalkError:
            assert got is None, (expr, obj)
            declined += 1
            continue
        assert got is not None, (expr, obj)
        assert got[0] == want and got[1] == [v for _, v in want], (expr, obj)
        taken += 1
    assert taken > 150 and declined > 10


# --------------------------------------------------------------------------------------------
# to_pointer
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "pointer"),
    [
        ((), ""),
        (("spec",), "/spec"),
        (("spec", "replicatedJobs", 0, "template"), "/spec/replicatedJobs/0/template"),
        (("a/b", "c~d", "~1"), "/a~1b/c~0d/~01"),
        (("",), "/"),
        (("", ""), "//"),
        ((12,), "/12"),
        (("é",), "/é"),
    ],
)
def test_to_pointer(path: tuple[str | int, ...], pointer: str) -> None:
    assert to_pointer(path) == pointer


def test_to_pointer_resolves_with_jsonpointer_semantics() -> None:
    """The pointer of every walked path finds the same value via jsonpatch's resolver."""
    import jsonpointer

    obj = {"a/b": {"c~d": [{"": 1}, {"x": 2}]}, "e": {"f": 3}}
    for path, value in walk((Key("a/b"), Key("c~d"), Iterate(), Iterate()), obj):
        assert jsonpointer.resolve_pointer(obj, to_pointer(path)) == value
