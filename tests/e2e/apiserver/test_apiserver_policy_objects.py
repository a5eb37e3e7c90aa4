"""KartaPolicy objects through a real API server (issue 36 item 1): the CRD of
``manifests/base/crd-kartapolicies.yaml``; a server in cluster mode watches the objects; one
applied with kubectl is in force at once (the latency measured and printed), and one rule gives
each workload the queue of its namespace's label; deleting it stops it; an invalid one is
refused at ``kubectl apply`` by the validating webhook naming its field, with the policy file's
message."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import kapi
import pytest
from hooks import Webhook, configurations, register, start_webhook, unregister, wait_until

QUEUE = "kai.scheduler/queue"
CRD = kapi.ROOT / "manifests" / "base" / "crd-kartapolicies.yaml"
TEAM_CRD = kapi.ROOT / "manifests" / "base" / "crd-kartanamespacepolicies.yaml"
QUEUES = """\
apiVersion: policies.karta-webhook.run.ai/v1alpha1
kind: KartaPolicy
metadata: {name: queues}
spec:
  rules:
  - name: queue
    match:
      namespaceSelector: {matchExpressions: [{key: kai-queue, operator: Exists}]}
    labels: {kai.scheduler/queue: "$(namespace.labels['kai-queue'])"}
"""

STORED_INVALID = """\
apiVersion: policies.karta-webhook.run.ai/v1alpha1
kind: KartaPolicy
metadata: {name: stored-invalid}
spec:
  rules:
  - {name: q, labels: {"bad key!": x}}
"""


@pytest.fixture(scope="module")
def hook(plane: kapi.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    plane.kubectl("apply", "-f", str(CRD), "-f", str(TEAM_CRD))
    plane.wait_established(
        "kartapolicies.policies.karta-webhook.run.ai",
        "kartanamespacepolicies.policies.karta-webhook.run.ai",
    )
    served = start_webhook(
        tmp_path_factory.mktemp("serve-policy-objects"),
        "rules: []\n",
        [f"--kubeconfig={plane.kubeconfig}", "--manage-webhooks=false"],
        env={"POD_NAMESPACE": "default", "POD_NAME": "policy-objects"},
    )
    try:
        # stored before the validating webhook is registered: the server must say why not
        plane.kubectl("apply", "-f", "-", input=STORED_INVALID)
        register(plane, configurations(served, failure_policy="Fail"))
        yield served
    finally:
        plane.kubectl("delete", "kartapolicies", "--all", "--wait=true", check=False)
        plane.kubectl("delete", "kartanamespacepolicies", "--all", "-A", "--wait=true", check=False)
        unregister(plane)
        served.stop()


def _namespace(plane: kapi.ControlPlane, queue: str) -> str:
    name = f"ns-{uuid.uuid4().hex[:8]}"
    plane.apply([{"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": name, "labels": {"kai-queue": queue}}}])  # fmt: skip
    return name


def _labels(plane: kapi.ControlPlane, namespace: str) -> dict[str, str]:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"d-{uuid.uuid4().hex[:6]}", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    status, out = plane.request(
        "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments?dryRun=All", body
    )
    if status != 201:
        return {}
    got: dict[str, str] = out["spec"]["template"]["metadata"].get("labels", {})
    return got


def _queue(plane: kapi.ControlPlane, namespace: str) -> str | None:
    return _labels(plane, namespace).get(QUEUE)


def _latency(what: str, ok: Any) -> None:
    start = time.monotonic()
    wait_until(what, ok)
    print(f"{what}: {time.monotonic() - start:.2f} s")


def test_an_applied_policy_is_in_force_and_a_deleted_one_is_not(
    plane: kapi.ControlPlane, hook: Webhook
) -> None:
    alpha, beta = _namespace(plane, "alpha"), _namespace(plane, "beta")
    wait_until("the webhook answers", lambda: _queue(plane, alpha) is None)
    plane.kubectl("apply", "-f", "-", input=QUEUES)
    _latency("an applied KartaPolicy in force", lambda: _queue(plane, alpha) == "alpha")
    assert _queue(plane, beta) == "beta"  # one rule, each namespace's own queue
    shown = plane.kubectl("get", "kartapolicies").stdout
    assert "queues" in shown and "queue" in shown.split("\n")[1], shown  # the Rules column
    plane.kubectl("delete", "kartapolicy", "queues")
    _latency("a deleted KartaPolicy out of force", lambda: _queue(plane, alpha) is None)


def test_an_invalid_policy_is_refused_at_apply_naming_its_field(
    plane: kapi.ControlPlane, hook: Webhook
) -> None:
    bad = QUEUES.replace("name: queues", "name: bad").replace(
        "labels: {kai.scheduler/queue:",
        "schedulerName: Bad_Scheduler\n    labels: {kai.scheduler/queue:",
    )
    out = plane.kubectl("apply", "-f", "-", input=bad, check=False)
    assert out.returncode != 0
    assert "spec.rules[0] (queue).schedulerName" in out.stderr, out.stderr
    assert 'KartaPolicy "bad" is invalid' in out.stderr
    status, _ = plane.request(
        "GET", "/apis/policies.karta-webhook.run.ai/v1alpha1/kartapolicies/bad"
    )
    assert status == 404


def _accepted(plane: kapi.ControlPlane, name: str, kind: str = "Accepted") -> dict[str, Any] | None:
    status, out = plane.request(
        "GET", f"/apis/policies.karta-webhook.run.ai/v1alpha1/kartapolicies/{name}"
    )
    conds = (out.get("status") or {}).get("conditions") or [] if status == 200 else []
    return next((c for c in conds if c.get("type") == kind), None)


def test_the_accepted_condition_says_why_a_stored_policy_is_not_in_force(
    plane: kapi.ControlPlane, hook: Webhook
) -> None:
    wait_until(
        "the Accepted condition is written", lambda: _accepted(plane, "stored-invalid") is not None
    )
    cond = _accepted(plane, "stored-invalid")
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "Invalid"
    assert "spec.rules[0] (q).labels['bad key!']: invalid key" in cond["message"], cond
    plane.kubectl("apply", "-f", "-", input=QUEUES)
    wait_until(
        "a good policy is Accepted",
        lambda: (_accepted(plane, "queues") or {}).get("status") == "True",
    )
    shown = plane.kubectl("get", "kartapolicies").stdout.splitlines()
    assert shown[0].split() == ["NAME", "RULES", "READY", "AGE"], shown
    rows = {line.split()[0]: line.split() for line in shown[1:]}
    assert rows["queues"][1:3] == ["queue", "True"] and rows["stored-invalid"][1:3] == [
        "q",
        "False",
    ]
    plane.kubectl("delete", "kartapolicy", "queues")


GANG = """\
apiVersion: policies.karta-webhook.run.ai/v1alpha1
kind: KartaPolicy
metadata: {name: gangs}
spec:
  rules:
  - {name: g, match: {kinds: [Job], namespaces: ["no-such-*"]}, gang: native-workload}
