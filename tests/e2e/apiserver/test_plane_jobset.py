"""README's 12-GPU JobSet end to end and updates reaching new pods (issue 45 items 4 and 5), on
the scheduling plane (``schedplane.py``) with karta-webhook in cluster mode and policies as
``KartaPolicy`` objects:

* the leader/worker JobSet (1 leader, 2 workers, 4 GPUs a pod) in a namespace labelled with
  its queue: its Jobs and pods carry the queue and the scheduler, one pod bound per GPU node,
  and ``describe`` of the live JobSet shows leader and workers, 12 GPUs and the nodes;
* a Deployment made before a policy (``UPDATE``, Deployments only) and then changed: the new
  ReplicaSet's pods are stamped, the old ones not;
* a JobSet made suspended before a policy (``UPDATE``, JobSets only), then changed and
  resumed: its pods are stamped and bound on GPU nodes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import kapi
import pytest
import yaml
from hooks import Webhook, configurations, register, start_webhook, unregister, wait_until
from schedplane import SchedulingPlane

from webhook.cli import main as cli

SAMPLE = kapi.ROOT / "catalog/samples/jobset.x-k8s.io-jobset-v1alpha2/leader-workers.yaml"
CRDS = [
    kapi.ROOT / "manifests" / "base" / f"crd-{n}.yaml"
    for n in ("kartas", "kartapolicies", "kartanamespacepolicies")
]
QUEUE = "kai.scheduler/queue"
GPU = """\
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    nodeSelector: {nvidia.com/gpu.present: "true"}
"""


def kartapolicy(
    name: str, key: str, extra: str = "", ops: str = "[CREATE]", kinds: str = ""
) -> str:
    match = f"namespaceSelector: {{matchExpressions: [{{key: {key}, operator: Exists}}]}}"
    if kinds:
        match += f", kinds: {kinds}"
    return f"""\
