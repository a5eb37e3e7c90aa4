"""Workloads and helpers for the scheduling-plane tests (``schedplane.py``): one small object of
each controller-made kind (Job, CronJob, Deployment, StatefulSet, DaemonSet, JobSet,
LeaderWorkerSet), how many pods its controller makes, and a module-scoped karta-webhook
registered on a plane's API server with a policy file whose rules match namespaces by prefix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hooks import Webhook, mutated_by_webhook, registered
from schedplane import SchedulingPlane

PROBE_SCHEDULER = "karta-e2e-probe"
#: A rule every module's policy ends with: the probe namespaces the readiness check uses.
PROBE_RULE = f"""\
- name: probe
  match: {{namespaces: ["probe-*"]}}
  schedulerName: {PROBE_SCHEDULER}
"""
CLASSES = {"karta-e2e-high": 100000, "karta-e2e-low": 1000}


@contextmanager
def serving(sp: SchedulingPlane, d: Path, policy: str) -> Iterator[Webhook]:
    """karta-webhook ``serve`` with ``policy`` (plus :data:`PROBE_RULE`) registered on the
    plane's API server (``failurePolicy: Fail``) until a probe namespace's pods are mutated."""
    ensure_priority_classes(sp)
    with registered(
        sp.cp, d, policy + PROBE_RULE, "karta-webhook registered on the scheduling plane",
        lambda ns: mutated_by_webhook(sp.cp, ns, PROBE_SCHEDULER),
    ) as hook:  # fmt: skip
        yield hook


def ensure_priority_classes(sp: SchedulingPlane) -> None:
    """``karta-e2e-high`` and ``karta-e2e-low``, never preempting (a bound pod on a node with
    no kubelet would never go away), so a pending queue is ordered by priority alone."""
    for name, value in CLASSES.items():
        body = {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "preemptionPolicy": "Never",
        }  # fmt: skip
        status, out = sp.cp.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
        assert status in (201, 409), out


def pod_spec(**extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "busybox", "command": ["true"]}], **extra}


def template(app: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}}, "spec": pod_spec(**spec)}


def workload(kind: str, name: str, ns: str, **spec: Any) -> tuple[str, dict[str, Any], int]:
    """``(collection path, object, pods its controller makes)`` for ``kind``; ``spec`` goes
    into every pod template's spec."""
    meta = {"name": name, "namespace": ns}
    t = template(name, **spec)
    sel = {"matchLabels": {"app": name}}
    if kind == "Job":
        job = {
            "parallelism": 2,
            "completions": 2,
            "template": {**t, "spec": {**t["spec"], "restartPolicy": "Never"}},
        }
        return (
            f"/apis/batch/v1/namespaces/{ns}/jobs",
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job},
            2,
        )
    if kind == "CronJob":
        job = {"parallelism": 1, "template": {**t, "spec": {**t["spec"], "restartPolicy": "Never"}}}
        body = {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": job}}
        return (
            f"/apis/batch/v1/namespaces/{ns}/cronjobs",
            {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta, "spec": body},
            1,
        )
    if kind in ("Deployment", "StatefulSet", "DaemonSet"):
        body: dict[str, Any] = {"selector": sel, "template": t}
        if kind != "DaemonSet":
            body["replicas"] = 2
        if kind == "StatefulSet":  # all at once: no kubelet makes a pod Ready for the next
            body |= {"serviceName": name, "podManagementPolicy": "Parallel"}
        plural = kind.lower() + "s"
        return (
            f"/apis/apps/v1/namespaces/{ns}/{plural}",
            {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": body},
            2,
        )
    if kind == "JobSet":

        def rjob(rname: str, replicas: int) -> dict[str, Any]:
            tt = {**t, "spec": {**t["spec"], "restartPolicy": "Never"}}
            return {
                "name": rname,
                "replicas": replicas,
                "template": {
                    "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": tt}
                },
            }

        body = {"replicatedJobs": [rjob("leader", 1), rjob("workers", 2)]}
        return (
            f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": meta,
                "spec": body,
            },
            3,
        )
    if kind == "LeaderWorkerSet":
        body = {
            "replicas": 1,
            "leaderWorkerTemplate": {"size": 2, "leaderTemplate": t, "workerTemplate": t},
        }
        return (
            f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets",
            {
                "apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet",
                "metadata": meta,
                "spec": body,
            },
            2,
        )
    raise ValueError(kind)


KINDS = ("Job", "CronJob", "Deployment", "StatefulSet", "DaemonSet", "JobSet", "LeaderWorkerSet")


def create(sp: SchedulingPlane, kind: str, name: str, ns: str, **spec: Any) -> int:
    """Create the workload (for a CronJob, and a run of it as ``kubectl create job --from``
    makes one); how many pods its controller will make (a DaemonSet: one a node it fits)."""
    path, body, count = workload(kind, name, ns, **spec)
    status, out = sp.cp.request("POST", path, body)
    assert status == 201, out
    if kind == "CronJob":
        sp.cp.kubectl("create", "job", f"{name}-run", f"--from=cronjob/{name}", "-n", ns)
    return count


def shape(pod: dict[str, Any], ns: str, drop: tuple[str, ...]) -> Any:
    """The pod's spec without ``drop`` fields and with its namespace's name made ``NS``."""
    spec = {k: v for k, v in pod["spec"].items() if k not in drop}
    return json.loads(json.dumps(spec, sort_keys=True).replace(ns, "NS"))
