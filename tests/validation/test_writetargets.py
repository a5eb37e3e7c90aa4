"""Write targets stated and enforced (issue 25 item 4), one test per rule:

* never an object's metadata.name, namespace, uid, generateName, ownerReferences,
  managedFields, nor its apiVersion, kind or status;
* a ``metadataPath`` is the pod's own metadata: beside its ``podSpecPath`` (same parent) or the
  same node;
* the workload's own labels and annotations only as the root component's fragmented paths, for
  kinds whose operator copies them to the pods (Tekton, Notebook), with a note;
* a last segment absent from every sample: a warning without a schema, an error with one
  ("did you mean ...").
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from helpers import ENGINE
from test_validation import BASE, SAMPLES

from webhook.base.gvk import GVK
from webhook.karta.loading import catalog_dir, samples_dir
from webhook.karta.samples import SampleIndex
from webhook.schema.builtin import builtin_schema
from webhook.validation.check import Report, check

CHILD = "spec.structureDefinition.childComponents[0]"
ROOT = "spec.structureDefinition.rootComponent"
FRAG = "specDefinition.fragmentedPodSpecDefinition"
TEMPLATE = ".spec.replicatedJobs[].template.spec.template"
DEPLOYMENT = GVK("apps", "v1", "Deployment")


def _fragmented(where: str, **paths: str) -> dict[str, Any]:
    """The JobSet definition with a fragmented pod spec at ``where`` (root or child)."""
    d = copy.deepcopy(BASE)
    comp = (
        d["spec"]["structureDefinition"]["rootComponent"]
        if where == ROOT
        else d["spec"]["structureDefinition"]["childComponents"][0]
    )
    comp["specDefinition"] = {"fragmentedPodSpecDefinition": paths}
    return d


def _errors_at(r: Report, path: str) -> list[str]:
    return [e.message for e in r.errors if e.path == path]


@pytest.mark.parametrize(
    ("field", "expr", "named"),
    [
        ("schedulerNamePath", ".metadata.namespace", "metadata.namespace"),
        ("schedulerNamePath", ".metadata.name", "metadata.name"),
        ("schedulerNamePath", ".metadata.uid", "metadata.uid"),
        ("schedulerNamePath", ".metadata.generateName", "metadata.generateName"),
        ("labelsPath", ".metadata.ownerReferences", "metadata.ownerReferences"),
        ("labelsPath", ".metadata.managedFields", "metadata.managedFields"),
        ("schedulerNamePath", ".apiVersion", "apiVersion"),
        ("schedulerNamePath", ".kind", "kind"),
        ("labelsPath", ".status.labels", "status"),
        # of any object, a pod template's included
        ("schedulerNamePath", f"{TEMPLATE}.metadata.name", "metadata.name"),
        ("labelsPath", ".spec.replicatedJobs[].template.status", "status"),
    ],
)
def test_protected_fields_of_any_object_are_never_written(
    field: str, expr: str, named: str
) -> None:
    r = check(_fragmented(ROOT, **{field: expr}), SAMPLES, ENGINE)
    msgs = _errors_at(r, f"{ROOT}.{FRAG}.{field}")
    assert any(f"writes to {named} " in m for m in msgs), r.errors


def test_own_labels_of_a_kind_whose_operator_does_not_copy_them_are_refused() -> None:
    r = check(_fragmented(ROOT, labelsPath=".metadata.labels"), SAMPLES, ENGINE)
    msgs = _errors_at(r, f"{ROOT}.{FRAG}.labelsPath")
    assert any("JobSet's own metadata" in m and "Notebook" in m for m in msgs), r.errors


def _catalog(name: str) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    doc = yaml.safe_load((catalog_dir() / f"{name}.yaml").read_text())
    samples = SampleIndex.load([samples_dir()]).for_definition(doc)
    return doc, samples


@pytest.mark.parametrize("name", ["tekton.dev-taskrun-v1", "kubeflow.org-notebook-v1"])
def test_own_labels_are_admitted_with_a_note_where_the_operator_copies_them(name: str) -> None:
    doc, samples = _catalog(name)
    r = check(doc, samples, ENGINE)
    assert r.ok, r.errors
    assert any("its operator copies them to the pods" in n for n in r.notes), r.notes


def test_own_labels_only_through_the_fragmented_labels_path() -> None:
    doc, samples = _catalog("tekton.dev-taskrun-v1")
    frag = doc["spec"]["structureDefinition"]["rootComponent"]["specDefinition"][
        "fragmentedPodSpecDefinition"
    ]
    frag["schedulerNamePath"] = ".metadata.labels"  # the labels map is no scheduler name
    r = check(doc, samples, ENGINE)
    msgs = _errors_at(r, f"{ROOT}.{FRAG}.schedulerNamePath")
    assert any("TaskRun's own metadata" in m for m in msgs), r.errors


def test_metadata_path_beside_its_pod_spec_is_admitted() -> None:
    d = copy.deepcopy(BASE)
    d["spec"]["structureDefinition"]["childComponents"][0]["specDefinition"] = {
        "podSpecPath": f"{TEMPLATE}.spec",
        "metadataPath": f"{TEMPLATE}.metadata",
    }
    r = check(d, SAMPLES, ENGINE)
    assert r.ok, r.errors


def test_metadata_path_elsewhere_than_its_pod_spec_is_refused() -> None:
    d = copy.deepcopy(BASE)
    d["spec"]["structureDefinition"]["childComponents"][0]["specDefinition"] = {
        "podSpecPath": f"{TEMPLATE}.spec",
        "metadataPath": ".spec.replicatedJobs[].template.metadata",  # the Job's, not the pod's
    }
    for job in (j["template"] for j in SAMPLES[0][1]["spec"]["replicatedJobs"]):
        assert "metadata" not in job  # the sample has none there: the rule, not a lookup
    samples = copy.deepcopy(SAMPLES)
    for job in samples[0][1]["spec"]["replicatedJobs"]:
        job["template"]["metadata"] = {"labels": {"a": "b"}}
    r = check(d, samples, ENGINE)
    msgs = _errors_at(r, f"{CHILD}.specDefinition.metadataPath")
    assert any("is not the pod's own metadata" in m for m in msgs), r.errors


def test_a_misspelt_last_segment_is_a_warning_without_a_schema() -> None:
    r = check(_fragmented(CHILD, labelsPath=f"{TEMPLATE}.metadata.lables"), SAMPLES, ENGINE)
    assert r.ok, r.errors
    where = f"{CHILD}.{FRAG}.labelsPath"
    assert any(
        w.startswith(where)
        and '"lables" is absent from every sample' in w
        and 'did you mean "labels"' in w
        for w in r.warnings
    ), r.warnings


def test_a_misspelt_last_segment_is_an_error_with_a_schema() -> None:
    doc, samples = _catalog("apps-deployment-v1")
    doc["spec"]["structureDefinition"]["rootComponent"]["specDefinition"] = {
        "fragmentedPodSpecDefinition": {"labelsPath": ".spec.template.metadata.lables"}
    }
    r = check(doc, samples, ENGINE, schema=builtin_schema(DEPLOYMENT))
    msgs = _errors_at(r, f"{ROOT}.{FRAG}.labelsPath")
    assert any("did you mean" in m and "labels" in m for m in msgs), r.errors


def test_the_expected_last_segment_may_be_absent() -> None:
    # the webhook creates schedulerName where a template has none: no warning
    r = check(
        _fragmented(CHILD, schedulerNamePath=f"{TEMPLATE}.spec.schedulerName"), SAMPLES, ENGINE
    )
    assert r.ok and not [w for w in r.warnings if "absent from every sample" in w], r
