"""The gang's Pod webhook (``/gang``): a pod of a ganged workload joins its group at creation,
found through its owners; pods that have a group, another scheduler, no gang label or no
workload with a definition are left alone; owners that cannot be read follow failureMode."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest
from helpers import ENGINE, REGISTRY, review, sample

from webhook.admission import review as codec
from webhook.admission.gangpod import OwnerError, mutate_pod
from webhook.admission.manifests import GANG_WEBHOOK, mutating_webhook_configuration
from webhook.mutation.policyfile import parse_policy
from webhook.workload.gang import GANG_LABEL, group_name

JOBSET_UID = "11111111-2222-3333-4444-555555555555"
JOB_UID = "66666666-7777-8888-9999-000000000000"
GANG = parse_policy({"rules": [{"name": "g", "match": {"kinds": ["JobSet"]}, "gang": "native"}]})
CLOSED = parse_policy({"failureMode": "closed", "rules": [{"name": "g", "gang": "native"}]})


def _ref(obj: Mapping[str, Any], uid: str) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": uid,
        "controller": True,
    }


def _cluster() -> tuple[dict[str, Any], dict[str, Any]]:
    js = copy.deepcopy(sample("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml"))
    js["metadata"]["uid"] = JOBSET_UID
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "trainer-workers-0",
            "namespace": "research",
            "uid": JOB_UID,
            "ownerReferences": [_ref(js, JOBSET_UID)],
        },
        "spec": {"parallelism": 2, "template": {"spec": {"containers": []}}},
    }
    return js, job


class Owners:
    def __init__(self, *objs: Mapping[str, Any], fail: bool = False) -> None:
        self.by_uid = {o["metadata"]["uid"]: o for o in objs}
        self.fail = fail
        self.calls = 0

    def __call__(self, namespace: str, ref: Mapping[str, Any], deadline: float) -> Any:
        self.calls += 1
        if self.fail:
            raise OwnerError("GET Job trainer-workers-0: HTTP 503")
        return self.by_uid.get(ref["uid"])


def _pod(owner: Mapping[str, Any] | None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "trainer-workers-0-0-abcde",
        "namespace": "research",
        "labels": {GANG_LABEL: "native", "jobset.sigs.k8s.io/replicatedjob-name": "workers"},
    }
    if owner is not None:
        meta["ownerReferences"] = [_ref(owner, owner["metadata"]["uid"])]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [], **spec}}


def _admit(pod: Any, owners: Any, policy: Any = GANG, operation: str = "CREATE") -> Any:
    req = codec.decode(json.dumps(review(pod, operation, resource="pods")).encode())
    return mutate_pod(req, REGISTRY, policy, ENGINE, owners)


def test_a_jobset_pod_joins_the_jobsets_group_through_its_job() -> None:
    js, job = _cluster()
    owners = Owners(js, job)
    got = _admit(_pod(job), owners)
    name = group_name("trainer", JOBSET_UID, "jobset")
    assert got.outcome == "patched"
    assert got.response.patch == [
        {"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": name}}
    ]
    assert owners.calls == 2  # Job, then JobSet: the topmost owner with a definition


@pytest.mark.parametrize(
    ("spec", "labels"),
    [
        ({"schedulingGroup": {"podGroupName": "theirs"}}, None),  # grouped by its operator
        ({"schedulerName": "kai-scheduler"}, None),  # KAI gangs on its own
        ({}, {}),  # no gang label (the objectSelector's job, held here too)
    ],
)
def test_pods_not_ours_to_group_are_left_alone(spec: dict[str, Any], labels: Any) -> None:
    js, job = _cluster()
    pod = _pod(job, **spec)
    if labels is not None:
        pod["metadata"]["labels"] = labels
    got = _admit(pod, Owners(js, job))
    assert got.response.allowed and not got.response.patch


def test_without_a_gang_rule_nothing_is_read() -> None:
    js, job = _cluster()
    owners = Owners(js, job)
    got = _admit(_pod(job), owners, parse_policy({"rules": [{"name": "l", "labels": {"a": "b"}}]}))
    assert got.outcome == "skipped" and owners.calls == 0


def test_a_bare_pod_or_one_whose_owners_are_gone_joins_nothing() -> None:
    js, job = _cluster()
    assert not _admit(_pod(None), Owners(js, job)).response.patch
    assert not _admit(_pod(job), Owners()).response.patch


def test_owners_that_cannot_be_read_follow_failureMode() -> None:
    _js, job = _cluster()
    open_ = _admit(_pod(job), Owners(fail=True))
    assert open_.response.allowed and not open_.response.patch
    assert (
        "joins no gang" in open_.response.warnings[0] and "HTTP 503" in open_.response.warnings[0]
    )
    closed = _admit(_pod(job), Owners(fail=True), CLOSED)
    assert not closed.response.allowed and "HTTP 503" in closed.response.message


def test_the_pod_webhook_is_registered_only_with_the_feature_and_scoped_by_the_label() -> None:
    off = mutating_webhook_configuration([])
    assert GANG_WEBHOOK not in [h["name"] for h in off["webhooks"]]
    on = mutating_webhook_configuration([], gang=True)
    [hook] = [h for h in on["webhooks"] if h["name"] == GANG_WEBHOOK]
    assert hook["clientConfig"]["service"]["path"] == "/gang"
    assert hook["objectSelector"]["matchExpressions"][0]["key"] == GANG_LABEL
    assert hook["rules"][0]["resources"] == ["pods"] and hook["rules"][0]["operations"] == [
        "CREATE"
    ]
    assert hook["failurePolicy"] == "Fail"


def test_manifests_add_the_pod_webhook_for_a_policy_with_gang(tmp_path: Any) -> None:
    import subprocess
    import sys

    import yaml

    pol = tmp_path / "policy.yaml"
    pol.write_text("rules: [{name: g, gang: native}]\n")
    out = subprocess.run(
        [sys.executable, "-m", "webhook", "manifests", "--policy", str(pol), "--url", "https://127.0.0.1:8443"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    mwc = next(yaml.safe_load_all(out.stdout))
    [hook] = [h for h in mwc["webhooks"] if h["name"] == GANG_WEBHOOK]
    assert hook["clientConfig"]["url"] == "https://127.0.0.1:8443/gang"
