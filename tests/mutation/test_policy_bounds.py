"""A policy is input too (issue 39): bounded in what it holds and may add, counted while it
is read, and every number in it checked as the API server checks it. The bounds and the number
rules are in docs/policy-bounds.md."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ENGINE, JOBSET, REGISTRY, load
from policies import amplified, most_bytes, most_entries

from webhook.admission.handlers import mutate_object
from webhook.admission.state import State
from webhook.base import limits
from webhook.karta.fields import POLICY_ENTRIES
from webhook.mutation import policyfile
from webhook.mutation.policybounds import Tally, bounds_errors
from webhook.mutation.policyfile import PolicyError, load_policy, parse_policy
from webhook.mutation.policyobject import (
    GROUP,
    KIND,
    VERSION,
    load_policies,
    parse_policy_object,
    within_bounds,
)


def errors_of(doc: object) -> list[str]:
    with pytest.raises(PolicyError) as e:
        parse_policy(doc, "policy.yaml")
    return [str(err) for err in e.value.errors]


def rule(**fields: Any) -> dict[str, Any]:
    return {"name": "r", **fields}


# --------------------------------------------------------------------------- what a policy holds


def test_the_largest_policies_within_the_bounds_load() -> None:
    entries = parse_policy(most_entries())
    assert len(entries.rules) == limits.MAX_POLICY_RULES
    by_field: dict[str, int] = {}
    for r in entries.rules:
        for inj, settings in r.settings:
            by_field[inj.key] = by_field.get(inj.key, 0) + len(settings)
    for key, bound in POLICY_ENTRIES.items():
        assert by_field[key] == bound
    assert parse_policy(most_bytes()).rules


def test_one_rule_more_than_the_bound_is_refused_naming_it() -> None:
    doc = {"rules": [rule(labels={"a": "b"}) | {"name": f"r{i}"} for i in range(1001)]}
    assert errors_of(doc) == ["rules: 1001 rules, at most 200"]


def test_settings_of_one_rule_are_bounded() -> None:
    n = limits.MAX_RULE_SETTINGS
    assert parse_policy({"rules": [rule(labels={f"k{i}": "v" for i in range(n)})]})
    labels = {f"k{i}": "v" for i in range(n)}
    assert errors_of({"rules": [rule(labels=labels, schedulerName="s")]}) == [
        f"rules[0] (r): {n + 1} settings, at most {n} in a rule"
    ]


@pytest.mark.parametrize("field", sorted(POLICY_ENTRIES))
def test_each_fields_total_over_the_rules_is_bounded(field: str) -> None:
    bound = POLICY_ENTRIES[field]
    per_rule = 50 if field != "tolerations" else 16

    def entries(i: int) -> Any:
        if field == "tolerations":
            return [{"key": f"t{i}x{j}", "operator": "Exists"} for j in range(per_rule)]
        return {f"k{i}x{j}": "v" for j in range(per_rule)}

    rules = [{"name": f"r{i}", field: entries(i)} for i in range(bound // per_rule + 1)]
    last = len(rules) - 1
    assert errors_of({"rules": rules}) == [
        f"rules[{last}] (r{last}).{field}: {per_rule * len(rules)} {field} in the rules up to "
        f"this one, at most {bound} in a policy"
    ]
    assert parse_policy({"rules": rules[:-1]})


def test_what_a_policy_may_add_to_a_pod_template_is_bounded() -> None:
    doc = most_bytes()
    value = next(iter(doc["rules"][0]["annotations"].values()))
    doc["rules"].append({"name": "one-more", "annotations": {"example.com/more": value}})
    [error] = errors_of(doc)
    assert error.startswith("rules[7] (one-more): the rules up to this one may add 32,8")
    assert error.endswith(
        "bytes to a pod template (keys and values rendered at their longest), at most 32,768"
    )


def test_values_with_variables_count_at_the_longest_name() -> None:
    """``$(workload.name)`` may be 253 characters: an annotation whose variables could render
    it past the value bound is refused at load, as is a value past it as written."""
    bound = limits.MAX_ANNOTATION_VALUE_BYTES
    fits = "$(workload.name)" * (bound // limits.VARIABLE_BYTES)
    assert parse_policy({"rules": [rule(annotations={"a": fits})]})
    [error] = errors_of({"rules": [rule(annotations={"a": fits + "$(instance)"})]})
    assert error == (
        f"rules[0] (r).annotations['a']: value of 4,301 bytes (variables at their longest), "
        f"at most {bound:,}"
    )
    [error] = errors_of({"rules": [rule(annotations={"a": "x" * (bound + 1)})]})
    assert error.endswith("value of 4,097 bytes (variables at their longest), at most 4,096")


def test_the_alias_amplified_file_is_refused_at_its_rule_count(tmp_path: Path) -> None:
    """50 KB that aliases expand to 1,000 rules x 950 labels: refused by the count of its
    rules, before any rule is checked (it took 13 s to load, then 430 ms per /mutate)."""
    f = tmp_path / "policy.yaml"
    f.write_text(amplified())
    assert f.stat().st_size < 50_000
    with pytest.raises(PolicyError) as e:
        load_policy(f)
    assert [str(err) for err in e.value.errors] == ["rules: 1000 rules, at most 200"]


def test_counting_stops_at_the_first_bound_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the rule count, an amplified map is refused by its size before one key of it is
    checked, and no rule after the one that passes a bound is read."""
    checked: list[str] = []
    real = policyfile.parse_entries

    def counting(inj: Any, value: Any, where: str, errors: list[Any]) -> Any:
        checked.append(where)
        return real(inj, value, where, errors)

    monkeypatch.setattr(policyfile, "parse_entries", counting)
    f = tmp_path / "policy.yaml"
    f.write_text(amplified(rules=200, labels=950))
    with pytest.raises(PolicyError) as e:
        load_policy(f)
    assert [str(err) for err in e.value.errors] == [
        "rules[0] (r0): 950 settings, at most 64 in a rule"
    ]
    assert checked == []
    f.write_text(amplified(rules=200, labels=60))  # 60 a rule: the 5th passes 256 labels
    with pytest.raises(PolicyError) as e:
        load_policy(f)
    assert [str(err) for err in e.value.errors] == [
        "rules[4] (r4).labels: 300 labels in the rules up to this one, at most 256 in a policy"
    ]
    assert len([w for w in checked if w.endswith(".labels")]) == 4


