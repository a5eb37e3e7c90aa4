"""The native gang through a real kube-apiserver and a real kube-scheduler (v1.37.2, gate
``GenericWorkload``, ``scheduling.k8s.io/v1beta1`` served: the shared scheduling plane,
``schedplane.py``, with kube-controller-manager and the JobSet and LWS managers), with
karta-webhook ``serve`` in cluster mode as the ServiceAccount of ``manifests/base/rbac.yaml``
and registered as ``manifests --url --policy`` prints it (the gang's Pod webhook included), on
two hand-made untainted 4-GPU Nodes of the module's own (no kubelet: a bound pod is the
signal; the plane's GPU nodes are tainted and its CPU nodes have no GPU, so no gang pod goes
there).

For the first tests the Job is managed by no controller (``spec.managedBy`` another's): the
test creates its pods as the Job controller would, owned by the Job, with its stamped
template's labels, so what is proven is the webhook's part: the template's gang label, each
pod's ``schedulingGroup`` at creation, the leader's PodGroup (``minCount`` from the definition,
following the Job's scale), and the scheduler's all-or-nothing on them: 3 pods of 4 GPUs on 2
nodes, 0 bound with the gang and 2 without; 2 pods, both bound and
``PodGroupInitiallyScheduled=True``. Then the controllers' own pods: a Job's, README's JobSet's
and an LWS's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kapi
import pytest
from hooks import Webhook, configurations, register, start_webhook, unregister, wait_until
from schedplane import SchedulingPlane

from webhook.workload.gang import GANG_LABEL, group_name

BASE = kapi.ROOT / "manifests" / "base"
POLICY = """\
rules:
- name: gang
  match: {kinds: [Job], namespaces: ["gang-*"]}
  gang: native-workload
- name: jobsets
  match: {kinds: [JobSet], namespaces: ["gang-*"]}
  gang: native
- name: lws
  match: {kinds: [LeaderWorkerSet], namespaces: ["gang-*"]}
  gang: native-workload
"""
PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"
#: a Job the Job controller leaves alone (``spec.managedBy``): the test makes its pods
NO_CONTROLLER = "karta-webhook.run.ai/e2e"
#: the module's GPU nodes: 4 GPUs each, no taint
NODES = ("gang-0", "gang-1")


@dataclass
class Gang:
    sp: SchedulingPlane
    hook: Webhook

    @property
    def cp(self) -> kapi.ControlPlane:
        return self.sp.cp


@pytest.fixture(scope="module")
def gang(
    scheduling_plane: SchedulingPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gang]:
    """The server in cluster mode under manifests/base's RBAC (its leader makes the
    PodGroups), registered with ``failurePolicy: Fail``; the module's two GPU nodes."""
    sp, d = scheduling_plane, tmp_path_factory.mktemp("gang")
    cp = sp.cp
    hook: Webhook | None = None
    try:
        for f in ("crd-kartas.yaml", "crd-kartapolicies.yaml", "crd-kartanamespacepolicies.yaml"):
            cp.kubectl("apply", "--server-side", "-f", str(BASE / f))
        cp.wait_established(
            "kartas.run.ai",
            "kartapolicies.policies.karta-webhook.run.ai",
            "kartanamespacepolicies.policies.karta-webhook.run.ai",
        )
        for f in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml"):
            cp.kubectl("apply", "--server-side", "-f", str(BASE / f))
        token = cp.kubectl(
            "create", "token", "karta-webhook", "-n", "karta-system", "--duration=2h"
        ).stdout.strip()
        sa = d / "sa-kubeconfig"
        sa.write_text(kapi.kubeconfig_text(cp.url, cp.ca, token, "karta-webhook"))
        hook = start_webhook(
            d / "serve", POLICY, [f"--kubeconfig={sa}"], env={"POD_NAMESPACE": "karta-system"}
        )
        served = hook
        wait_until("serve ready", lambda: bool(served.readyz().get("ready")), 90)
        register(cp, configurations(hook, policy=hook.policy, failure_policy="Fail"))
        for name in NODES:
            sp.add_node(name, gpus=4)
        yield Gang(sp, hook)
    finally:
        unregister(cp)
        if hook is not None:
            hook.stop()
        for name in NODES:  # the plane's other tests must not find untainted GPU nodes
            sp.delete_node(name)


