"""Applying a policy costs in proportion to what it writes, not to how it is written (issue 39
item 4): a value without a per-workload variable is rendered once, when the policy loads; a
value with the workload's variables once per workload; and consecutive rules of one match and
overwrite are one run, each template taken once per run (``bench/bench_policy_bounds.py``'s
``rules`` table measures it). What is cached is what rendering would give, and a run writes
what its rules write one after the other."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from helpers import ENGINE, JOBSET, REGISTRY, SAMPLES, load

from webhook.admission.handlers import mutate_object
from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.mutation import policy as policy_model
from webhook.mutation import stamp
from webhook.mutation.plan import plan
from webhook.mutation.policy import Policy, Setting
from webhook.mutation.policyfile import parse_policy
from webhook.mutation.templates import VARIABLES, render, variables_in
from webhook.workload.locator import locator

POLICY = {
    "rules": [
        {
            "name": "constants",
            "schedulerName": "kai-scheduler",
            "labels": {"kai.scheduler/queue": "research"},
            "annotations": {"example.com/note": "plain $$(text)"},
        },
        {
            "name": "workload",
            "labels": {"owner": "$(workload.name)", "kind": "$(workload.kind)"},
            "annotations": {"example.com/ns": "in $(workload.namespace)"},
        },
        {
            "name": "instance",
            "match": {"components": ["replicatedjob", "worker", "master"]},
            "labels": {"role": "$(component)-$(instance)"},
            "nodeSelector": {"pool": "$(instance)"},
            "tolerations": [{"key": "t", "value": "$(instance)", "effect": "NoSchedule"}],
        },
    ]
}

SAMPLE_OBJECTS = [
    (f"{path.parent.name}/{path.name}", obj)
    for path in sorted(SAMPLES.glob("*/*.yaml"))
    for _, obj in read_documents(path)
]


def _uncached(monkeypatch: pytest.MonkeyPatch, doc: dict[str, Any]) -> Policy:
    """``doc`` loaded with nothing cached: every value rendered for every instance."""
    real = policy_model._setting

    def rendered_each_time(inj: Any, key: str | None, template: str) -> Setting:
        s = real(inj, key, template)
        return Setting(s.key, s.template, None, False, s.tail, s.pieces, True, s.item)

    with monkeypatch.context() as m:
        m.setattr(policy_model, "_setting", rendered_each_time)
        return parse_policy(copy.deepcopy(doc))


def test_a_cached_value_is_what_rendering_gives() -> None:
    values = {v: f"<{v}>" for v in VARIABLES}
    for rule in parse_policy(POLICY).rules:
        for _, settings in rule.settings:
            for s in settings:
                assert s.value(values) == render(s.template, values)
                if s.constant is not None:  # rendered once, when the policy loads
                    assert s.constant == render(s.template, {})
                    assert not variables_in(s.template)


@pytest.mark.parametrize(("name", "obj"), SAMPLE_OBJECTS, ids=[n for n, _ in SAMPLE_OBJECTS])
def test_the_cached_render_plans_what_the_uncached_one_does(
    name: str, obj: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = mutate_object(REGISTRY, parse_policy(POLICY), obj, ENGINE)
    uncached = mutate_object(REGISTRY, _uncached(monkeypatch, POLICY), obj, ENGINE)
    assert cached is not None and uncached is not None
    assert cached.ops == uncached.ops
    assert cached.warnings == uncached.warnings and cached.failures == uncached.failures


def test_consecutive_rules_of_one_match_and_overwrite_are_one_run() -> None:
    p = parse_policy(
        {
            "rules": [
                {"name": "a", "labels": {"a": "1"}},
                {"name": "b", "labels": {"b": "1"}},
                {"name": "c", "labels": {"c": "1"}, "overwrite": True},
                {"name": "d", "labels": {"d": "1"}, "match": {"kinds": ["JobSet"]}},
                {"name": "e", "labels": {"e": "1"}, "match": {"kinds": ["JobSet"]}},
                {"name": "f", "labels": {"f": "1"}},
            ]
        }
    )
    assert [[r.name for r in run.rules] for run in p.runs] == [
        ["a", "b"], ["c"], ["d", "e"], ["f"],
    ]  # fmt: skip
    assert [r for run in p.runs for r in run.rules] == list(p.rules)


def _split(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with every setting in a rule of its own (same match and overwrite)."""
    out = []
    for rule in doc["rules"]:
        fixed = {k: v for k, v in rule.items() if k in ("match", "overwrite")}
        for field, value in rule.items():
            if field in ("name", "match", "overwrite"):
                continue
            items = value.items() if isinstance(value, dict) else [(None, value)]
            if field == "tolerations":
                items = [(None, [t]) for t in value]
            for key, v in items:
                one = {key: v} if key is not None else v
                out.append({"name": f"{rule['name']}-{len(out)}", **fixed, field: one})
    return {"rules": out}


@pytest.mark.parametrize(
    "doc",
    [
        POLICY,
        {"rules": [{"name": "one", "labels": {f"e.io/l{i}": "v" for i in range(64)}}]},
        {
            "rules": [
                {
                    "name": "one",
                    "overwrite": True,
                    "labels": {"a": "x", "b": "$(instance)"},
                    "schedulerName": "s",
                }
            ]
        },
    ],
    ids=["mixed", "64 labels", "overwrite"],
)
def test_one_rule_or_one_rule_a_setting_make_the_same_object(doc: dict[str, Any]) -> None:
    """The same settings in one rule, or one rule each: the same ops, and the fast lane's
    plan is the general path's op for op (the rules' order, rule by rule)."""
    obj = load(JOBSET)
    karta = REGISTRY.lookup(GVK.of(obj))
    assert karta is not None
    one, many = parse_policy(doc), parse_policy(_split(doc))
    assert len(many.runs) < len(many.rules)
    a = mutate_object(REGISTRY, one, obj, ENGINE)
    b = mutate_object(REGISTRY, many, obj, ENGINE)
    assert a is not None and b is not None and a.ops
    key = [(op["path"], repr(op.get("value"))) for op in a.ops]
    assert sorted(key) == sorted((op["path"], repr(op.get("value"))) for op in b.ops)
    patched = jsonpatch.apply_patch(obj, a.ops)
    assert jsonpatch.apply_patch(obj, b.ops) == patched
    where = locator(karta)
    found = where.find(obj, ENGINE)
    lane = stamp.lane(karta)
    assert lane is not None
    general = plan(where.locate(obj, ENGINE, found), many, obj)
    fast = stamp.plan(karta, lane, many, obj, found.items)
    if fast is not None:  # tolerations are the general path's
        assert fast == general