def test_the_tally_is_the_model_s_not_the_file_reader_s() -> None:
    """A policy from any source (a file, a suite, a policy object) is held to the same counts:
    they live beside the model, and the document reader only feeds them."""
    t = Tally()
    assert Tally.rules(limits.MAX_POLICY_RULES) == []
    assert [str(e) for e in Tally.rules(201)] == ["rules: 201 rules, at most 200"]
    for i in range(4):
        assert t.rule(f"rules[{i}] (r{i})", {"labels": 64}) == []
    assert [str(e) for e in t.rule("rules[4] (r4)", {"labels": 1})] == [
        "rules[4] (r4).labels: 257 labels in the rules up to this one, at most 256 in a policy"
    ]


def test_a_policy_past_a_bound_on_reload_leaves_the_last_good_one(tmp_path: Path) -> None:
    """As any bad reload: the error names the bound, the last good policy stays in force and
    the policy source's reload status (the ``..._last_reload_successful`` gauge) is 0."""
    f = tmp_path / "policy.yaml"
    f.write_text("rules: [{name: kai, schedulerName: kai-scheduler}]\n")
    state = State(policy_path=f)
    good = state.snapshot.policy
    assert [r.name for r in good.rules] == ["kai"]
    f.write_text(amplified())
    os.utime(f, ns=(1, 1))  # written a while ago: settled
    [error] = state.reload_files()
    assert "rules: 1000 rules, at most 200" in error
    assert state.snapshot.policy is good
    assert state.reload_status["policy"][0] is False
    f.write_text("rules: [{name: kai, schedulerName: other}]\n")
    os.utime(f, ns=(2, 2))
    assert state.reload_files() == []
    assert state.snapshot.policy.rules[0].name == "kai"
    assert state.reload_status["policy"][0] is True


# --------------------------------------------------------------------------- numbers


