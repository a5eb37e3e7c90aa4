"""The native gang through a real kube-apiserver and a real kube-scheduler (v1.37.2, gate
``GenericWorkload``, ``scheduling.k8s.io/v1beta1`` served), with karta-webhook ``serve`` in
cluster mode as the ServiceAccount of ``manifests/base/rbac.yaml`` and registered as
``manifests --url --policy`` prints it (the gang's Pod webhook included), on two hand-made
4-GPU Nodes (no kubelet: a bound pod is the signal).

The workload is a Job (no controller runs: the test creates its pods as the Job controller
would, owned by the Job, with its stamped template's labels), so what is proven is the
webhook's part: the template's gang label, each pod's ``schedulingGroup`` at creation, the
leader's PodGroup (``minCount`` from the definition, following the Job's scale), and the
scheduler's all-or-nothing on them: 3 pods of 4 GPUs on 2 nodes, 0 bound with the gang and 2
without; 2 pods, both bound and ``PodGroupInitiallyScheduled=True``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kapi
import pytest
from hooks import Webhook, configurations, register, start_webhook, unregister, wait_until

from webhook.workload.gang import GANG_LABEL, group_name

BASE = kapi.ROOT / "manifests" / "base"
GATES = ["--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1beta1=true"]
POLICY = """\
rules:
- name: gang
  match: {kinds: [Job], namespaces: ["gang-*"]}
  gang: native-workload
"""
PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups"


@dataclass
class Gang:
    cp: kapi.ControlPlane
    hook: Webhook


def _node(cp: kapi.ControlPlane, name: str, gpus: int) -> None:
    status, body = cp.request(
        "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    )
    assert status == 201, body
    cap = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "lastHeartbeatTime": now, "lastTransitionTime": now}  # fmt: skip
    merge = "application/merge-patch+json"
    status, body = cp.request(
        "PATCH", f"/api/v1/nodes/{name}/status",
        {"status": {"capacity": cap, "allocatable": cap, "conditions": [ready]}},
        content_type=merge,
    )  # fmt: skip
    assert status == 200, body
    # TaintNodesByCondition tainted it not-ready at create; no node controller takes it off
    status, body = cp.request(
        "PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, content_type=merge
    )
    assert status == 200, body


def _binary(tools: Path, name: str, env: str) -> Path:
    given = os.environ.get(env)
    path = Path(given) if given else tools / name
    if not path.is_file():
        raise kapi.ToolsMissing(
            f"no {name} at {path} (hack/build-tools.sh builds it with the scheduling plane; or "
            f"set {env})"
        )
    return path


def _spawn(d: Path, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
    with (d / f"{name}.log").open("ab") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


JOBSET_DIR_ENV = "KARTA_E2E_JOBSET_DIR"
#: each operator: its Configuration's apiVersion and its CRD files
OPERATORS = {
    "jobset": ("config.jobset.x-k8s.io/v1alpha1", ("jobset.x-k8s.io_jobsets.yaml",)),
    "lws": (
        "config.lws.x-k8s.io/v1alpha1",
        ("leaderworkerset.x-k8s.io_leaderworkersets.yaml",
         "disaggregatedset.x-k8s.io_disaggregatedsets.yaml"),
    ),
}  # fmt: skip


def _jobset_files(tools: Path, op: str = "jobset") -> Path:
    """The folder with an operator's manager, CRDs and webhook manifests (``OP-manager``,
    ``OP/<crd>.yaml``, ``OP/webhook/``, as hack/build-tools.sh lays them out with the
    scheduling plane)."""
    d = Path(os.environ.get(JOBSET_DIR_ENV) or tools)
    need = [d / f"{op}-manager", *(d / op / f for f in OPERATORS[op][1]),
            d / op / "webhook" / "manifests.yaml"]  # fmt: skip
    missing = [str(p) for p in need if not p.is_file()]
    if missing:
        raise kapi.ToolsMissing(f"no {', '.join(missing)} (or set {JOBSET_DIR_ENV})")
    return d


def _jobset_webhooks(d: Path, port: int, ca: Path, op: str = "jobset") -> list[dict[str, Any]]:
    """JobSet's webhook configurations with its kustomize patches (pod webhooks only for pods
    of a JobSet), each service made a URL on ``port`` trusting ``ca``."""
    import base64

    import jsonpatch
    import yaml

    folder = d / op / "webhook"
    docs = [x for x in yaml.safe_load_all((folder / "manifests.yaml").read_text()) if x]
    bundle = base64.b64encode(ca.read_bytes()).decode()
    out = []
    for doc in docs:
        kind = "mutating" if doc["kind"].startswith("Mutating") else "validating"
        for patch in (folder / f"{kind}-patch.yaml", folder / "patches" / f"{kind}-patch.yaml"):
            if patch.is_file():
                doc = jsonpatch.apply_patch(doc, yaml.safe_load(patch.read_text()))
        doc["metadata"]["name"] = f"{op}-{doc['metadata']['name']}"
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
        out.append(doc)
    return out


def _start_jobset(
    cp: kapi.ControlPlane, d: Path, files: Path, op: str = "jobset"
) -> subprocess.Popen[bytes]:
    """The operator ``op``'s CRDs applied, its manager started, its webhooks registered."""
    import socket

    import yaml

    names = []
    for f in OPERATORS[op][1]:
        cp.kubectl("apply", "--server-side", "-f", str(files / op / f))
        names.append(kapi.load((files / op / f).read_text())["metadata"]["name"])
    cp.wait_established(*names)
    port = kapi.free_port()
    config = d / f"{op}-config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": OPERATORS[op][0], "kind": "Configuration",
        "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
        "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(cp.ca.parent)},
        "metrics": {"bindAddress": "0"}, "health": {"healthProbeBindAddress": "0"},
    }))  # fmt: skip
    proc = _spawn(d, f"{op}-manager", [str(files / f"{op}-manager"), f"--config={config}",
                                        f"--kubeconfig={cp.kubeconfig}", "--zap-devel=false"])  # fmt: skip

    def listening() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    wait_until(f"{op}-manager's webhooks", listening, 120)
    cp.apply(_jobset_webhooks(files, port, cp.ca, op))
    return proc


