"""Policies indexed by what their rules can match (issue 49 item 1): a request meets only the
rules for its kind, namespace and the definition's components, and the patch, warnings and
failures are those of the whole policy."""

from __future__ import annotations

from typing import Any

from helpers import ENGINE, JOBSET_SAMPLE, REGISTRY, sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.admission.handlers import _plan, mutate_object
from webhook.base.gvk import GVK
from webhook.mutation.policy import Policy
from webhook.mutation.policyfile import parse_policy
from webhook.mutation.policyindex import applicable
from webhook.mutation.scope import NamespaceMeta, narrow

JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
NAMESPACES = ("research", "team-a", "team-b", "proj-1-x", "default")
KNOWN = {
    ns: NamespaceMeta({"team": ns[:4], "kubernetes.io/metadata.name": ns}, {"queue": f"q-{ns}"})
    for ns in NAMESPACES[:-1]
}


def _karta() -> Any:
    karta = REGISTRY.lookup(JOBSET)
    assert karta is not None
    return karta


def _policy(rules: list[dict[str, Any]]) -> Policy:
    return parse_policy({"rules": rules})


def test_only_the_rules_that_can_apply_in_order() -> None:
    policy = _policy(
        [
            {"name": "every", "labels": {"a": "1"}},
            {"name": "pytorch", "match": {"kinds": ["PyTorchJob"]}, "labels": {"b": "1"}},
            {"name": "other-group", "match": {"kinds": ["x.io/JobSet"]}, "labels": {"c": "1"}},
            {
                "name": "js-team-a",
                "match": {"kinds": ["JobSet"], "namespaces": ["team-a"]},
                "labels": {"d": "1"},
            },
            {"name": "team-pattern", "match": {"namespaces": ["team-*"]}, "labels": {"e": "1"}},
            {"name": "no-component", "match": {"components": ["Master"]}, "labels": {"f": "1"}},
            {
                "name": "a-component",
                "match": {"components": ["replicatedjob", "Master"]},
                "labels": {"g": "1"},
            },
        ]
    )
    names = {
        ns: [r.name for r in applicable(policy, JOBSET, ns, _karta()).rules]
        for ns in ("team-a", "team-b", "research", "")
    }
    assert names == {
        "team-a": ["every", "js-team-a", "team-pattern", "a-component"],
        "team-b": ["every", "team-pattern", "a-component"],
        "research": ["every", "a-component"],
        "": ["every", "a-component"],
    }
    got = applicable(policy, JOBSET, "team-b", _karta())
    assert got is applicable(policy, JOBSET, "team-b", _karta())  # kept: derived once
    assert (got.operations, got.failure_mode) == (policy.operations, policy.failure_mode)
    every = _policy([{"name": "every", "labels": {"a": "1"}}])
    assert applicable(every, JOBSET, "research", _karta()) is every


_kinds = st.sampled_from([[], ["JobSet"], ["jobset.x-k8s.io/JobSet"], ["x.io/JobSet"], ["Job"]])
_namespaces = st.sampled_from([[], ["research"], ["team-*"], ["team-a", "proj-?-*"], ["other"]])
_components = st.sampled_from([[], ["replicatedjob"], ["jobset", "Master"], ["Master"]])
_selector = st.sampled_from(
    [
        None,
        {"matchLabels": {"team": "rese"}},
        {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["team"]}]},
    ]
)
_values = st.sampled_from(
    [
        "v",
        "$(namespace.labels['team'])",
        "$(namespace.annotations['queue'])",
        "$(workload.labels['app'])",
        "$(workload.name)",
    ]
)


@st.composite
def _rules(draw: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 8))):
        match: dict[str, Any] = {}
        for key, strategy in (("kinds", _kinds), ("namespaces", _namespaces)):
            got = draw(strategy)
            if got:
                match[key] = got
        components = draw(_components)
        if components:
            match["components"] = components
        for key in ("namespaceSelector", "objectSelector"):
            sel = draw(_selector)
            if sel is not None:
                match[key] = sel if key == "namespaceSelector" else {"matchLabels": {"app": "t"}}
        rule: dict[str, Any] = {"name": f"r{i}", "labels": {f"k{i % 3}": draw(_values)}}
        if match:
            rule["match"] = match
        if draw(st.booleans()):
            rule["overwrite"] = True
        out.append(rule)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=_rules(), namespace=st.sampled_from(NAMESPACES), app=st.booleans())
def test_the_patch_is_the_whole_policys(
    rules: list[dict[str, Any]], namespace: str, app: bool
) -> None:
    """The handlers (with the index) give what the planners give with every rule, on the
    JobSet in every namespace, known or not, with selectors and values of every sort."""
    policy = _policy(rules)
    obj = sample(*JOBSET_SAMPLE)
    obj["metadata"]["namespace"] = namespace
    if app:
        obj["metadata"]["labels"] = {"app": "t"}
    got = mutate_object(REGISTRY, policy, obj, ENGINE, namespaces=KNOWN)
    assert got is not None
    # the whole policy decided rule by rule, without the index; but a rule that names only
    # components the definition has not (it matches no template, and is not decided)
    names = {c.name for c in _karta().components}
    whole = Policy(
        tuple(r for r in policy.rules if not r.match.components or names & set(r.match.components))
    )
    decided = narrow(whole, obj, JOBSET, namespace, KNOWN)
    planned = _plan(_karta(), decided.policy, obj, ENGINE, "CREATE")
    assert got.ops == planned.ops
    assert got.failures == [*decided.failures, *planned.failures]
    assert got.warnings == [*decided.warnings, *planned.warnings]
    assert got.templates_mutated == planned.templates_mutated