def toleration(seconds: Any) -> dict[str, Any]:
    t = {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
    return {"rules": [rule(labels={"a": "b"}, tolerations=[t])]}


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (2**63, "9223372036854775808"),
        (-(2**63) - 1, "-9223372036854775809"),
        (10**30, "1000000000000000000000000000000"),
        (10**100, "an integer of 101 digits"),
    ],
)
def test_toleration_seconds_out_of_int64_are_refused_naming_the_field(
    seconds: int, shown: str
) -> None:
    assert errors_of(toleration(seconds)) == [
        f"rules[0] (r).tolerations[0].tolerationSeconds: {shown} is out of range: an int64, "
        "-9223372036854775808 to 9223372036854775807"
    ]


@pytest.mark.parametrize("seconds", [2**63 - 1, -(2**63), 0, -1])
def test_toleration_seconds_within_int64_load(seconds: int) -> None:
    [r] = parse_policy(toleration(seconds)).rules
    assert r.items["tolerations"][0]["tolerationSeconds"] == seconds


def test_toleration_seconds_from_yaml_as_written(tmp_path: Path) -> None:
    f = tmp_path / "policy.yaml"
    base = "rules: [{name: r, tolerations: [{key: k, operator: Exists, effect: NoExecute, "
    f.write_text(base + "tolerationSeconds: 9223372036854775808}]}]\n")
    with pytest.raises(PolicyError, match=r"tolerationSeconds: 9223372036854775808 is out of"):
        load_policy(f)
    f.write_text(base + "tolerationSeconds: 1" + "0" * 5000 + "}]}]\n")
    # past 64 bits and a float's range, text as the API server reads it (go-yaml v2)
    with pytest.raises(PolicyError, match=r"tolerationSeconds: must be an integer"):
        load_policy(f)


def test_rules_of_several_sources_together_are_held_to_the_same_bounds() -> None:
    """Policies each within the bounds (a file's, policy objects') may pass them together:
    :func:`bounds_errors` counts rules already read as the reader counts a document."""
    half = {
        "rules": [
            {"name": f"r{i}", "labels": {f"k{i}x{j}": "v" for j in range(40)}} for i in range(4)
        ]
    }
    one, two = parse_policy(half), parse_policy(half)
    assert bounds_errors(one.rules) == []
    assert [str(e) for e in bounds_errors((*one.rules, *two.rules))] == [
        "rules[6] (r2).labels: 280 labels in the rules up to this one, at most 256 in a policy"
    ]
    many = parse_policy({"rules": [{"name": f"r{i}", "labels": {"a": "b"}} for i in range(150)]})
    assert [str(e) for e in bounds_errors((*many.rules, *many.rules))] == [
        "rules: 300 rules, at most 200"
    ]
    big = parse_policy(most_bytes())
    [error] = bounds_errors((*big.rules, *big.rules[:1]))
    assert str(error).startswith("rules[7] (r0): the rules up to this one may add 32,8")


