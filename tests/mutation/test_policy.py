"""Policy loading: every problem is reported with its rule and key, before a request arrives."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.base.gvk import GVK
from webhook.mutation.policy import Match
from webhook.mutation.policyfile import PolicyError, parse_policy
from webhook.mutation.templates import render


def errors_of(doc: object) -> str:
    with pytest.raises(PolicyError) as e:
        parse_policy(doc, "policy.yaml")
    return str(e.value)


def test_the_documented_format_parses() -> None:
    p = parse_policy(
        {
            "rules": [
                {
                    "name": "kai",
                    "match": {
                        "kinds": ["JobSet", "kubeflow.org/PyTorchJob", "/Pod"],
                        "namespaces": ["research", "team-*"],
                        "components": ["replicatedjob"],
                        "instances": ["worker*"],
                    },
                    "schedulerName": "kai-scheduler",
                    "labels": {"kai.scheduler/queue": "research"},
                    "annotations": {"example.com/owner": "$(workload.name)"},
                    "overwrite": False,
                }
            ]
        }
    )
    [rule] = p.rules
    assert rule.match.kinds == ((None, "JobSet"), ("kubeflow.org", "PyTorchJob"), ("", "Pod"))
    assert rule.match.workload(GVK("jobset.x-k8s.io", "v1alpha2", "JobSet"), "team-a")
    assert rule.match.workload(GVK("", "v1", "Pod"), "research")
    assert not rule.match.workload(GVK("example.com", "v1", "Pod"), "research")
    assert not rule.match.workload(GVK("kubeflow.org", "v1", "PyTorchJob"), "prod")
    assert rule.match.instance("replicatedjob", "workers")
    assert not rule.match.instance("replicatedjob", "leader")


@pytest.mark.parametrize(
    ("rule", "needle"),
    [
        ({"labels": {"bad key!": "x"}}, "rules[0] (r).labels['bad key!']: invalid key"),
        ({"labels": {"UPPER.example.com/a": "x"}}, "prefix part"),
        ({"labels": {"a": "not valid value"}}, "invalid value"),
        ({"labels": {"a": 42}}, "must be a string"),
        ({"annotations": {"a": "$(workload.uid)"}}, "unknown variable $(workload.uid)"),
        ({"schedulerName": "Kai_Scheduler"}, "schedulerName must be a lowercase DNS subdomain"),
        ({"labels": {"a": "b"}, "overwrite": "yes"}, "must be true or false"),
        ({"labels": {"a": "b"}, "match": {"kind": ["JobSet"]}}, "match.kind: unknown field"),
        ({"labels": {"a": "b"}, "schedulername": "x"}, "schedulername: unknown field"),
        ({}, "sets nothing"),
    ],
)
def test_bad_rules_name_rule_and_key(rule: dict, needle: str) -> None:
    assert needle in errors_of({"rules": [{"name": "r", **rule}]})


def test_all_errors_are_reported_and_names_must_be_unique() -> None:
    msg = errors_of(
        {
            "rules": [
                {"name": "a", "labels": {"x y": "1"}},
                {"name": "a", "labels": {"z": "$(nope)"}},
            ]
        }
    )
    assert "invalid key 'x y'" in msg and "duplicate rule name 'a'" in msg and "$(nope)" in msg


def test_render_substitutes_and_escapes() -> None:
    assert render("$(workload.name)-$(instance)", {"workload.name": "t", "instance": "w"}) == "t-w"
    assert render("$$(workload.name)", {"workload.name": "t"}) == "$(workload.name)"


def test_operations_default_to_create_and_may_add_update() -> None:
    assert parse_policy({"rules": []}).operations == ("CREATE",)
    p = parse_policy({"operations": ["UPDATE", "CREATE"], "rules": []})
    assert p.operations == ("CREATE", "UPDATE")
    assert "'DELETE' is not one of CREATE, UPDATE" in errors_of(
        {"operations": ["DELETE"], "rules": []}
    )
    assert "must list CREATE and/or UPDATE" in errors_of({"operations": [], "rules": []})


@pytest.mark.parametrize(
    "rule",
    [
        {"labels": {"kai.scheduler/queue": "research\n"}},
        {"labels": {"queue\n": "research"}},
        {"schedulerName": "kai-scheduler\n"},
    ],
    ids=["label value", "label key", "schedulerName"],
)
def test_a_trailing_newline_is_refused_as_the_api_server_refuses_it(rule: dict) -> None:  # type: ignore[type-arg]
    """Go's ^...$ do not match before a final newline, Python's $ does: the rules match the
    whole string (tests/e2e/apiserver/test_apiserver_syntax.py holds them to the API server)."""
    with pytest.raises(PolicyError):
        parse_policy({"rules": [{"name": "r", **rule}]})


GLOB = st.text(alphabet="ab*?[]!-.", max_size=4)
NAME = st.text(alphabet="ab[]*?!-.", max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    globs=st.lists(GLOB, max_size=3),
    names=st.lists(NAME, min_size=1, max_size=4),
    kinds=st.lists(st.tuples(st.sampled_from([None, "", "g"]), st.sampled_from("AB")), max_size=3),
    group=st.sampled_from(["", "g", "h"]),
    kind=st.sampled_from("AB"),
)
def test_a_match_decides_as_its_globs_and_kinds_read(
    globs: list[str],
    names: list[str],
    kinds: list[tuple[str | None, str]],
    group: str,
    kind: str,
) -> None:
    """What a match compiles once when the policy loads decides as its fields read: a Kind
    alone of any group, group/Kind of that group, shell-style globs (fnmatchcase) matching
    the whole namespace or instance id; an empty field matches everything."""
    m = Match(kinds=tuple(kinds), namespaces=tuple(globs), instances=tuple(globs))
    kind_ok = not kinds or any(k == kind and (g is None or g == group) for g, k in kinds)
    for name in names:
        glob_ok = not globs or any(fnmatchcase(name, g) for g in globs)
        assert m.workload(GVK(group, "v1", kind), name) == (kind_ok and glob_ok)
        assert m.instance("c", name) == glob_ok
    assert m.narrowed == bool(globs)
