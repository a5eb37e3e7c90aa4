"""The scheduling plane: a control plane of its own (``kapi.start``) with kube-controller-manager,
kube-scheduler and the JobSet and LeaderWorkerSet managers beside it, and hand-made Nodes, so
tests see the pods controllers make from stamped templates and where the scheduler binds them.
No kubelet: a pod with ``spec.nodeName`` set is bound, nothing runs (``docs/development.md``).

:func:`start` → :class:`SchedulingPlane`; ``feature_gates`` (``["GenericWorkload=true"]``) go to
apiserver, kcm and scheduler, ``runtime_config`` (``["scheduling.k8s.io/v1beta1=true"]``) to
the apiserver (:data:`GANG` both). Fixtures (conftest): ``scheduling_plane`` (session, shared,
with :data:`GANG`) and ``scheduling_plane_factory`` (session; ``factory(feature_gates=...,
runtime_config=..., operators=("jobset", "lws"))``, one plane per distinct arguments, all
stopped at the end).
A plane has: ``cp`` (the :class:`kapi.ControlPlane`: ``kubectl``, ``request``, ``apply``),
:meth:`~SchedulingPlane.namespace` (a new one; :meth:`~SchedulingPlane.clean` force-deletes
its pods, then drops it), :meth:`~SchedulingPlane.add_node` / ``delete_node``,
:meth:`~SchedulingPlane.pods`, :meth:`~SchedulingPlane.wait_pods` and ``stop()`` (every
process by its own pid, then the control plane). Nodes: ``gpu-0..3`` (4 ``nvidia.com/gpu``,
labelled ``nvidia.com/gpu.present=true`` and tainted ``nvidia.com/gpu:NoSchedule`` as GPU
operators do) and ``cpu-0..1``. Flags and why: TaintNodesByCondition admission is off (nodes
are Ready at once) and kcm runs without node-lifecycle-controller (no heartbeat, no
``unreachable`` taint after 50 s); the operators' webhooks are served by URL with the test CA.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import kapi
import yaml

OPERATORS = ("jobset", "lws")
#: the native gang's gate and API (Kubernetes 1.37: beta, off by default): ``start(**GANG)``
GANG: dict[str, Sequence[str]] = {
    "feature_gates": ("GenericWorkload=true",),
    "runtime_config": ("scheduling.k8s.io/v1beta1=true",),
}
BINARIES = ("kube-scheduler", "kube-controller-manager", "jobset-manager", "lws-manager")
GPU_NODES = 4
GPUS_PER_NODE = 4
CPU_NODES = 2
GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
GPU_LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB"}
#: Each operator: its configuration's apiVersion, CRD files, webhook files and the objectSelector
#: label of its pod webhooks (from the module's kustomize patches, applied here as JSON patches).
_OPERATOR = {
    "jobset": ("config.jobset.x-k8s.io/v1alpha1", ("jobset.x-k8s.io_jobsets.yaml",)),
    "lws": (
        "config.lws.x-k8s.io/v1alpha1",
        (
            "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
            "disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
        ),
    ),
}


def plane_tools() -> Path:
    """The tools folder holding the plane's binaries too (``build-tools.sh --check`` them)."""
    given = os.environ.get(kapi.TOOLS_ENV)
    if given:
        d = Path(given)
    else:
        out = subprocess.run(
            ["bash", str(kapi.BUILD_SCRIPT), "--check", "kube-apiserver", "etcd", *BINARIES],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if out.returncode != 0:
            raise kapi.ToolsMissing(
                "the scheduling plane is not built: run hack/build-tools.sh (cold: about 30 "
                f"minutes more on 2 cores): {out.stderr.strip()}"
            )
        d = Path(out.stdout.strip())
    missing = [b for b in BINARIES if not (d / b).is_file()]
    missing += [f"{o}/{f}" for o in OPERATORS for f in _OPERATOR[o][1] if not (d / o / f).is_file()]
    if missing:
        raise kapi.ToolsMissing(f"{d}: no {', '.join(missing)} (run hack/build-tools.sh)")
    return d


@dataclass
class SchedulingPlane:
    cp: kapi.ControlPlane
    tools: Path
    dir: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)

    # -- namespaces and pods

    def namespace(self, prefix: str = "s", labels: dict[str, str] | None = None) -> str:
        """A new namespace ``PREFIX-<random>`` (policies match it by a ``PREFIX-*`` glob)."""
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        meta: dict[str, Any] = {"name": name, "labels": labels or {}}
        status, body = self.cp.request("POST", "/api/v1/namespaces", {"metadata": meta})
        assert status == 201, body
        return name

    def clean(self, ns: str) -> None:
        """Drop ``ns``: the namespace controller deletes its objects; its pods, bound to nodes
        no kubelet runs on, are force-deleted (grace 0) until none is left."""
        self.cp.request("DELETE", f"/api/v1/namespaces/{ns}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.cp.request(
                "DELETE", f"/api/v1/namespaces/{ns}/pods",
                {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
            )  # fmt: skip
            status, body = self.cp.request("GET", f"/api/v1/namespaces/{ns}/pods")
            if status != 200 or not body["items"]:
                return
            time.sleep(0.3)

    def pods(self, ns: str, selector: str = "") -> list[dict[str, Any]]:
        q = f"?labelSelector={urllib.parse.quote(selector)}" if selector else ""
        status, body = self.cp.request("GET", f"/api/v1/namespaces/{ns}/pods{q}")
        assert status == 200, body
        return sorted(body["items"], key=lambda p: p["metadata"]["name"])

    def wait_pods(
        self,
        ns: str,
        count: int,
        *,
        bound: bool = True,
        selector: str = "",
        seconds: float = 90,
        ok: Callable[[list[dict[str, Any]]], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """Poll until ``ns`` holds ``count`` pods (matching ``selector``), all bound to a node
        when ``bound``, and ``ok(pods)`` holds; the pods. Fails naming what was seen."""
        deadline = time.monotonic() + seconds
        while True:
            pods = [
                p for p in self.pods(ns, selector) if not p["metadata"].get("deletionTimestamp")
            ]
            done = len(pods) == count and (
                not bound or all(p["spec"].get("nodeName") for p in pods)
            )
            if done and (ok is None or ok(pods)):
                return pods
            if time.monotonic() > deadline:
                seen = [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods]
                raise AssertionError(f"{ns}: want {count} pods (bound={bound}), saw {seen}")
            time.sleep(0.2)

    # -- nodes

    def add_node(
        self,
        name: str,
        *,
        gpus: int = 0,
        labels: dict[str, str] | None = None,
        taints: Sequence[dict[str, str]] = (),
        extra: dict[str, str] | None = None,
    ) -> None:
        """A Node that is Ready (no kubelet: status written once) with 32 CPUs, 256 Gi, 110
        pods, ``gpus`` ``nvidia.com/gpu`` and the ``extra`` resources."""
        meta = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
        status, body = self.cp.request(
            "POST", "/api/v1/nodes",
            {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {"taints": list(taints)}},
        )  # fmt: skip
        assert status == 201, body
        cap = {"cpu": "32", "memory": "256Gi", "pods": "110", **(extra or {})}
        if gpus:
            cap["nvidia.com/gpu"] = str(gpus)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ready = {
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }  # fmt: skip
        info = {
            k: "" for k in ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage")
        } | {
            "containerRuntimeVersion": "none://0", "kubeletVersion": "v1.37.2",
            "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
        }  # fmt: skip
        patch = {
            "status": {"capacity": cap, "allocatable": cap, "conditions": [ready], "nodeInfo": info}
        }
        status, body = self.cp.request(
            "PATCH", f"/api/v1/nodes/{name}/status", patch,
            content_type="application/merge-patch+json",
        )  # fmt: skip
        assert status == 200, body
        self.nodes.append(name)

    def delete_node(self, name: str) -> None:
        self.cp.request("DELETE", f"/api/v1/nodes/{name}")
        if name in self.nodes:
            self.nodes.remove(name)

    # -- lifecycle

    def stop(self) -> None:
        """SIGTERM each component by its own process group (it leads one), SIGKILL what is left
        after 10 s; then the control plane."""
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.cp.stop()


def _port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def _healthz(port: int) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the component's own self-signed serving certificate
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=2) as r:
        return bool(r.status == 200)


def operator_webhooks(tools: Path, op: str, port: int, ca: Path) -> list[dict[str, Any]]:
    """The operator's webhook configurations (``config/.../webhook``) as kustomize would make
    them (its pod-webhook patches applied, names prefixed ``OP-``), each service reference made
    a URL on ``port`` trusting ``ca``."""
    folder = tools / op / "webhook"
    docs = [d for d in yaml.safe_load_all((folder / "manifests.yaml").read_text()) if d]
    patches = {"Mutating": "mutating-patch.yaml", "Validating": "validating-patch.yaml"}
    bundle = base64.b64encode(ca.read_bytes()).decode()
    out = []
    for doc in docs:
        kind = doc["kind"].removesuffix("WebhookConfiguration")
        for p in (folder / patches[kind], folder / "patches" / patches[kind]):
            if p.is_file():
                doc = jsonpatch.apply_patch(doc, yaml.safe_load(p.read_text()))
        doc = copy.deepcopy(doc)
        doc["metadata"]["name"] = f"{op}-{doc['metadata']['name']}"
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
        out.append(doc)
    return out


def _spawn(plane: SchedulingPlane, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
    proc = kapi._spawn(name, cmd, plane.dir)
    plane.procs[name] = proc
    return proc


def start(
    d: Path,
    tools: Path,
    *,
    feature_gates: Sequence[str] = (),
    runtime_config: Sequence[str] = (),
    operators: Sequence[str] = OPERATORS,
) -> SchedulingPlane:
    """Everything started in ``d`` (logs: ``d/NAME.log``, the control plane's in ``d/kapi``)
    and ready: webhooks registered, the default nodes Ready. ``operators``: which of
    ``jobset`` and ``lws`` to run (all by default). Stops what it started on error."""
    gates = [f"--feature-gates={','.join(feature_gates)}"] if feature_gates else []
    api_args = ["--disable-admission-plugins=TaintNodesByCondition", *gates]
    if runtime_config:
        api_args.append(f"--runtime-config={','.join(runtime_config)}")
    d.mkdir(parents=True, exist_ok=True)
    cp = kapi.start(d / "kapi", tools, api_args)
    plane = SchedulingPlane(cp, tools, d)
    try:
        _start_components(plane, gates, tuple(operators))
    except BaseException:
        plane.stop()
        raise
    return plane


def _start_components(plane: SchedulingPlane, gates: list[str], operators: tuple[str, ...]) -> None:
    cp, tools, d = plane.cp, plane.tools, plane.dir
    kc = str(cp.kubeconfig)
    auth = [
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
    ]
    common = [*auth, "--leader-elect=false", "--bind-address=127.0.0.1", *gates]
    crds: list[str] = []
    for op in operators:
        for f in _OPERATOR[op][1]:
            cp.kubectl("apply", "--server-side", "-f", str(tools / op / f))
            crds.append(kapi.load((tools / op / f).read_text())["metadata"]["name"])
    ports = {n: kapi.free_port() for n in ("kube-scheduler", "kube-controller-manager", *operators)}
    _spawn(plane, "kube-scheduler", [
        str(tools / "kube-scheduler"), *common, f"--secure-port={ports['kube-scheduler']}", "--v=2",
    ])  # fmt: skip
    _spawn(plane, "kube-controller-manager", [
        str(tools / "kube-controller-manager"), *common,
        f"--secure-port={ports['kube-controller-manager']}",
        "--controllers=*,-node-lifecycle-controller",
        f"--service-account-private-key-file={cp.sa_key}", f"--root-ca-file={cp.ca}",
        "--kube-api-qps=200", "--kube-api-burst=400", "--v=2",
    ])  # fmt: skip
    cp.wait_established(*crds)
    for op in operators:
        config = d / f"{op}-config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": _OPERATOR[op][0],
                    "kind": "Configuration",
                    "leaderElection": {"leaderElect": False},
                    "internalCertManagement": {"enable": False},
                    "webhook": {
                        "port": ports[op],
                        "host": "127.0.0.1",
                        "certDir": str(cp.ca.parent),
                    },
                    "metrics": {"bindAddress": "0"},
                    "health": {"healthProbeBindAddress": "0"},
                }
            )
        )
        _spawn(plane, f"{op}-manager", [
            str(tools / f"{op}-manager"), f"--config={config}", f"--kubeconfig={kc}",
            "--zap-devel=false",
        ])  # fmt: skip
    for name in ("kube-scheduler", "kube-controller-manager"):
        port = ports[name]
        kapi._wait(name, lambda p=port: _healthz(p), plane.procs[name], d / f"{name}.log", 120)
    for op in operators:
        port = ports[op]
        log = d / f"{op}-manager.log"
        kapi._wait(
            f"{op}-manager", lambda p=port: _port_open(p), plane.procs[f"{op}-manager"], log, 120
        )
        cp.apply(operator_webhooks(tools, op, port, cp.ca))
    for i in range(GPU_NODES):
        plane.add_node(f"gpu-{i}", gpus=GPUS_PER_NODE, labels=GPU_LABELS, taints=[GPU_TAINT])
    for i in range(CPU_NODES):
        plane.add_node(f"cpu-{i}")
