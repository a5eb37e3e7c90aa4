"""Rules decided by the namespace and the workload (issue 36 items 3 and 4): ``namespaceSelector``
and ``objectSelector`` in ``match``, and values from metadata, ``$(namespace.labels['k'])`` and
the like, through the handlers the server and the CLI call. A namespace that is not known, or a
key that is missing, is not applicable (a warning, and ``failureMode`` decides); never an empty
value."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from helpers import ENGINE, JOBSET_SAMPLE, REGISTRY, review, sample

from webhook.admission.handlers import mutate, mutate_object
from webhook.admission.review import decode, encode
from webhook.mutation.plan import NOT_APPLICABLE
from webhook.mutation.policy import Policy
from webhook.mutation.policyfile import PolicyError, parse_policy
from webhook.mutation.scope import NAME_LABEL, NamespaceMeta, namespace_meta, namespaces_of, narrow

QUEUE = "kai.scheduler/queue"
RESEARCH = {"research": NamespaceMeta({"team": "ml", "queue": "research-q"}, {"owner": "ann"})}


def _jobset(namespace: str = "research", **labels: str) -> dict[str, Any]:
    obj = sample(*JOBSET_SAMPLE)
    obj["metadata"]["namespace"] = namespace
    if labels:
        obj["metadata"]["labels"] = labels
    return obj


def _policy(text: str) -> Policy:
    return parse_policy(yaml.safe_load(text))


def _labels(ops: list[dict[str, Any]]) -> set[tuple[str, Any]]:
    """(path, value) of every op, for comparing patches."""
    return {(op["path"], json.dumps(op["value"], sort_keys=True)) for op in ops}


def _plan(pol: Policy, obj: dict[str, Any], namespaces: Any = RESEARCH) -> Any:
    m = mutate_object(REGISTRY, pol, obj, ENGINE, namespaces=namespaces)
    assert m is not None
    return m


def _constant(**rule: Any) -> Any:
    return parse_policy({"rules": [{"name": "r", **rule}]})


# --------------------------------------------------------------------------- selectors

SELECTED = """\
rules:
- name: ml
  match: {namespaceSelector: {matchLabels: {team: ml}}}
  labels: {kai.scheduler/queue: ml}