"""


def test_a_gang_rule_on_a_cluster_without_podgroups_says_so_in_its_status(
    plane: kapi.ControlPlane, hook: Webhook
) -> None:
    """Issue 46 item 5: this API server does not serve ``scheduling.k8s.io/v1beta1``; the
    policy is in force (its workloads are still labelled) and ``GangScheduling`` says that no
    PodGroup is made, and how to turn the API on."""
    plane.kubectl("apply", "-f", "-", input=GANG)
    try:
        wait_until(
            "the GangScheduling condition",
            lambda: _accepted(plane, "gangs", "GangScheduling") is not None,
        )
        cond = _accepted(plane, "gangs", "GangScheduling")
        assert cond is not None and (cond["status"], cond["reason"]) == (
            "False", "PodGroupsNotServed",
        ), cond  # fmt: skip
        assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in cond["message"], cond
        assert "no PodGroup is made" in cond["message"], cond
        assert (_accepted(plane, "gangs") or {}).get("status") == "True"
        assert "gangs.unserved" in hook.log_text()
    finally:
        plane.kubectl("delete", "kartapolicy", "gangs")


TEAM = """\
apiVersion: policies.karta-webhook.run.ai/v1alpha1
kind: KartaNamespacePolicy
metadata: {name: team, namespace: NS}
spec:
  rules:
  - name: r
    labels: {example.com/team: ml}
"""


def test_a_namespaced_policy_adds_to_its_namespace_and_cannot_change_a_cluster_field(
    plane: kapi.ControlPlane, hook: Webhook
) -> None:
    alpha, beta = _namespace(plane, "alpha"), _namespace(plane, "beta")
    plane.kubectl("apply", "-f", "-", input=QUEUES)
    plane.kubectl("apply", "-f", "-", input=TEAM.replace("NS", alpha))
    wait_until(
        "the team's label in force in its namespace",
        lambda: _labels(plane, alpha).get("example.com/team") == "ml",
    )
    assert _labels(plane, alpha)[QUEUE] == "alpha"  # the cluster's queue, beside the team's
    assert "example.com/team" not in _labels(plane, beta)  # its namespace only
    # the queue is the cluster policy's: refused at apply, naming the field
    over = (
        TEAM.replace("NS", alpha)
        .replace("name: team,", "name: over,")
        .replace("example.com/team: ml", "kai.scheduler/queue: mine")
    )
    out = plane.kubectl("apply", "-f", "-", input=over, check=False)
    assert out.returncode != 0
    assert "spec.rules[0] (r).labels['kai.scheduler/queue']" in out.stderr, out.stderr
    assert "set by the cluster's policy (rule 'queues/queue')" in out.stderr
    wider = (
        TEAM.replace("NS", alpha)
        .replace("name: team,", "name: wider,")
        .replace("labels: {example.com/team: ml}", "schedulerName: mine")
    )
    out = plane.kubectl("apply", "-f", "-", input=wider, check=False)
    assert out.returncode != 0 and "may set only labels and annotations" in out.stderr
    plane.kubectl("delete", "kartapolicy", "queues")
    plane.kubectl("delete", "kartanamespacepolicy", "team", "-n", alpha)