def _ns(cp: kapi.ControlPlane) -> str:
    name = f"gang-{uuid.uuid4().hex[:8]}"
    cp.kubectl("create", "namespace", name)
    return name


def _job(cp: kapi.ControlPlane, ns: str, pods: int, *, controller: bool = False) -> dict[str, Any]:
    """A suspended Job of ``pods`` pods of 4 GPUs; without ``controller``, one the Job
    controller leaves alone (the test makes its pods)."""
    managed = {} if controller else {"managedBy": NO_CONTROLLER}
    body = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": ns},
        "spec": {
            **managed, "suspend": True, "parallelism": pods, "completions": pods,
            "template": {"metadata": {"labels": {"app": "train"}}, "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox",
                                "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
            }},
        },
    }  # fmt: skip
    status, job = cp.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body)
    assert status == 201, job
    return dict(job)


def _pods(
    cp: kapi.ControlPlane, ns: str, job: dict[str, Any], n: int, *, labels: Any = None
) -> list[dict[str, Any]]:
    """``n`` pods as the Job controller makes them: the template's labels and spec, owned by
    the Job (``labels`` replaces the labels)."""
    t = job["spec"]["template"]
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"],
             "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    out = []
    for i in range(n):
        meta = {"name": f"train-{i}", "namespace": ns, "ownerReferences": [owner],
                "labels": dict(t["metadata"]["labels"] if labels is None else labels)}  # fmt: skip
        status, pod = cp.request(
            "POST",
            f"/api/v1/namespaces/{ns}/pods",
            {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]},
        )
        assert status == 201, pod
        out.append(pod)
    return out


def _bound(cp: kapi.ControlPlane, ns: str) -> int:
    status, body = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")
    assert status == 200, body
    return sum(1 for p in body["items"] if p["spec"].get("nodeName"))


def _podgroup(cp: kapi.ControlPlane, ns: str, name: str) -> dict[str, Any] | None:
    status, body = cp.request("GET", PODGROUPS.format(ns=ns) + f"/{name}")
    return dict(body) if status == 200 else None


