"""Every catalog definition against every sample of its kind, checked against hand counts.

``tests/catalog_expected/<stem>.yaml`` says, per sample, where the policy's label, annotation
and schedulerName must land (JSON Pointers written by hand from each workload's API), the GPU
total, the replicas of every instance and the status category. The test mutates each sample
with the real engine, applies the patch with ``jsonpatch`` and checks the result, so a
definition that misses a template, invents one, or miscounts fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from helpers import ENGINE

from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.karta.loading import catalog_dir, load_files
from webhook.karta.model import parse
from webhook.karta.samples import SampleIndex
from webhook.mutation.plan import plan
from webhook.mutation.policyfile import parse_policy
from webhook.validation.check import check
from webhook.workload.locator import resolve

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).resolve().parents[1] / "catalog_expected"
LABEL, LABEL_VALUE = "example.com/team", "ml"
ANNOTATION, ANNOTATION_VALUE = "example.com/cost-center", "42"
SCHEDULER = "kai-scheduler"
POLICY = parse_policy(
    {
        "rules": [
            {
                "name": "all",
                "schedulerName": SCHEDULER,
                "labels": {LABEL: LABEL_VALUE},
                "annotations": {ANNOTATION: ANNOTATION_VALUE},
            }
        ]
    }
)


def _definitions() -> dict[str, Any]:
    return {Path(k.source.split("#")[0]).stem: k for k in load_files([catalog_dir()])}


DEFINITIONS = _definitions()


def _cases() -> list[Any]:
    cases = []
    for stem, karta in sorted(DEFINITIONS.items()):
        expected_file = EXPECTED / f"{stem}.yaml"
        expected = yaml.safe_load(expected_file.read_text()) if expected_file.exists() else {}
        for sample in sorted((catalog_dir() / "samples" / stem).glob("*.yaml")):
            want = expected.get(sample.name)
            # An expectation that needs an engine rule not there yet says so with
            # `pending: <reason>`; it must fail until the rule lands (strict).
            pending = want.get("pending") if isinstance(want, dict) else None
            marks = [pytest.mark.xfail(strict=True, reason=pending)] if pending else []
            cases.append(pytest.param(karta, sample, want, id=f"{stem}/{sample.name}", marks=marks))
    return cases


def _resolve_pointer(doc: Any, pointer: str) -> Any:
    return jsonpatch.JsonPointer(pointer).resolve(doc)


def _holders(doc: Any, key: str, value: str, path: str = "") -> set[str]:
    """Pointers of every map in ``doc`` that holds ``key: value``."""
    found: set[str] = set()
    if isinstance(doc, dict):
        if doc.get(key) == value:
            found.add(path)
        for k, v in doc.items():
            found |= _holders(
                v, key, value, f"{path}/{str(k).replace('~', '~0').replace('/', '~1')}"
            )
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found |= _holders(v, key, value, f"{path}/{i}")
    return found


def test_every_definition_has_samples_and_expectations() -> None:
    assert len(DEFINITIONS) >= 19
    for stem in DEFINITIONS:
        assert list((catalog_dir() / "samples" / stem).glob("*.yaml")), f"no samples for {stem}"
        assert (EXPECTED / f"{stem}.yaml").exists(), f"no expectations for {stem}"


def test_catalog_file_names_follow_group_kind_version() -> None:
    for stem, karta in DEFINITIONS.items():
        g = karta.gvk
        assert g is not None
        assert stem == f"{g.group or 'core'}-{g.kind}-{g.version}".lower()


@pytest.mark.parametrize(("karta", "sample", "expected"), _cases())
def test_sample_resolves_and_mutates_as_counted_by_hand(
    karta: Any, sample: Path, expected: Any
) -> None:
    assert expected is not None, f"no expectation written for {sample.name}"
    [(_, obj)] = read_documents(sample)
    assert GVK.of(obj) == karta.gvk

    full = resolve(karta, obj, ENGINE)
    assert full.gpus == expected["gpus"]
    assert full.status == expected["status"]
    got_components = {c.name: {i.id: i.replicas for i in c.instances} for c in full.components}
    assert got_components == expected["components"]

    result = plan(resolve(karta, obj, ENGINE, full=False), POLICY, obj)
    mutated = jsonpatch.apply_patch(obj, result.ops)
    assert _holders(mutated, LABEL, LABEL_VALUE) == set(expected["labels"])
    assert _holders(mutated, ANNOTATION, ANNOTATION_VALUE) == set(expected["annotations"])
    scheduler_fields = {p + "/schedulerName" for p in _holders(mutated, "schedulerName", SCHEDULER)}
    assert scheduler_fields == set(expected["schedulerName"])
    for pointer in expected["labels"]:
        assert _resolve_pointer(mutated, pointer)[LABEL] == LABEL_VALUE

    # Idempotent: the mutated object needs nothing more.
    again = plan(resolve(karta, mutated, ENGINE, full=False), POLICY, mutated)
    assert again.ops == []


# --------------------------------------------------------------------------- samples as stored

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upstream-defects"


def _sample_index() -> SampleIndex:
    return SampleIndex.load([catalog_dir() / "samples"])


def _check(doc: Any, source: str) -> Any:
    gvk = parse(doc, source).gvk
    assert gvk is not None
    return check(doc, _sample_index().for_gvk(gvk), ENGINE, source=source)


def test_sound_definition_relying_on_api_server_defaults_is_admitted() -> None:
    """`replicas` of a replicated job is left to its CRD default (1): the stored samples carry it,
    so a count that uses it without `// 1` runs on every sample (the unset parallelism still
    needs its `// 1`: nothing defaults it in a stored JobSet)."""
    doc = yaml.safe_load((catalog_dir() / "jobset.x-k8s.io-jobset-v1alpha2.yaml").read_text())
    child = doc["spec"]["structureDefinition"]["childComponents"][0]
    child["scaleDefinition"] = {
        "replicasPath": ".spec.replicatedJobs[] | .replicas * (.template.spec.parallelism // 1)"
    }
    report = _check(doc, "defaults.yaml")
    assert report.ok, [str(e) for e in report.errors]
    assert report.samples >= 3
    for sample in (catalog_dir() / "samples" / "jobset.x-k8s.io-jobset-v1alpha2").glob("*.yaml"):
        [(_, obj)] = read_documents(sample)
        assert all(isinstance(j.get("replicas"), int) for j in obj["spec"]["replicatedJobs"])


def _fixture_cases(expect: str) -> list[Any]:
    cases = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        head = dict(
            line[2:].split(": ", 1)
            for line in path.read_text().splitlines()
            if line.startswith("# ")
            and ": " in line
            and line[2:].split(":")[0] in ("expect", "field", "message")
        )
        if head["expect"].startswith(expect):
            cases.append(pytest.param(path, head["field"], head["message"], id=path.stem))
    return cases


@pytest.mark.parametrize(("path", "field", "message"), _fixture_cases("refused"))
def test_upstream_defect_is_refused_at_its_field(path: Path, field: str, message: str) -> None:
    [(source, doc)] = read_documents(path)
    report = _check(doc, source)
    assert not report.ok
    assert any(e.path == field and message in e.message for e in report.errors), [
        str(e) for e in report.errors
    ]


@pytest.mark.parametrize(("path", "field", "message"), _fixture_cases("warning"))
def test_upstream_strictness_is_a_warning(path: Path, field: str, message: str) -> None:
    [(source, doc)] = read_documents(path)
    report = _check(doc, source)
    assert report.ok, [str(e) for e in report.errors]
    assert any(field in w and message in w for w in report.warnings), report.warnings