apiVersion: policies.karta-webhook.run.ai/v1alpha1
kind: KartaPolicy
metadata: {{name: {name}}}
spec:
  operations: {ops}
  rules:
  - name: queue
    match: {{{match}}}
    labels: {{{QUEUE}: "$(namespace.labels['{key}'])"}}
{extra}"""


@pytest.fixture(scope="module")
def hook(
    scheduling_plane: SchedulingPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    cp = scheduling_plane.cp
    for crd in CRDS:
        cp.kubectl("apply", "-f", str(crd))
    cp.wait_established(
        "kartas.run.ai",
        "kartapolicies.policies.karta-webhook.run.ai",
        "kartanamespacepolicies.policies.karta-webhook.run.ai",
    )
    served = start_webhook(
        tmp_path_factory.mktemp("serve-plane-jobset"),
        "operations: [CREATE, UPDATE]\nrules: []\n",  # the registered operations; no rules
        [f"--kubeconfig={cp.kubeconfig}", "--manage-webhooks=false"],
        env={"POD_NAMESPACE": "default", "POD_NAME": "plane-jobset"},
    )
    try:
        wait_until("the cluster-mode server ready", lambda: served.readyz().get("ready") is True)
        register(cp, configurations(served, policy=served.policy, failure_policy="Fail"))
        yield served
    finally:
        cp.kubectl("delete", "kartapolicies", "--all", "--wait=true", check=False)
        unregister(cp)
        served.stop()


def _in_force(sp: SchedulingPlane, ns: str, kind: str, want: str) -> None:
    """Wait until a dry-run ``kind`` in ``ns`` comes back with the queue label ``want``."""
    body = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": f"probe-{uuid.uuid4().hex[:6]}", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }  # fmt: skip

    def ok() -> bool:
        status, out = sp.cp.request(
            "POST", f"/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All", body
        )
        return (
            status == 201
            and out["spec"]["template"]["metadata"].get("labels", {}).get(QUEUE) == want
        )

    wait_until(f"the KartaPolicy in force in {ns} ({kind})", ok)


def _describe(sp: SchedulingPlane, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    code = cli.main(["describe", *argv, "--kubeconfig", str(sp.cp.kubeconfig)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_twelve_gpu_jobset_end_to_end(
    scheduling_plane: SchedulingPlane, hook: Webhook, capsys: pytest.CaptureFixture[str]
) -> None:
    sp = scheduling_plane
    extra = "    schedulerName: default-scheduler\n" + GPU
    sp.cp.kubectl("apply", "-f", "-", input=kartapolicy("plane-queues", "plane-queue", extra))
    ns = sp.namespace("research", labels={"plane-queue": "research"})
    try:
        _in_force(sp, ns, "Deployment", "research")
        doc = yaml.safe_load(SAMPLE.read_text())
        doc["metadata"]["namespace"] = ns
        sp.cp.apply([doc])
        pods = sp.wait_pods(ns, 3)
        nodes = sorted(p["spec"]["nodeName"] for p in pods)
        assert len(set(nodes)) == 3 and all(n.startswith("gpu-") for n in nodes), nodes
        for p in pods:
            assert p["metadata"]["labels"][QUEUE] == "research", p["metadata"]["name"]
            assert p["spec"]["schedulerName"] == "default-scheduler"
        jobs = sp.cp.get_json("jobs", "-n", ns)["items"]
        assert sorted(j["metadata"]["name"] for j in jobs) == [
            "trainer-leader-0",
            "trainer-workers-0",
        ]
        for j in jobs:
            t = j["spec"]["template"]
            assert t["metadata"]["labels"][QUEUE] == "research", j["metadata"]["name"]
            assert t["spec"]["schedulerName"] == "default-scheduler"
        out = _describe(sp, capsys, "jobset/trainer", "-n", ns)
        assert "12 GPUs" in out.split("\n", 3)[-1], out
        by_role = {
            "leader": [
                p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"]["role"] == "leader"
            ],
            "workers": sorted(
                p["spec"]["nodeName"] for p in pods if p["metadata"]["labels"]["role"] == "worker"
            ),
        }
        assert f"leader: replicas 1, 0/1 ready, nodes {by_role['leader'][0]}, 4 GPUs" in out, out
        assert (
            f"workers: replicas 2, 0/2 ready, nodes {', '.join(by_role['workers'])}, 8 GPUs" in out
        ), out
        for p in pods:
            assert p["metadata"]["name"] in out and p["spec"]["nodeName"] in out, out
        view = json.loads(_describe(sp, capsys, "jobset/trainer", "-n", ns, "-o", "json"))
        assert view["gpus"] == 12 and view["pods"]["total"] == 3, view
    finally:
        sp.cp.kubectl("delete", "kartapolicy", "plane-queues")
        sp.clean(ns)


def _deployment(ns: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": image}]}}},
    }  # fmt: skip


def test_deployment_update_reaches_the_new_replicasets_pods(
    scheduling_plane: SchedulingPlane, hook: Webhook
) -> None:
    sp = scheduling_plane
    ns = sp.namespace("upd", labels={"upd-queue": "blue"})
    try:
        sp.cp.apply([_deployment(ns, "busybox:1")])
        old = sp.wait_pods(ns, 2)
        assert not [p for p in old if QUEUE in p["metadata"]["labels"]]
        sp.cp.kubectl(
            "apply",
            "-f",
            "-",
            input=kartapolicy(
                "plane-upd", "upd-queue", ops="[CREATE, UPDATE]", kinds="[Deployment]"
            ),
        )
        _in_force(sp, ns, "Deployment", "blue")
        sp.cp.apply([_deployment(ns, "busybox:2")])  # the template changed: a new ReplicaSet
        pods = sp.wait_pods(ns, 3, ok=lambda ps: any(QUEUE in p["metadata"]["labels"] for p in ps))
        new = [p for p in pods if p["spec"]["containers"][0]["image"] == "busybox:2"]
        assert new and all(p["metadata"]["labels"][QUEUE] == "blue" for p in new), new
        assert not [p for p in pods if p not in new and QUEUE in p["metadata"]["labels"]]
        rs = [r for r in sp.cp.get_json("replicasets", "-n", ns)["items"]
              if r["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:2"]  # fmt: skip
        assert rs[0]["spec"]["template"]["metadata"]["labels"][QUEUE] == "blue"
    finally:
        sp.cp.kubectl("delete", "kartapolicy", "plane-upd")
        sp.clean(ns)


def test_jobset_suspended_changed_resumed(scheduling_plane: SchedulingPlane, hook: Webhook) -> None:
    sp = scheduling_plane
    ns = sp.namespace("susp", labels={"susp-queue": "green"})
    try:
        doc = yaml.safe_load(SAMPLE.read_text())
        doc["metadata"]["namespace"] = ns
        doc["spec"]["suspend"] = True
        sp.cp.apply([doc])
        sp.cp.kubectl(
            "apply",
            "-f",
            "-",
            input=kartapolicy("plane-susp", "susp-queue", GPU, "[CREATE, UPDATE]", "[JobSet]"),
        )
        _in_force_jobset(sp, ns)
        changed = sp.cp.get_json("jobset", "trainer", "-n", ns)
        for rj in changed["spec"]["replicatedJobs"]:
            assert QUEUE not in rj["template"]["spec"]["template"]["metadata"]["labels"]
            rj["template"]["spec"]["template"]["metadata"]["labels"]["example.com/changed"] = "yes"
        sp.cp.kubectl("replace", "-f", "-", input=json.dumps(changed))
        stored = sp.cp.get_json("jobset", "trainer", "-n", ns)
        for rj in stored["spec"]["replicatedJobs"]:
            assert rj["template"]["spec"]["template"]["metadata"]["labels"][QUEUE] == "green", rj[
                "name"
            ]
        assert not sp.pods(ns)  # suspended: no pods yet
        sp.cp.kubectl(
            "patch",
            "jobset",
            "trainer",
            "-n",
            ns,
            "--type=merge",
            "-p",
            '{"spec":{"suspend":false}}',
        )
        pods = sp.wait_pods(ns, 3)
        for p in pods:
            assert p["metadata"]["labels"][QUEUE] == "green", p["metadata"]["name"]
            assert p["metadata"]["labels"]["example.com/changed"] == "yes"
            assert p["spec"]["nodeName"].startswith("gpu-"), p["spec"]["nodeName"]
    finally:
        sp.cp.kubectl("delete", "kartapolicy", "plane-susp")
        sp.clean(ns)


def _in_force_jobset(sp: SchedulingPlane, ns: str) -> None:
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["metadata"] = {"name": f"probe-{uuid.uuid4().hex[:6]}", "namespace": ns}

    def ok() -> bool:
        status, out = sp.cp.request(
            "POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets?dryRun=All", doc
        )
        labels = (
            out["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
            if status == 201
            else {}
        )
        return bool(labels.get(QUEUE) == "green")

    wait_until(f"the JobSet KartaPolicy in force in {ns}", ok)
