"""Fragmented kinds through a real API server (issue 35 item 2, issue 34 item 1): a Grove
PodCliqueSet, a KServe InferenceService and LLMInferenceService created with the webhook
registered as ``manifests --url --policy`` prints it are stored, with their projects' own CRDs
(hack/workload-crds.txt), with the six policy fields applied: ``nodeSelector`` and
``tolerations`` at the pod spec the definition's fragment paths imply (a clique's
``spec.podSpec``, the predictor), and a holder missing inside an instance that exists (the
LLMInferenceService router scheduler's ``template``) created, which the CRD accepts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import kapi
import pytest
import yaml
from hooks import Webhook, configurations, register, start_webhook, unregister, wait_until

SAMPLES = kapi.ROOT / "catalog" / "samples"
POLICY = """\
rules:
- name: gpu
  schedulerName: kai-scheduler
  labels: {kai.scheduler/queue: research}
  annotations: {example.com/owner: "$(workload.name)"}
  priorityClassName: e2e-train
  nodeSelector: {nvidia.com/gpu.present: "true"}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
"""
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def hook(
    plane: kapi.ControlPlane,
    workload_crds: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    assert "podcliquesets.grove.io" in workload_crds
    assert "inferenceservices.serving.kserve.io" in workload_crds
    served = start_webhook(tmp_path_factory.mktemp("serve-fragments"), POLICY, ["--no-kube"])
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    plane.kubectl("create", "namespace", probe)
    try:
        register(plane, configurations(served, policy=served.policy, failure_policy="Fail"))
        wait_until(
            "the mutating webhook stamps a dry-run PodCliqueSet",
            lambda: _dry_run_tolerations(plane, probe) == [GPU],
        )
        yield served
    finally:
        unregister(plane)
        served.stop()


def _dry_run_tolerations(plane: kapi.ControlPlane, namespace: str) -> Any:
    body = _sample("grove.io-podcliqueset-v1alpha1", "simple-available.yaml", namespace)
    status, out = plane.request(
        "POST", f"/apis/grove.io/v1alpha1/namespaces/{namespace}/podcliquesets?dryRun=All", body
    )
    if status != 201:
        return None
    return out["spec"]["template"]["cliques"][0]["spec"]["podSpec"].get("tolerations")


def _sample(stem: str, name: str, namespace: str) -> dict[str, Any]:
    doc = yaml.safe_load((SAMPLES / stem / name).read_text())
    doc.pop("status", None)
    doc["metadata"] = {"name": doc["metadata"]["name"], "namespace": namespace}
    return dict(doc)


def _create(plane: kapi.ControlPlane, collection: str, body: dict[str, Any]) -> dict[str, Any]:
    status, created = plane.request("POST", collection, body)
    assert status == 201, created
    status, stored = plane.request("GET", f"{collection}/{created['metadata']['name']}")
    assert status == 200, stored
    return dict(stored)


def _pod_spec_fields(spec: dict[str, Any]) -> None:
    assert spec["schedulerName"] == "kai-scheduler"
    assert spec["nodeSelector"]["nvidia.com/gpu.present"] == "true"
    assert spec["tolerations"].count(GPU) == 1
    assert spec["priorityClassName"] == "e2e-train"


def test_a_grove_podcliqueset_is_stored_with_the_six_fields_in_every_clique(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = _sample("grove.io-podcliqueset-v1alpha1", "disaggregated.yaml", ns)
    for clique in body["spec"]["template"]["cliques"]:  # the sample's own class would be kept
        clique["spec"]["podSpec"].pop("priorityClassName", None)
    stored = _create(plane, f"/apis/grove.io/v1alpha1/namespaces/{ns}/podcliquesets", body)
    cliques = stored["spec"]["template"]["cliques"]
    assert len(cliques) >= 2
    for clique in cliques:
        _pod_spec_fields(clique["spec"]["podSpec"])
        assert clique["labels"]["kai.scheduler/queue"] == "research"
        assert clique["annotations"]["example.com/owner"] == stored["metadata"]["name"]


def test_a_kserve_inference_service_is_stored_with_the_six_fields_in_its_predictor(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = _sample("serving.kserve.io-inferenceservice-v1beta1", "predictor-only.yaml", ns)
    collection = f"/apis/serving.kserve.io/v1beta1/namespaces/{ns}/inferenceservices"
    stored = _create(plane, collection, body)
    predictor = stored["spec"]["predictor"]
    _pod_spec_fields(predictor)
    assert predictor["labels"]["kai.scheduler/queue"] == "research"
    assert predictor["annotations"]["example.com/owner"] == stored["metadata"]["name"]
    assert "transformer" not in stored["spec"] and "explainer" not in stored["spec"]


def test_an_llm_inference_service_gets_its_router_scheduler_template_made(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = _sample("serving.kserve.io-llminferenceservice-v1alpha1", "single-node-gpu.yaml", ns)
    assert body["spec"]["router"]["scheduler"] == {}
    collection = f"/apis/serving.kserve.io/v1alpha1/namespaces/{ns}/llminferenceservices"
    stored = _create(plane, collection, body)
    _pod_spec_fields(stored["spec"]["template"])
    # made inside the scheduler instance, which exists; its priorityClassName has no path of
    # its own in the definition and goes to the implied pod spec
    _pod_spec_fields(stored["spec"]["router"]["scheduler"]["template"])
    assert "worker" not in stored["spec"] and "prefill" not in stored["spec"]