def _object(name: str, rules: int, labels: int) -> dict[str, Any]:
    spec = {
        "rules": [
            {"name": f"r{i}", "labels": {f"{name}{i}x{j}": "v" for j in range(labels)}}
            for i in range(rules)
        ]
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


def test_policy_objects_in_force_together_stay_within_the_bounds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each KartaPolicy is within the bounds on its own; in name order after the file's
    rules, one that would take the rules in force past a bound is left out, said with the
    bound (a file of them for ``--policy`` is refused likewise)."""
    file = parse_policy({"rules": [{"name": "base", "labels": {f"b{j}": "v" for j in range(50)}}]})
    a, b, c = (parse_policy_object(_object(n, 2, 60)) for n in ("a", "b", "c"))
    small = parse_policy_object(_object("d", 1, 10))
    kept, over = within_bounds(file, [small, c, b, a])
    assert [p.source for p in kept] == ["a", "d"]
    assert sorted(over) == ["b", "c"]
    assert [str(e) for e in over["b"]] == [
        "rules[1] (r1).labels: 290 labels in the rules up to this one, at most 256 in a policy"
    ]
    state = State()  # no policy file: a and b fit, c does not, d does
    with caplog.at_level(logging.WARNING, logger="karta_webhook"):
        state.set_policies([a, b, c, small])
    names = [r.name for r in state.snapshot.policy.rules]
    assert names == ["a/r0", "a/r1", "b/r0", "b/r1", "d/r0"]
    assert any(
        "policy object not in force, past a bound of the policy: c: rules[0] (r0).labels: 300" in m
        for m in caplog.messages
    )
    f = tmp_path / "objects.yaml"
    f.write_text("---\n".join(yaml.safe_dump(_object(n, 2, 60)) for n in ("a", "b", "c")))
    with pytest.raises(PolicyError) as e:
        load_policies(f)
    assert [str(err) for err in e.value.errors] == [
        "KartaPolicy/c rules[0] (r0).labels: 300 labels in the rules up to this one, at most 256"
        " in a policy",
    ]


def test_a_rendered_annotation_past_the_value_bound_is_never_written() -> None:
    """``$(instance)`` is counted at 253 bytes at load; an instance id longer than that (only
    a hostile object has one) renders past the bound, and that value is a mutation failure
    (warned; ``failureMode`` decides), never written. The other templates get theirs."""
    obj = load(JOBSET)
    long_id = "w" * (limits.MAX_ANNOTATION_VALUE_BYTES + 1)
    obj["spec"]["replicatedJobs"][-1]["name"] = long_id
    policy = parse_policy({"rules": [rule(annotations={"example.com/id": "$(instance)"})]})
    m = mutate_object(REGISTRY, policy, obj, ENGINE)
    assert m is not None
    written = [op for op in m.ops if "example.com~1id" in op["path"] or "annotations" in op["path"]]
    assert long_id not in json.dumps(m.ops)
    assert written  # the leader's template
    assert [reason for reason, _ in m.failures] == ["invalid_value"]
    [warning] = [w for w in m.warnings if "example.com/id" in w]
    assert f"is longer than {limits.MAX_ANNOTATION_VALUE_BYTES:,} bytes; skipped" in warning


def test_what_a_rules_match_lists_is_bounded(tmp_path: Path) -> None:
    """Each value a match lists is tried on every request (an instance pattern on every
    template): bounded in a rule and over the rules, counted as written, selectors included,
    so aliases cannot make each request try millions of patterns."""
    n = limits.MAX_MATCH_VALUES
    fits = rule(labels={"a": "b"}, match={"namespaces": [f"team-{i}" for i in range(n)]})
    assert parse_policy({"rules": [fits]})
    over = rule(labels={"a": "b"}, match={"namespaces": [f"team-{i}" for i in range(n + 1)]})
    assert errors_of({"rules": [over]}) == [
        f"rules[0] (r).match: {n + 1} values, at most {n} in a rule's match"
    ]
    expression = {"key": "team", "operator": "In", "values": [f"t{i}" for i in range(n + 1)]}
    selector = rule(
        labels={"a": "b"}, match={"namespaceSelector": {"matchExpressions": [expression]}}
    )
    assert errors_of({"rules": [selector]}) == [
        f"rules[0] (r).match: {n + 1} values, at most {n} in a rule's match"
    ]
    globs = ", ".join(f"'ns-{i}-*'" for i in range(60))
    lines = ["rules:", "- name: r0", "  labels: {a: b}", f"  match: {{namespaces: &N [{globs}]}}"]
    lines += [
        f"- {{name: r{i}, labels: {{a: b}}, match: {{namespaces: *N}}}}" for i in range(1, 200)
    ]
    f = tmp_path / "policy.yaml"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(PolicyError) as e:
        load_policy(f)
    assert [str(err) for err in e.value.errors] == [
        "rules[8] (r8).match: 540 values in the matches of the rules up to this one, at most "
        "512 in a policy"
    ]
    # rules already read (a policy object's after the file's) are counted alike
    one = parse_policy({"rules": [fits]})
    assert bounds_errors(one.rules * 8) == []
    assert [str(e) for e in bounds_errors(one.rules * 9)] == [
        "rules[8] (r).match: 576 values in the matches of the rules up to this one, at most "
        "512 in a policy"
    ]
