"""A rule's ``gang`` setting: what it stamps, and the policies refused when they load because
the scheduler would refuse their gangs (two scheduler names or priority classes in one gang,
a scheduler other than kube-scheduler)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import REGISTRY, apply, sample

from webhook.mutation.policyfile import PolicyError, parse_policy
from webhook.workload.gang import GANG_LABEL


def errors_of(rules: list[dict[str, Any]]) -> str:
    with pytest.raises(PolicyError) as e:
        parse_policy({"rules": rules}, "policy.yaml")
    return str(e.value)


def test_a_gang_rule_alone_is_a_rule_and_stamps_its_label_into_every_template() -> None:
    p = parse_policy({"rules": [{"name": "g", "match": {"kinds": ["JobSet"]}, "gang": "native"}]})
    assert p.gang and p.rules[0].gang == "native"
    assert not parse_policy({"rules": [{"name": "l", "labels": {"a": "b"}}]}).gang
    obj, _ = apply(sample("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml"), p)
    for rj in obj["spec"]["replicatedJobs"]:
        labels = rj["template"]["spec"]["template"]["metadata"]["labels"]
        assert labels[GANG_LABEL] == "native"
    assert REGISTRY  # the catalog the sample is planned under


@pytest.mark.parametrize(
    ("rules", "needle"),
    [
        (
            [{"name": "g", "gang": "kai"}],
            "rules[0] (g).gang: 'kai' is not one of native, native-workload",
        ),
        (
            [{"name": "g", "gang": "native", "schedulerName": "kai-scheduler"}],
            "rules[0] (g).schedulerName: 'kai-scheduler' for workloads rules[0] (g) gangs natively",
        ),
        (
            [
                {"name": "g", "match": {"kinds": ["JobSet"]}, "gang": "native"},
                {"name": "kai", "schedulerName": "kai-scheduler"},
            ],
            "rules[1] (kai).schedulerName: 'kai-scheduler'",
        ),
        (
            [
                {"name": "g", "gang": "native"},
                {
                    "name": "p",
                    "match": {"components": ["replicatedjob"], "instances": ["leader"]},
                    "priorityClassName": "high",
                },
            ],
            "rules[1] (p).priorityClassName: set on part of a workload",
        ),
        (
            [{"name": "g", "match": {"components": ["replicatedjob"]}, "gang": "native"}],
            "rules[0] (g).match.components: a gang is the whole workload's",
        ),
    ],
)
def test_policies_the_scheduler_would_refuse_are_refused_naming_the_field(
    rules: list[dict[str, Any]], needle: str
) -> None:
    assert needle in errors_of(rules)


def test_rules_that_cannot_meet_a_gang_are_fine() -> None:
    parse_policy(
        {
            "rules": [
                {
                    "name": "g",
                    "match": {"kinds": ["JobSet"], "namespaces": ["research"]},
                    "gang": "native",
                },
                {
                    "name": "kai-other-kind",
                    "match": {"kinds": ["RayCluster"]},
                    "schedulerName": "kai-scheduler",
                },
                {
                    "name": "kai-other-ns",
                    "match": {"namespaces": ["prod"]},
                    "schedulerName": "kai-scheduler",
                },
                {
                    "name": "default",
                    "schedulerName": "default-scheduler",
                    "priorityClassName": "high",
                },
            ]
        }
    )


def test_a_policy_object_that_would_break_a_gang_in_force_is_left_out_naming_why() -> None:
    from webhook.mutation.policyobject import parse_policy_object, within_bounds

    file = parse_policy(
        {"rules": [{"name": "g", "match": {"kinds": ["JobSet"]}, "gang": "native"}]}
    )

    def obj(name: str, rule: dict[str, Any]) -> Any:
        return parse_policy_object(
            {
                "apiVersion": "policies.karta-webhook.run.ai/v1alpha1",
                "kind": "KartaPolicy",
                "metadata": {"name": name},
                "spec": {"rules": [rule]},
            }
        )

    fine = obj("a-queue", {"name": "q", "labels": {"kai.scheduler/queue": "research"}})
    kai = obj("b-kai", {"name": "kai", "schedulerName": "kai-scheduler"})
    kept, over = within_bounds(file, [fine, kai])
    assert kept == (fine,)
    assert "rules[0] (kai).schedulerName: 'kai-scheduler'" in str(over["b-kai"][0])
