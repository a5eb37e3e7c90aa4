"""The policy fields (``runtimeClassName`` too, issue 50) through a real API server: a JobSet, a RayCluster and a Deployment
created with the webhook registered as ``manifests --url --policy`` prints it are stored with
``schedulerName``, the label, the annotation, ``priorityClassName``, ``nodeSelector`` and both
tolerations in every pod template; a toleration the object already has is not repeated; and a
Knative Service keeps out the four fields its definition says Knative refuses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kapi
import pytest
from hooks import Webhook, catalog_sample, create_and_read, dry_run, registered

POLICY = """\
rules:
- name: gpu
  schedulerName: kai-scheduler
  labels: {kai.scheduler/queue: research}
  annotations: {example.com/owner: "$(workload.name)"}
  priorityClassName: e2e-train
  runtimeClassName: e2e-runc
  nodeSelector: {nvidia.com/gpu.present: "true"}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
  - {key: team, value: "$(workload.namespace)", effect: NoExecute, tolerationSeconds: 60}
"""
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _team(namespace: str) -> dict[str, Any]:
    return {
        "key": "team", "value": namespace, "effect": "NoExecute",
        "tolerationSeconds": 60,
    }  # fmt: skip


@pytest.fixture(scope="module")
def hook(
    plane: kapi.ControlPlane,
    workload_crds: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    with registered(
        plane,
        tmp_path_factory.mktemp("serve-fields"),
        POLICY,
        "the mutating webhook stamps a dry-run Deployment",
        lambda probe: _dry_run_priority(plane, probe) == "e2e-train",
    ) as served:
        yield served


def _dry_run_priority(plane: kapi.ControlPlane, namespace: str) -> str | None:
    body = catalog_sample("apps-deployment-v1", None, namespace)
    out = dry_run(plane, f"/apis/apps/v1/namespaces/{namespace}/deployments", body)
    priority = out["spec"]["template"]["spec"].get("priorityClassName") if out else None
    return str(priority) if priority else None


def _six(template: dict[str, Any], name: str, namespace: str) -> None:
    spec = template["spec"]
    assert spec["schedulerName"] == "kai-scheduler"
    assert spec["priorityClassName"] == "e2e-train"
    assert spec["runtimeClassName"] == "e2e-runc"  # the seventh field (issue 50), implied
    assert spec["nodeSelector"]["nvidia.com/gpu.present"] == "true"
    assert spec["tolerations"].count(GPU) == 1
    assert spec["tolerations"].count(_team(namespace)) == 1
    assert template["metadata"]["labels"]["kai.scheduler/queue"] == "research"
    assert template["metadata"]["annotations"]["example.com/owner"] == name


CASES = [
    (
        "jobset.x-k8s.io-jobset-v1alpha2",
        "leader-workers.yaml",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
        lambda o: [rj["template"]["spec"]["template"] for rj in o["spec"]["replicatedJobs"]],
    ),
    (
        "ray.io-raycluster-v1",
        "gpu-workers.yaml",
        "/apis/ray.io/v1/namespaces/{ns}/rayclusters",
        lambda o: (
            [o["spec"]["headGroupSpec"]["template"]]
            + [g["template"] for g in o["spec"]["workerGroupSpecs"]]
        ),
    ),
    (
        "apps-deployment-v1",
        None,
        "/apis/apps/v1/namespaces/{ns}/deployments",
        lambda o: [o["spec"]["template"]],
    ),
]


@pytest.mark.parametrize(
    ("stem", "name", "collection", "templates"), CASES, ids=[c[0] for c in CASES]
)
def test_the_six_fields_are_stored_in_every_template(
    plane: kapi.ControlPlane,
    hook: Webhook,
    ns: str,
    stem: str,
    name: str | None,
    collection: str,
    templates: Any,
) -> None:
    body = catalog_sample(stem, name, ns)
    stored = create_and_read(plane, collection.format(ns=ns), body)
    found = templates(stored)
    assert len(found) >= 1
    for t in found:
        _six(t, stored["metadata"]["name"], ns)


def test_a_toleration_already_there_is_not_repeated(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = catalog_sample("apps-deployment-v1", None, ns)
    body["spec"]["template"]["spec"]["tolerations"] = [GPU]
    body["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.present": "false"}
    stored = create_and_read(plane, f"/apis/apps/v1/namespaces/{ns}/deployments", body)
    spec = stored["spec"]["template"]["spec"]
    assert spec["tolerations"] == [GPU, _team(ns)]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "false"}  # kept: no overwrite


def test_a_knative_service_keeps_out_what_its_definition_says_knative_refuses(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = catalog_sample("serving.knative.dev-service-v1", None, ns)
    stored = create_and_read(plane, f"/apis/serving.knative.dev/v1/namespaces/{ns}/services", body)
    spec = stored["spec"]["template"]["spec"]
    assert spec["schedulerName"] == "kai-scheduler"
    assert not {"nodeSelector", "tolerations", "priorityClassName", "runtimeClassName"} & set(spec)
