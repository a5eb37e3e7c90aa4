"""The plain paths of the guarded forms definitions use (issue 48), without running them."""

from __future__ import annotations

import pytest

from webhook.jq.readpaths import ReadPaths, read_paths


@pytest.mark.parametrize(
    ("expr", "results", "reads"),
    [
        (".spec.tasks[].template", [".spec.tasks[].template"], []),
        (".spec.tasks[] | .replicas // 0", [".spec.tasks[].replicas"], []),
        (".spec.r.Chief // empty | .template", [".spec.r.Chief.template"], []),
        ('.spec.r.Chief // empty | "chief"', [], [".spec.r.Chief"]),
        ("(.spec.x // empty)[]", [".spec.x[]"], []),
        ("(.spec.x // empty)[] | .template", [".spec.x[].template"], []),
        ("(.status.conditions // [])", [".status.conditions"], []),
        (".status.a // .status.b", [".status.a", ".status.b"], []),
        (
            "if .spec.r.Chief == null then empty else (.spec.r.Chief.replicas // 1) end",
            [".spec.r.Chief.replicas"],
            [".spec.r.Chief"],
        ),
        ("if .a then .b elif .c != null then .d else empty end", [".b", ".d"], [".a", ".c"]),
        ('.metadata.labels["x/y"]', ['.metadata.labels["x/y"]'], []),
        (".", ["."], []),
    ],
)
def test_recognised_forms(expr: str, results: list[str], reads: list[str]) -> None:
    found = read_paths(expr)
    assert found is not None
    assert (found.results, found.reads) == (results, reads)


@pytest.mark.parametrize(
    "expr",
    [
        "{requests: .spec.resources}",
        ".a | map(.b)",
        ".a and .b",
        "[.a]",
        '.a | select(.b == "x")',
        "if .a == .b then .c else .d end",  # a comparison with a path, not a constant
        "(.a",
        "",
        '"text" | .a',
    ],
)
def test_other_forms_are_left_to_the_samples(expr: str) -> None:
    assert read_paths(expr) is None


def test_a_constant_fallback_is_said() -> None:
    assert read_paths("(.status.conditions // [])") == ReadPaths([".status.conditions"], [], True)
    assert not read_paths(".a // empty | .b").defaulted  # type: ignore[union-attr]