@contextlib.contextmanager
def _gang_plane(
    d: Path, *, controllers: bool, policy: str = POLICY, jobset: bool = False, lws: bool = False
) -> Iterator[Gang]:
    """The plane (see the module docstring); with ``controllers``, kube-controller-manager
    too (the Job controller makes the pods, the garbage collector deletes what a workload
    owns); with ``jobset``, JobSet's manager and webhooks too."""
    try:
        tools = kapi.tools_dir()
        kapi.kubectl_binary()
        binaries = {"kube-scheduler": _binary(tools, "kube-scheduler", "KARTA_E2E_KUBE_SCHEDULER")}
        if controllers:
            binaries["kube-controller-manager"] = _binary(
                tools, "kube-controller-manager", "KARTA_E2E_KUBE_CONTROLLER_MANAGER"
            )
        jobset_files = _jobset_files(tools) if jobset else None
        lws_files = _jobset_files(tools, "lws") if lws else None
    except kapi.ToolsMissing as e:
        # In CI a missing tool fails, once hack/build-tools.sh builds the plane's at all
        if os.environ.get("CI") and "kube-scheduler" in kapi.BUILD_SCRIPT.read_text():
            pytest.fail(f"CI: {e}", pytrace=False)
        pytest.skip(str(e))
    cp = kapi.start(d / "kapi", tools, GATES)
    procs: list[subprocess.Popen[bytes]] = []
    hook: Webhook | None = None
    kc = cp.kubeconfig
    common = [f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
              f"--authorization-kubeconfig={kc}", "--leader-elect=false",
              "--bind-address=127.0.0.1", "--feature-gates=GenericWorkload=true"]  # fmt: skip
    try:
        procs.append(
            _spawn(d, "kube-scheduler", [str(binaries["kube-scheduler"]), *common,
                                         f"--secure-port={kapi.free_port()}"])
        )  # fmt: skip
        if controllers:
            procs.append(
                _spawn(d, "kube-controller-manager", [
                    str(binaries["kube-controller-manager"]), *common,
                    f"--secure-port={kapi.free_port()}",
                    "--controllers=*,-node-lifecycle-controller",
                    f"--service-account-private-key-file={cp.sa_key}", f"--root-ca-file={cp.ca}",
                ])
            )  # fmt: skip
        if jobset_files is not None:
            procs.append(_start_jobset(cp, d, jobset_files))
        if lws_files is not None:
            procs.append(_start_jobset(cp, d, lws_files, "lws"))
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
            d / "serve", policy, [f"--kubeconfig={sa}"], env={"POD_NAMESPACE": "karta-system"}
        )
        served = hook
        wait_until("serve ready", lambda: bool(served.readyz().get("ready")), 90)
        register(cp, configurations(hook, policy=hook.policy, failure_policy="Fail"))
        for i in range(2):
            _node(cp, f"gpu-{i}", 4)
        yield Gang(cp, hook)
    finally:
        unregister(cp)
        if hook is not None:
            hook.stop()
        for proc in procs:
            _end(proc)
        cp.stop()