"""


def test_a_namespace_selector_matches_on_the_namespaces_labels() -> None:
    pol = _policy(SELECTED)
    m = _plan(pol, _jobset())
    assert m.ops == _plan(_constant(labels={QUEUE: "ml"}), _jobset()).ops and m.ops
    other = {"research": NamespaceMeta({"team": "infra"})}
    m = _plan(pol, _jobset(), other)
    assert m.ops == [] and m.failures == [] and m.warnings == []


def test_the_namespace_name_label_the_api_server_sets_can_be_selected() -> None:
    name, meta = namespace_meta({"metadata": {"name": "research"}}) or ("", NamespaceMeta())
    assert meta.labels == {NAME_LABEL: "research"}
    pol = _policy(SELECTED.replace("team: ml", f"{NAME_LABEL}: research"))
    assert _plan(pol, _jobset(), {name: meta}).ops


def test_an_unknown_namespace_is_not_applicable_and_failure_mode_decides() -> None:
    m = _plan(_policy(SELECTED), _jobset("elsewhere"))
    assert m.ops == []
    assert [r for r, _ in m.failures] == [NOT_APPLICABLE]
    assert m.warnings == [
        "rule 'ml': namespace 'elsewhere' is not known, so its namespaceSelector cannot be "
        "decided; not applicable, skipped"
    ]
    closed = _response(_jobset("elsewhere"), "failureMode: closed\n" + SELECTED, RESEARCH)
    assert closed["allowed"] is False
    assert "namespace 'elsewhere' is not known" in closed["status"]["message"]
    opened = _response(_jobset("elsewhere"), SELECTED, RESEARCH)
    assert opened["allowed"] is True and "patch" not in opened
    assert opened["auditAnnotations"]["mutation-failure"] == NOT_APPLICABLE


def test_a_rule_that_does_not_match_the_kind_needs_no_namespace() -> None:
    pol = _policy(SELECTED.replace("match: {", "match: {kinds: [Deployment], "))
    m = _plan(pol, _jobset("elsewhere"))
    assert m.ops == [] and m.failures == []


def test_a_cluster_scoped_workload_matches_every_namespace_selector() -> None:
    pol = _policy(SELECTED)
    got = narrow(pol, {"metadata": {"name": "x"}}, None, "", None)
    assert [r.name for r in got.policy.rules] == ["ml"] and not got.failures


def test_an_object_selector_matches_on_the_workloads_own_labels() -> None:
    pol = _policy(
        "rules:\n- name: gpu\n  match:\n    objectSelector:\n      matchExpressions:\n"
        "      - {key: tier, operator: In, values: [gpu, train]}\n"
        "  labels: {kai.scheduler/queue: gpu}\n"
    )
    assert _plan(pol, _jobset(tier="gpu"), None).ops
    m = _plan(pol, _jobset(tier="cpu"), None)
    assert m.ops == [] and m.failures == []
    assert _plan(pol, _jobset(), None).ops == []


def test_on_update_an_object_selector_matches_the_old_or_the_new_object() -> None:
    """The API server's rule for a webhook's objectSelector, a contract (issue 49 item 3): an
    UPDATE that removes the selecting label together with the stamped one is stamped again;
    one that adds it is stamped; values come from the new object."""
    pol = _policy(
        "operations: [CREATE, UPDATE]\nrules:\n- name: ml\n  match:\n"
        "    objectSelector: {matchLabels: {team: ml}}\n"
        "  labels: {kai.scheduler/queue: ml}\n"
        "  annotations: {example.com/tier: \"$(workload.labels['tier'])\"}\n"
    )

    def update(old: dict[str, Any], new: dict[str, Any]) -> Any:
        body = review(new, "UPDATE")
        body["request"]["oldObject"] = old
        return mutate(decode(json.dumps(body).encode()), REGISTRY, pol, ENGINE, RESEARCH)

    escaped = update(_jobset(team="ml", tier="a"), _jobset(tier="b"))
    values = {op["path"].rsplit("/", 1)[-1]: op["value"] for op in escaped.response.patch or []}
    assert values["kai.scheduler~1queue"] == "ml"
    assert values["annotations"] == {"example.com/tier": "b"}  # the new object's value
    assert update(_jobset(tier="a"), _jobset(team="ml", tier="a")).ops  # added: matches
    assert not update(_jobset(tier="a"), _jobset(tier="b")).ops  # neither
    assert not _plan(pol, _jobset(tier="a"), None).ops  # a CREATE has no old object


def test_rules_keep_their_order_when_some_are_selected_out() -> None:
    pol = _policy(
        "rules:\n"
        "- {name: a, labels: {x: a}}\n"
        "- {name: b, match: {namespaceSelector: {matchLabels: {team: none}}}, labels: {x: b}}\n"
        "- {name: c, overwrite: true, match: {namespaceSelector: {matchLabels: {team: ml}}},"
        " labels: {x: c}}\n"
    )
    m = _plan(pol, _jobset())
    both = _plan(_policy("rules:\n- {name: a, labels: {x: a}}\n"
                         "- {name: c, overwrite: true, labels: {x: c}}\n"), _jobset())  # fmt: skip
    assert m.ops == both.ops


# --------------------------------------------------------------------------- values

VALUED = """\
rules:
- name: queue
  labels:
    kai.scheduler/queue: "$(namespace.labels['queue'])"
    team: "$(namespace.labels['team'])-$(workload.labels['tier'])"
  annotations:
    example.com/owner: "$(namespace.annotations['owner'])"
    example.com/from: "$(workload.annotations['example.com/from'])"
  tolerations:
  - {key: queue, value: "$(namespace.labels['queue'])", effect: NoSchedule}