def _condition(pg: dict[str, Any] | None) -> str | None:
    for c in ((pg or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == "PodGroupInitiallyScheduled":
            return str(c["status"])
    return None


def _clean(cp: kapi.ControlPlane, ns: str) -> None:
    """Force-delete the pods (bound ones never end without a kubelet) until none is left: their
    GPUs are free. Again and again: a StatefulSet or Job whose owner is being deleted in the
    background can make a pod anew before the garbage collector gets to it."""
    deadline = time.monotonic() + 90
    while True:
        cp.request(
            "DELETE", f"/api/v1/namespaces/{ns}/pods",
            {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
        )  # fmt: skip
        status, body = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")
        assert status == 200, body
        if not body["items"]:
            return
        left = [p["metadata"]["name"] for p in body["items"]]
        assert time.monotonic() < deadline, f"{ns}: pods left after 90 s: {left}"
        time.sleep(0.3)


def test_three_pods_of_4_gpus_on_two_nodes_none_bound_with_the_gang_two_without(gang: Gang) -> None:
    cp = gang.cp
    ns = _ns(cp)
    job = _job(cp, ns, 3)
    assert job["spec"]["template"]["metadata"]["labels"][GANG_LABEL] == "native-workload"
    name = group_name("train", job["metadata"]["uid"], "workload")
    pods = _pods(cp, ns, job, 3)
    assert [p["spec"].get("schedulingGroup") for p in pods] == [{"podGroupName": name}] * 3
    wait_until("the PodGroup", lambda: _podgroup(cp, ns, name) is not None, 30)
    pg = _podgroup(cp, ns, name)
    assert pg is not None
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    assert pg["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    wait_until("Unschedulable", lambda: _condition(_podgroup(cp, ns, name)) == "False", 60)
    time.sleep(3)
    assert _bound(cp, ns) == 0
    _clean(cp, ns)

    control = _ns(cp)
    plain = _job(cp, control, 3)
    labels = {
        k: v for k, v in plain["spec"]["template"]["metadata"]["labels"].items() if k != GANG_LABEL
    }
    got = _pods(cp, control, plain, 3, labels=labels)
    assert all("schedulingGroup" not in p["spec"] for p in got)
    wait_until("2 of 3 bound without the gang", lambda: _bound(cp, control) == 2, 60)
    time.sleep(2)
    assert _bound(cp, control) == 2
    _clean(cp, control)


def test_two_pods_both_bound_the_group_initially_scheduled_and_minCount_follows_scale(
    gang: Gang,
) -> None:
    cp = gang.cp
    ns = _ns(cp)
    job = _job(cp, ns, 2)
    name = group_name("train", job["metadata"]["uid"], "workload")
    _pods(cp, ns, job, 2)
    wait_until("both bound", lambda: _bound(cp, ns) == 2, 60)
    wait_until(
        "PodGroupInitiallyScheduled=True", lambda: _condition(_podgroup(cp, ns, name)) == "True", 60
    )
    status, body = cp.request(
        "PATCH", f"/apis/batch/v1/namespaces/{ns}/jobs/train",
        {"spec": {"parallelism": 1}}, content_type="application/merge-patch+json",
    )  # fmt: skip
    assert status == 200, body

    def min_count() -> Any:
        return (
            ((_podgroup(cp, ns, name) or {}).get("spec") or {})
            .get("schedulingPolicy", {})
            .get("gang", {})
            .get("minCount")
        )

    wait_until("minCount 1 after scaling down", lambda: min_count() == 1, 30)
    _clean(cp, ns)


def test_the_pod_webhook_is_there_only_while_a_rule_has_gang(gang: Gang) -> None:
    """The leader adds and removes it: with no rule having gang, no pod reaches the server."""

    def hooks() -> list[str]:
        mwc = gang.cp.get_json("mutatingwebhookconfiguration", "karta-webhook")
        return [h["name"] for h in mwc["webhooks"]]

    pods_hook = "pods.gang.karta-webhook.run.ai"
    assert pods_hook in hooks()
    gang.hook.policy.write_text("rules: [{name: q, labels: {team: a}}]\n")
    try:
        wait_until("the Pod webhook removed", lambda: pods_hook not in hooks(), 60)
    finally:
        gang.hook.policy.write_text(POLICY)
    wait_until("the Pod webhook back", lambda: pods_hook in hooks(), 60)


def test_a_jobs_own_pods_join_its_group_and_deleting_the_job_deletes_the_group(
    gang: Gang,
) -> None:
    """With kube-controller-manager: the Job controller's pods are linked at creation and
    bound together; the Job deleted, the garbage collector deletes its PodGroup (its
    protection finalizer goes once the pods are gone: bound pods of a node without a kubelet
    are force-deleted here)."""
    cp = gang.cp
    ns = _ns(cp)
    job = _job(cp, ns, 2, controller=True)
    status, body = cp.request(
        "PATCH", f"/apis/batch/v1/namespaces/{ns}/jobs/train", {"spec": {"suspend": False}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    assert status == 200, body
    name = group_name("train", job["metadata"]["uid"], "workload")

    def linked() -> list[Any]:
        items = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")[1]["items"]
        return [p["spec"].get("schedulingGroup") for p in items]

    wait_until("the Job's 2 pods linked", lambda: linked() == [{"podGroupName": name}] * 2, 60)
    wait_until("both bound", lambda: _bound(cp, ns) == 2, 60)
    wait_until(
        "PodGroupInitiallyScheduled=True", lambda: _condition(_podgroup(cp, ns, name)) == "True", 60
    )
    status, body = cp.request(
        "DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/train",
        {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
    )  # fmt: skip
    assert status == 200, body
    wait_until(
        "the PodGroup deleted by the garbage collector",
        lambda: (
            (_podgroup(cp, ns, name) or {}).get("metadata", {}).get("deletionTimestamp") is not None
            or _podgroup(cp, ns, name) is None
        ),
        60,
    )
    _clean(cp, ns)
    wait_until("the PodGroup gone", lambda: _podgroup(cp, ns, name) is None, 60)


def test_the_12_gpu_jobset_is_placed_all_or_nothing(gang: Gang) -> None:
    """README's JobSet (leader 1 + workers 2, 4 GPUs each) made by the real JobSet manager and
    Job controller: one group of 3 (its definition's podGroup), none of its pods bound on two
    4-GPU nodes; a third node, and all 3 bound together."""
    import yaml

    cp = gang.cp
    ns = _ns(cp)
    js = yaml.safe_load(
        (
            kapi.ROOT / "catalog/samples/jobset.x-k8s.io-jobset-v1alpha2/leader-workers.yaml"
        ).read_text()
    )
    js["metadata"]["namespace"] = ns
    status, got = cp.request("POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets", js)
    assert status == 201, got
    name = group_name("trainer", got["metadata"]["uid"], "jobset")

    def pods() -> list[dict[str, Any]]:
        return list(cp.request("GET", f"/api/v1/namespaces/{ns}/pods")[1]["items"])

    wait_until(
        "3 pods, each linked",
        lambda: [p["spec"].get("schedulingGroup") for p in pods()] == [{"podGroupName": name}] * 3,
        90,
    )
    wait_until(
        "the PodGroup of 3",
        lambda: (
            ((_podgroup(cp, ns, name) or {}).get("spec") or {})
            .get("schedulingPolicy", {})
            .get("gang", {})
            .get("minCount")
            == 3
        ),
        30,
    )
    wait_until("Unschedulable", lambda: _condition(_podgroup(cp, ns, name)) == "False", 60)
    assert _bound(cp, ns) == 0
    gang.sp.add_node("gang-2", gpus=4)
    try:
        wait_until("all 3 bound together", lambda: _bound(cp, ns) == 3, 90)
        assert _condition(_podgroup(cp, ns, name)) == "True"
    finally:
        cp.request(
            "DELETE", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/trainer",
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
        )  # fmt: skip
        _clean(cp, ns)
        gang.sp.delete_node("gang-2")


def test_an_lws_of_two_replicas_is_one_gang_placed_all_or_nothing(gang: Gang) -> None:
    """A LeaderWorkerSet of 2 replicas x size 2 (4 GPUs a pod) made by the real LWS manager,
    its definition without gang instructions and the rule's native-workload: one group of 4;
    none bound on two 4-GPU nodes (without it each replica's leader could hold a node), all 4
    together once two more nodes are added."""
    cp = gang.cp
    ns = _ns(cp)
    t = {"metadata": {"labels": {"app": "lws"}}, "spec": {"containers": [
        {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}  # fmt: skip
    body = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "namespace": ns},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": t}}}  # fmt: skip
    status, got = cp.request(
        "POST", f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets", body
    )
    assert status == 201, got
    name = group_name("serve", got["metadata"]["uid"], "workload")

    def linked() -> list[Any]:
        items = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")[1]["items"]
        return [p["spec"].get("schedulingGroup") for p in items]

    wait_until("4 pods, each linked", lambda: linked() == [{"podGroupName": name}] * 4, 120)
    wait_until("Unschedulable", lambda: _condition(_podgroup(cp, ns, name)) == "False", 60)
    assert ((_podgroup(cp, ns, name) or {})["spec"]["schedulingPolicy"]["gang"]["minCount"]) == 4
    assert _bound(cp, ns) == 0
    gang.sp.add_node("gang-3", gpus=4)
    gang.sp.add_node("gang-4", gpus=4)
    try:
        wait_until("all 4 bound together", lambda: _bound(cp, ns) == 4, 120)
    finally:
        cp.request(
            "DELETE", f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets/serve",
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
        )  # fmt: skip
        _clean(cp, ns)
        gang.sp.delete_node("gang-3")
        gang.sp.delete_node("gang-4")
