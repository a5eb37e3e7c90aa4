"""What the server tests share: the sample objects, a policy, and AdmissionReviews as the API
server builds them, so the in-process app tests and the end-to-end tests speak the same requests.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from webhook.admission.handlers import mutate_object
from webhook.admission.registry import load_registry
from webhook.base.documents import read_documents
from webhook.jq.engine import Engine
from webhook.karta.loading import catalog_dir
from webhook.mutation.policy import Policy
from webhook.mutation.policyfile import parse_policy

ROOT = Path(__file__).resolve().parent.parent
JOBSET = ROOT / "catalog/samples/jobset.x-k8s.io-jobset-v1alpha2/leader-workers.yaml"
JOBSET_KARTA = ROOT / "catalog/jobset.x-k8s.io-jobset-v1alpha2.yaml"

#: One jq engine for the whole test session (its sandbox children are reused).
ENGINE = Engine()
#: The bundled catalog and its samples.
REGISTRY = load_registry()
SAMPLES = catalog_dir() / "samples"
JOBSET_SAMPLE = ("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml")


def sample(stem: str, name: str) -> dict[str, Any]:
    """A bundled sample object, by its kind's directory and file name."""
    [(_, obj)] = read_documents(SAMPLES / stem / name)
    assert isinstance(obj, dict)
    return obj


def policy(**rule: Any) -> Policy:
    """A policy of one rule named ``r``."""
    return parse_policy({"rules": [{"name": "r", **rule}]})


def apply(obj: dict[str, Any], pol: Policy) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``obj`` mutated by ``pol`` through the bundled catalog, and the patch."""
    m = mutate_object(REGISTRY, pol, obj, ENGINE)
    assert m is not None
    return jsonpatch.apply_patch(obj, m.ops), m.ops


POLICY = """\
rules:
- name: kai
  schedulerName: kai-scheduler
  labels: {kai.scheduler/queue: research}
  annotations: {example.com/owner: "$(workload.name)"}
"""


def review(obj: Any, operation: str = "CREATE", *, resource: str = "jobsets") -> dict[str, Any]:
    """An AdmissionReview as the API server builds it (``oldObject`` on UPDATE and DELETE,
    no ``object`` on DELETE). ``obj`` may be anything, to build malformed requests too."""
    api_version = obj.get("apiVersion", "v1") if isinstance(obj, dict) else "v1"
    group, _, version = api_version.rpartition("/")
    kind = {"group": group, "version": version, "kind": obj.get("kind", "")}
    res = {"group": group, "version": version, "resource": resource}
    meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": res,
            "requestKind": kind,
            "requestResource": res,
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": obj if operation != "DELETE" else None,
            "oldObject": obj if operation in ("UPDATE", "DELETE") else None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def patch_of(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON Patch of an AdmissionReview response, [] when it has none."""
    if "patch" not in r:
        return []
    assert r["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(r["patch"]))


def broken_karta() -> dict[str, Any]:
    """The JobSet Karta with a child owned by a missing component and a misspelt path."""
    k = load(JOBSET_KARTA)
    k["metadata"]["name"] = "broken"
    children = k["spec"]["structureDefinition"]["childComponents"]
    children[0]["specDefinition"]["podTemplateSpecPath"] = (
        ".spec.replicatedJob[].template.spec.template"
    )
    children.append(
        {
            "name": "orphan",
            "ownerRef": "nope",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "specDefinition": {"podTemplateSpecPath": ".spec.replicatedJobs[].template"},
        }
    )
    return k


def assert_denied_with_field_paths(r: dict[str, Any]) -> None:
    """What the API server must get back for :func:`broken_karta`: a 422 naming each field."""
    assert r["allowed"] is False
    assert r["status"]["code"] == 422 and r["status"]["reason"] == "Invalid"
    msg = r["status"]["message"]
    assert msg.startswith('Karta "broken" is invalid: ')
    assert "spec.structureDefinition.childComponents[1].ownerRef: " in msg
    assert "spec.structureDefinition.childComponents[0].specDefinition.podTemplateSpecPath: " in msg
    assert "; " in msg


#: A Karta for the made-up kind of ``tests/crds/outside-catalog`` (training.example.com/v1
#: Trainer: groups of workers, each with a pod template), as a user would write it.
TRAINER_KARTA_YAML = """\
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: example-trainer}
spec:
  structureDefinition:
    rootComponent:
      name: trainer
      kind: {group: training.example.com, version: v1, kind: Trainer}
      specDefinition:
        podTemplateSpecPath: .spec.groups[].template
      statusDefinition:
        statusMappings:
          running:
          - byExpression: {expression: '.status.phase == "Running"', expectedResult: "true"}
"""