"""


def test_values_from_the_namespace_and_the_workload_are_written_as_constants_would_be() -> None:
    obj = _jobset(tier="gpu")
    obj["metadata"]["annotations"] = {"example.com/from": "ci"}
    m = _plan(_policy(VALUED), obj)
    same = _constant(
        labels={QUEUE: "research-q", "team": "ml-gpu"},
        annotations={"example.com/owner": "ann", "example.com/from": "ci"},
        tolerations=[{"key": "queue", "value": "research-q", "effect": "NoSchedule"}],
    )
    assert m.failures == [] and m.warnings == []
    assert m.ops and m.ops == _plan(same, obj).ops


def test_a_missing_key_is_not_applicable_never_an_empty_value() -> None:
    m = _plan(_policy(VALUED), _jobset())  # no workload labels, no annotations
    assert [r for r, _ in m.failures] == [NOT_APPLICABLE, NOT_APPLICABLE]
    assert m.warnings == [
        "rule 'queue': label team is not applicable: $(workload.labels['tier']): the workload "
        "has no label 'tier'; skipped",
        "rule 'queue': annotation example.com/from is not applicable: "
        "$(workload.annotations['example.com/from']): the workload has no annotation "
        "'example.com/from'; skipped",
    ]
    written = _labels(m.ops)
    assert not any("team" in path or "example.com~1from" in path for path, _ in written)
    # what the request has is still written
    assert m.ops == _plan(_constant(
        labels={QUEUE: "research-q"}, annotations={"example.com/owner": "ann"},
        tolerations=[{"key": "queue", "value": "research-q", "effect": "NoSchedule"}],
    ), _jobset()).ops  # fmt: skip


def test_namespace_values_of_an_unknown_namespace_are_not_applicable() -> None:
    pol = _policy("rules:\n- name: q\n  labels: {q: \"$(namespace.labels['queue'])\"}\n")
    m = _plan(pol, _jobset("elsewhere"))
    assert m.ops == []
    assert m.failures == [
        (
            NOT_APPLICABLE,
            "rule 'q': label q is not applicable: $(namespace.labels['queue']): namespace "
            "'elsewhere' is not known",
        )
    ]
    closed = _response(_jobset("elsewhere"), "failureMode: closed\nrules:\n- name: q\n"
                       "  labels: {q: \"$(namespace.labels['queue'])\"}\n", RESEARCH)  # fmt: skip
    assert closed["allowed"] is False


def test_a_value_is_written_as_it_is_even_with_a_dollar() -> None:
    ns = {"research": NamespaceMeta({}, {"owner": "$(workload.name) and $$"})}
    pol = _policy(
        "rules:\n- name: o\n  annotations: {o: \"by $(namespace.annotations['owner'])\"}\n"
    )
    m = _plan(pol, _jobset(), ns)
    assert {op["value"] if isinstance(op["value"], str) else op["value"].get("o")
            for op in m.ops} == {"by $(workload.name) and $$"}  # fmt: skip


def test_a_value_longer_than_a_variable_may_be_is_not_applicable() -> None:
    ns = {"research": NamespaceMeta({}, {"owner": "x" * 254})}
    pol = _policy("rules:\n- name: o\n  annotations: {o: \"$(namespace.annotations['owner'])\"}\n")
    m = _plan(pol, _jobset(), ns)
    assert m.ops == [] and "254 bytes" in m.failures[0][1]


def test_an_invalid_value_for_its_field_is_invalid_as_a_written_one_would_be() -> None:
    ns = {"research": NamespaceMeta({}, {"owner": "not a label value"})}
    pol = _policy("rules:\n- name: o\n  labels: {o: \"$(namespace.annotations['owner'])\"}\n")
    m = _plan(pol, _jobset(), ns)
    assert m.ops == [] and {r for r, _ in m.failures} == {"invalid_value"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("$(namespace.labels['bad key'])", "$(namespace.labels['bad key']): invalid label key"),
        ("$(namespace.labels[''])", "invalid label key '': must be non-empty"),
        ("$(namespace.spec)", "unknown variable $(namespace.spec); known:"),
        ('$(namespace.labels["q"])', "unknown variable"),
    ],
)
def test_a_bad_metadata_variable_is_an_error_at_load(value: str, message: str) -> None:
    with pytest.raises(PolicyError) as e:
        _constant(labels={"q": value})
    assert any(
        err.path == "rules[0] (r).labels['q']" and message in err.message for err in e.value.errors
    ), e.value.errors


def test_one_policy_object_per_namespace_values_is_kept() -> None:
    pol = _policy(VALUED)
    obj = _jobset(tier="gpu")
    first = narrow(pol, obj, None, "research", RESEARCH).policy
    assert narrow(pol, obj, None, "research", RESEARCH).policy is first
    assert narrow(pol, obj, None, "research", {"research": NamespaceMeta({"queue": "b",
                  "team": "ml"}, {"owner": "ann"})}).policy is not first  # fmt: skip


def test_namespaces_from_documents() -> None:
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"t": "x"}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}},
    ]
    assert namespaces_of(docs) == {"a": NamespaceMeta({"t": "x", NAME_LABEL: "a"}, {})}


def _response(obj: dict[str, Any], text: str, namespaces: Any) -> dict[str, Any]:
    req = decode(json.dumps(review(obj)).encode())
    resp = mutate(req, REGISTRY, _policy(text), ENGINE, namespaces).response
    out: dict[str, Any] = json.loads(encode(resp))["response"]
    return out


def test_a_decision_is_kept_per_namespace_metadata_and_follows_a_change() -> None:
    pol = _policy(SELECTED)
    obj = _jobset()
    first = narrow(pol, obj, None, "research", RESEARCH)
    assert narrow(pol, obj, None, "research", RESEARCH) is first  # the same metadata object
    relabelled = {"research": NamespaceMeta({"team": "infra"})}
    assert [r.name for r in narrow(pol, obj, None, "research", relabelled).policy.rules] == []
    assert [r.name for r in first.policy.rules] == ["ml"]
    # a rule that reads the workload's labels is decided per object
    by_object = _policy(SELECTED + "  annotations: {t: \"$(workload.labels['tier'])\"}\n")
    a = narrow(by_object, _jobset(tier="a"), None, "research", RESEARCH)
    b = narrow(by_object, _jobset(tier="b"), None, "research", RESEARCH)
    assert a.policy.rules[0].sets["annotations"] != b.policy.rules[0].sets["annotations"]
