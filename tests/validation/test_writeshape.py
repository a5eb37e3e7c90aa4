"""Write locations that the workload's author cannot steer (issue 25 item 1): refused at their
field by the text (``error``, regexes, value-derived conditions), or on the samples (``length``
of a string), while upstream's styles stay admitted; and regexes elsewhere only where they
cannot backtrack without bound."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import ENGINE
from test_validation import BASE, SAMPLES

from webhook.jq import regexsafe
from webhook.validation import writeshape
from webhook.validation.check import check

CHILD = "spec.structureDefinition.childComponents[0]"
TEMPLATE = f"{CHILD}.specDefinition.podTemplateSpecPath"
JOBS = ".spec.replicatedJobs[]"


def _with_template_path(expr: str) -> dict[str, Any]:
    d = copy.deepcopy(BASE)
    d["spec"]["structureDefinition"]["childComponents"][0]["specDefinition"] = {
        "podTemplateSpecPath": expr
    }
    return d


ADMITTED = [
    f'{JOBS} | select(.name == "leader" or .name == "workers") | .template.spec.template',
    f'{JOBS} | select(.name != "other") | .template.spec.template',
    f'{JOBS} | select(.name | IN("leader", "workers")) | .template.spec.template',
    f'{JOBS} | select(has("template")) | .template.spec.template',
    f"{JOBS} | (.template // empty) | .spec.template",
    ".spec | select(.replicatedJobs | length > 1) | .replicatedJobs[].template.spec.template",
    f'{JOBS} | select(any(.template.spec.template.spec.containers[]; .name == "l" or .name == "w"))'
    " | .template.spec.template",
    f'{JOBS} | select(.template.spec.template | type == "object") | .template.spec.template',
]


@pytest.mark.parametrize("expr", ADMITTED)
def test_upstream_styles_stay_admitted(expr: str) -> None:
    assert writeshape.problems(expr) == []
    r = check(_with_template_path(expr), SAMPLES, ENGINE)
    assert r.ok, r.errors


REFUSED_BY_TEXT = [
    (f'{JOBS} | if .name == "leader" then error else .template.spec.template end', "'error'"),
    (f'{JOBS} | select(.name | test("^w")) | .template.spec.template', "'test'"),
    (f'{JOBS} | select(.name | match("w")) | .template.spec.template', "'match'"),
    (f'{JOBS} | select(.name | startswith("w")) | .template.spec.template', "'startswith'"),
    (f'{JOBS} | select((.name | ascii_downcase) == "w") | .template.spec.template', "'ascii"),
    (f'{JOBS} | select(.name | split("-") | length == 1) | .template.spec.template', "'split'"),
    (f"{JOBS} | if .replicas > 1 then .template.spec.template else empty end", "ordering"),
    (f"{JOBS} | select(.replicas + 1 == 2) | .template.spec.template", "arithmetic '+'"),
    (f"{JOBS} | select(.name == .template.spec.template.metadata.labels.app)"
     " | .template.spec.template", "two values"),
    (f'{JOBS} | select("\\(.name)" == "w") | .template.spec.template', "interpolating"),
    (f"{JOBS} | select(has(.name)) | .template.spec.template", "'has'"),
    (f"reduce {JOBS} as $j (.; .) | .spec.replicatedJobs[0].template.spec.template", "'reduce'"),
    (".spec.replicatedJobs[1:][] | .template.spec.template", "slices"),
    ('.spec.replicatedJobs | to_entries[] | select(.key >= 0) | .value.template.spec.template',
     "ordering"),
]  # fmt: skip


@pytest.mark.parametrize(("expr", "named"), REFUSED_BY_TEXT)
def test_value_steered_write_paths_are_refused_at_their_field(expr: str, named: str) -> None:
    found = writeshape.problems(expr)
    assert found and named in found[0], found
    r = check(_with_template_path(expr), SAMPLES, ENGINE)
    mine = [e.message for e in r.errors if e.path == TEMPLATE]
    assert any(named in m for m in mine), r.errors


def test_map_entries_compared_with_constants_are_shape() -> None:
    # upstream's map style (instance ids; in a write path it is no jq path, which the samples
    # say): the analysis itself admits it
    assert writeshape.problems('.spec.x | to_entries[] | select(.key == "w") | .value') == []
    assert writeshape.problems(".spec.x | keys | length > 1") == []


def test_fragmented_write_paths_are_held_to_the_same_rule() -> None:
    d = copy.deepcopy(BASE)
    d["spec"]["structureDefinition"]["childComponents"][0]["specDefinition"] = {
        "fragmentedPodSpecDefinition": {
            "schedulerNamePath": f'{JOBS} | select(.name | endswith("s"))'
            " | .template.spec.template.spec.schedulerName",
            "labelsPath": f"{JOBS}.template.spec.template.metadata.labels",
        }
    }
    r = check(d, SAMPLES, ENGINE)
    where = f"{CHILD}.specDefinition.fragmentedPodSpecDefinition.schedulerNamePath"
    assert any(e.path == where and "'endswith'" in e.message for e in r.errors), r.errors


def test_length_of_a_string_in_a_condition_is_found_on_the_samples() -> None:
    # ``length`` of a list is shape and of a string a value: the text cannot tell them apart,
    # the probe with the string values changed (equality with constants kept) can.
    expr = f'{JOBS} | select(.name != "a" and (.name | length) > 3) | .template.spec.template'
    assert writeshape.problems(expr) == []
    r = check(_with_template_path(expr), SAMPLES, ENGINE)
    mine = [e.message for e in r.errors if e.path == TEMPLATE]
    assert mine and "depend on the values the workload's author writes" in mine[0], r.errors


def test_the_value_probe_keeps_comparisons_with_constants() -> None:
    obj = {"a": "leader", "b": "x", "n": 3, "m": 1, "t": True, "z": None, "l": ["leader", 2]}
    strings, numbers = writeshape.constants(['.a == "leader"', ".n == 1 or .m == 1"])
    for variant in (0, 1):
        got = writeshape.substituted(obj, strings, numbers, variant)
        assert got["a"] == "leader" and got["m"] == 1 and got["l"][0] == "leader"
        assert got["b"] != "x" and len(got["b"]) != 1 and got["n"] != 3
        assert got["t"] is True and got["z"] is None
        assert got.keys() == obj.keys()


@pytest.mark.parametrize(
    ("pattern", "refused"),
    [
        ("^[a-z]+-[0-9]+$", None),
        ("(get|put)+", None),
        ("(?>a+)+", None),
        ("(a+)+$", "nested repetition"),
        ("(x{1,5}){2,}", "nested repetition"),
        ("(a|ab)*c", "alternation under a repetition"),
        ("(\\w|\\d)+", "alternation under a repetition"),
        ("(.|a)+", "alternation under a repetition"),
        ("(a)\\1", "backreference"),
        ("(?<n>a)\\k<n>", "backreference"),
        (".*.*.*.*x", "unbounded repetitions"),
    ],
)
def test_regex_patterns_that_can_backtrack_catastrophically(
    pattern: str, refused: str | None
) -> None:
    found = regexsafe.pattern_problems(pattern)
    if refused is None:
        assert found == []
    else:
        assert found and refused in found[0], found


def test_regexes_outside_write_paths_need_constant_safe_patterns() -> None:
    assert regexsafe.problems('.status.phase | test("^Run")') == []
    assert regexsafe.problems("{test: 1} | .test") == []
    assert regexsafe.problems('.a | split("-")') == []  # split/1: a plain string
    assert "constant string" in regexsafe.problems(".a | test(.b)")[0]
    assert "flag 'x'" in regexsafe.problems('.a | test("a b"; "x")')[0]
    assert "nested repetition" in regexsafe.problems('.a | sub("(a+)+"; "b")')[0]
    assert "nested repetition" in regexsafe.problems('.a | split("(a*)*"; null)')[0]
    d = copy.deepcopy(BASE)
    status = d["spec"]["structureDefinition"]["rootComponent"]["statusDefinition"]
    status["statusMappings"]["failed"][0]["byExpression"]["expression"] = (
        '.status.terminalState | test("^(F+)+$")'
    )
    r = check(d, SAMPLES, ENGINE)
    where = (
        "spec.structureDefinition.rootComponent.statusDefinition.statusMappings.failed[0]"
        ".byExpression.expression"
    )
    assert any(e.path == where and "nested repetition" in e.message for e in r.errors), r.errors


def test_the_value_probe_and_the_regex_reading_take_any_depth() -> None:
    deep: dict[str, Any] = {}
    cur = deep
    for _ in range(20_000):  # deeper than Python's recursion limit
        cur["a"] = {}
        cur = cur["a"]
    cur["s"] = "x"
    got = writeshape.substituted(deep, frozenset(), frozenset(), 1)
    for _ in range(20_000):
        got = got["a"]
    assert got == {"s": ""}
    nested = "(" * 5000 + "a" + ")" * 5000
    assert "nested more than 32 deep" in regexsafe.pattern_problems(nested)[0]
    found = regexsafe.problems(f'.a | test("{nested}")')
    assert found and len(found[0]) < 200  # the pattern is shortened in the message


def test_the_issues_backtracking_write_path_is_refused_before_any_workload_meets_it() -> None:
    # tests/admission/test_hostile_inputs.py shows what it did at admission when loaded unchecked: a
    # crafted name makes it fail (a mutation failure under failureMode), so it is refused here
    root = {
        "name": "batch",
        "kind": {"group": "example.com", "version": "v1", "kind": "Batch"},
        "specDefinition": {
            "podTemplateSpecPath": '.spec.jobs[] | select(.name | test("^(a+)+$") | not)'
            " | .template"
        },
    }
    doc = {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "batch"},
        "spec": {"structureDefinition": {"rootComponent": root}},
    }
    r = check(doc, [], ENGINE)
    where = "spec.structureDefinition.rootComponent.specDefinition.podTemplateSpecPath"
    mine = [e.message for e in r.errors if e.path == where]
    assert any("'test' in a write path" in m for m in mine), r.errors
    assert any("nested repetition" in m for m in mine), r.errors
