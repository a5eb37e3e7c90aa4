"""Fragmented kinds through a real API server (issue 35 item 2, issue 34 item 1): a Grove
PodCliqueSet, a KServe InferenceService and LLMInferenceService created with the webhook
registered as ``manifests --url --policy`` prints it are stored, with their projects' own CRDs
(hack/workload-crds.txt), with the seven policy fields applied (runtimeClassName, issue 50, where the others are): ``nodeSelector`` and
``tolerations`` at the pod spec the definition's fragment paths imply (a clique's
``spec.podSpec``, the predictor), and a holder missing inside an instance that exists (the
LLMInferenceService router scheduler's ``template``) created, which the CRD accepts."""

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
    with registered(
        plane,
        tmp_path_factory.mktemp("serve-fragments"),
        POLICY,
        "the mutating webhook stamps a dry-run PodCliqueSet",
        lambda probe: _dry_run_tolerations(plane, probe) == [GPU],
    ) as served:
        yield served


def _dry_run_tolerations(plane: kapi.ControlPlane, namespace: str) -> Any:
    body = catalog_sample("grove.io-podcliqueset-v1alpha1", "simple-available.yaml", namespace)
    out = dry_run(plane, f"/apis/grove.io/v1alpha1/namespaces/{namespace}/podcliquesets", body)
    return (
        out["spec"]["template"]["cliques"][0]["spec"]["podSpec"].get("tolerations") if out else None
    )


def _pod_spec_fields(spec: dict[str, Any]) -> None:
    assert spec["schedulerName"] == "kai-scheduler"
    assert spec["nodeSelector"]["nvidia.com/gpu.present"] == "true"
    assert spec["tolerations"].count(GPU) == 1
    assert spec["priorityClassName"] == "e2e-train"
    assert spec["runtimeClassName"] == "e2e-runc"  # the seventh field (issue 50), implied


def test_a_grove_podcliqueset_is_stored_with_the_six_fields_in_every_clique(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = catalog_sample("grove.io-podcliqueset-v1alpha1", "disaggregated.yaml", ns)
    for clique in body["spec"]["template"]["cliques"]:  # the sample's own class would be kept
        clique["spec"]["podSpec"].pop("priorityClassName", None)
    stored = create_and_read(plane, f"/apis/grove.io/v1alpha1/namespaces/{ns}/podcliquesets", body)
    cliques = stored["spec"]["template"]["cliques"]
    assert len(cliques) >= 2
    for clique in cliques:
        _pod_spec_fields(clique["spec"]["podSpec"])
        assert clique["labels"]["kai.scheduler/queue"] == "research"
        assert clique["annotations"]["example.com/owner"] == stored["metadata"]["name"]


def test_a_kserve_inference_service_is_stored_with_the_six_fields_in_its_predictor(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = catalog_sample("serving.kserve.io-inferenceservice-v1beta1", "predictor-only.yaml", ns)
    collection = f"/apis/serving.kserve.io/v1beta1/namespaces/{ns}/inferenceservices"
    stored = create_and_read(plane, collection, body)
    predictor = stored["spec"]["predictor"]
    _pod_spec_fields(predictor)
    assert predictor["labels"]["kai.scheduler/queue"] == "research"
    assert predictor["annotations"]["example.com/owner"] == stored["metadata"]["name"]
    assert "transformer" not in stored["spec"] and "explainer" not in stored["spec"]


def test_an_llm_inference_service_gets_its_router_scheduler_template_made(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = catalog_sample(
        "serving.kserve.io-llminferenceservice-v1alpha1", "single-node-gpu.yaml", ns
    )
    assert body["spec"]["router"]["scheduler"] == {}
    collection = f"/apis/serving.kserve.io/v1alpha1/namespaces/{ns}/llminferenceservices"
    stored = create_and_read(plane, collection, body)
    _pod_spec_fields(stored["spec"]["template"])
    # made inside the scheduler instance, which exists; its priorityClassName has no path of
    # its own in the definition and goes to the implied pod spec
    _pod_spec_fields(stored["spec"]["router"]["scheduler"]["template"])
    assert "worker" not in stored["spec"] and "prefill" not in stored["spec"]