@pytest.fixture(scope="module")
def gang(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gang]:
    with _gang_plane(tmp_path_factory.mktemp("gang"), controllers=False) as g:
        yield g


@pytest.fixture(scope="module")
def gang_jobset(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gang]:
    policy = (
        POLICY
        + '- name: jobsets\n  match: {kinds: [JobSet], namespaces: ["gang-*"]}\n  gang: native\n'
        + '- name: lws\n  match: {kinds: [LeaderWorkerSet], namespaces: ["gang-*"]}\n'
        + "  gang: native-workload\n"
    )
    d = tmp_path_factory.mktemp("gangjs")
    with _gang_plane(d, controllers=True, policy=policy, jobset=True, lws=True) as g:
        yield g


@pytest.fixture(scope="module")
def gang_controllers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gang]:
    with _gang_plane(tmp_path_factory.mktemp("gangkcm"), controllers=True) as g:
        yield g


def _ns(cp: kapi.ControlPlane) -> str:
    name = f"gang-{uuid.uuid4().hex[:8]}"
    cp.kubectl("create", "namespace", name)
    return name


def _job(cp: kapi.ControlPlane, ns: str, pods: int) -> dict[str, Any]:
    body = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": ns},
        "spec": {
            "suspend": True, "parallelism": pods, "completions": pods,
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
    gang_controllers: Gang,
) -> None:
    """With kube-controller-manager: the Job controller's pods are linked at creation and
    bound together; the Job deleted, the garbage collector deletes its PodGroup (its
    protection finalizer goes once the pods are gone: bound pods of a node without a kubelet
    are force-deleted here)."""
    cp = gang_controllers.cp
    ns = _ns(cp)
    job = _job(cp, ns, 2)
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


def test_the_12_gpu_jobset_is_placed_all_or_nothing(gang_jobset: Gang) -> None:
    """README's JobSet (leader 1 + workers 2, 4 GPUs each) made by the real JobSet manager and
    Job controller: one group of 3 (its definition's podGroup), none of its pods bound on two
    4-GPU nodes; a third node, and all 3 bound together."""
    import yaml

    cp = gang_jobset.cp
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
    _node(cp, "gpu-2", 4)
    try:
        wait_until("all 3 bound together", lambda: _bound(cp, ns) == 3, 90)
        assert _condition(_podgroup(cp, ns, name)) == "True"
    finally:
        cp.request(
            "DELETE", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/trainer",
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
        )  # fmt: skip
        _clean(cp, ns)
        cp.request("DELETE", "/api/v1/nodes/gpu-2")


def test_an_lws_of_two_replicas_is_one_gang_placed_all_or_nothing(gang_jobset: Gang) -> None:
    """A LeaderWorkerSet of 2 replicas x size 2 (4 GPUs a pod) made by the real LWS manager,
    its definition without gang instructions and the rule's native-workload: one group of 4;
    none bound on two 4-GPU nodes (without it each replica's leader could hold a node), all 4
    together once two more nodes are added."""
    cp = gang_jobset.cp
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
    _node(cp, "gpu-3", 4)
    _node(cp, "gpu-4", 4)
    try:
        wait_until("all 4 bound together", lambda: _bound(cp, ns) == 4, 120)
    finally:
        cp.request(
            "DELETE", f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets/serve",
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
        )  # fmt: skip
        _clean(cp, ns)
        cp.request("DELETE", "/api/v1/nodes/gpu-3")
        cp.request("DELETE", "/api/v1/nodes/gpu-4")
