"""``describe KIND/NAME`` and ``describe KIND`` against the real kube-apiserver: the seed
scenario of the live describe. A JobSet with one leader and two workers of four GPUs each, its
pods made by hand (no controllers run) — the leader's under a Job the JobSet owns, the workers'
owned by the JobSet itself — with their Ready condition and node set through ``pods/status``,
and the JobSet's status set through its status subresource as the JobSet definition's status
mapping reads it."""

from __future__ import annotations

import json
from typing import Any

import kapi
import pytest
import yaml

from webhook.cli import main as cli

SAMPLE = kapi.ROOT / "catalog/samples/jobset.x-k8s.io-jobset-v1alpha2/leader-workers.yaml"
MERGE = "application/merge-patch+json"


def describe(
    plane: kapi.ControlPlane, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["describe", *argv, "--kubeconfig", str(plane.kubeconfig)])
    out = capsys.readouterr()
    return code, out.out, out.err


def owner(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
    }


def make_pod(
    plane: kapi.ControlPlane, ns: str, name: str, job: str, own: dict[str, Any], node: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": job},
            "ownerReferences": [own],
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "busybox"}],
        },
    }
    status, body = plane.request("POST", f"/api/v1/namespaces/{ns}/pods", pod)
    assert status == 201, body
    ready = {
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    }
    status, body = plane.request(
        "PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", ready, content_type=MERGE
    )
    assert status == 200, body


def test_describe_jobset_live(
    plane: kapi.ControlPlane,
    ns: str,
    workload_crds: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["metadata"]["namespace"] = ns
    plane.apply([doc])
    base = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/trainer"

    # no pods yet, no status: the tree and the resources come from the spec alone
    code, out, err = describe(plane, capsys, "jobset/trainer", "-n", ns)
    assert code == 0, err
    # Another test may have applied the bundled definitions as Kartas: the cluster's then wins.
    status, _ = plane.request("GET", "/apis/run.ai/v1alpha1/kartas/jobset-x-k8s-io-jobset-v1alpha2")
    origin = "cluster" if status == 200 else "catalog"
    assert f"Definition:  jobset-x-k8s-io-jobset-v1alpha2 ({origin})" in out
    assert "JobSet/trainer: 0/0 ready, 12 GPUs" in out
    assert "leader: replicas 1, 0/0 ready, 4 GPUs" in out
    assert "workers: replicas 2, 0/0 ready, 8 GPUs" in out
    assert "Phase: Undefined" in out
    totals = [line.split() for line in out.splitlines() if line.startswith("TOTAL")]
    assert totals == [["TOTAL", "3", "12", "0", "0"]]
    # the one gang its definition gives (leader and workers), before any PodGroup exists
    assert "minCount 3; no PodGroup" in out

    status, js = plane.request("GET", base)
    assert status == 200, js
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "trainer-leader-0", "ownerReferences": [owner(js)]},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "trainer", "image": "busybox"}],
                }
            }
        },
    }
    status, job = plane.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job)
    assert status == 201, job
    make_pod(plane, ns, "trainer-leader-0-0", "leader", owner(job), "node-a")
    make_pod(plane, ns, "trainer-workers-0-0", "workers", owner(js), "node-b")
    make_pod(plane, ns, "trainer-workers-0-1", "workers", owner(js), "node-c")
    counts = {"ready": 1, "succeeded": 0, "failed": 0, "suspended": 0}
    js_status = {
        "status": {
            "replicatedJobsStatus": [
                {"name": "leader", "active": 1, **counts},
                {"name": "workers", "active": 1, **counts},
            ]
        }
    }
    status, body = plane.request("PATCH", f"{base}/status", js_status, content_type=MERGE)
    assert status == 200, body

    code, out, err = describe(plane, capsys, "jobset/trainer", "-n", ns)
    assert code == 0, err
    assert f"  Namespace:   {ns}" in out
    assert "JobSet/trainer: 3/3 ready, nodes node-a, node-b, node-c, 12 GPUs" in out
    assert "leader: replicas 1, 1/1 ready, nodes node-a, 4 GPUs" in out
    assert "workers: replicas 2, 2/2 ready, nodes node-b, node-c, 8 GPUs" in out
    assert "Phase: Running\n" in out

    code, out, err = describe(plane, capsys, "JobSets/trainer", "-n", ns, "-o", "json")
    assert code == 0, err
    v = json.loads(out)
    assert (v["phase"], v["gpus"], v["pods"]["ready"], v["pods"]["total"]) == (
        "Running",
        12,
        3,
        3,
    )
    [_, rj] = v["components"]
    assert {i["id"]: i["replicas"] for i in rj["instances"]} == {"leader": 1, "workers": 2}

    # every JobSet of the namespace, one line each
    code, out, err = describe(plane, capsys, "jobsets", "-n", ns)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["NAME", "PHASE", "READY", "GPUS", "AGE"]
    assert rows[1][:4] == ["trainer", "Running", "3/3", "12"]
    code, out, err = describe(plane, capsys, "jobset.jobset.x-k8s.io", "-A", "-o", "json")
    assert code == 0, err
    assert any(i["namespace"] == ns and i["name"] == "trainer" for i in json.loads(out)["items"])

    # a missing object, an unknown kind, a kind without a definition
    code, out, err = describe(plane, capsys, "jobset/missing", "-n", ns)
    assert (code, out) == (1, "")
    assert err.strip() == (
        f'karta-webhook: JobSet "missing" not found in namespace "{ns}" (jobsets.jobset.x-k8s.io)'
    )
    code, out, err = describe(plane, capsys, "nosuchkind/x", "-n", ns)
    assert (code, out) == (2, "")
    assert err.strip() == 'karta-webhook: the server doesn\'t have a resource type "nosuchkind"'
    code, out, err = describe(plane, capsys, "cm/x", "-n", ns)
    assert (code, out) == (1, "")
    assert err.strip() == (
        "karta-webhook: no definition for /v1 ConfigMap (no Karta in the catalog or the cluster)"
    )
