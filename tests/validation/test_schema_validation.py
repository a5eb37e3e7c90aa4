"""Issue 12's acceptance: definitions of kinds outside the catalog judged by their CRD schema,
samples defaulted from it (or synthesised when there is none), and write locations that
cannot be misdirected.

CRDs are files we wrote: the Volcano Job CRD of the worked example (examples/volcano, real
field names and defaults, trimmed) and a made-up Trainer (tests/crds/outside-catalog) whose
defaults a definition relies on. Built-in kinds use the kubernetes client's models. Every
check runs the real validator with the real jq sandbox.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ENGINE, SAMPLES

from webhook.admission.handlers import validate
from webhook.admission.review import request_for
from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.karta.loading import catalog_dir
from webhook.karta.samples import SampleIndex
from webhook.schema.crds import SchemaIndex, read_crds
from webhook.validation.check import SYNTHESISED, Report

ROOT = Path(__file__).resolve().parents[2]
VOLCANO = ROOT / "examples" / "volcano"
OUTSIDE = ROOT / "tests" / "crds" / "outside-catalog"
CHILD = "spec.structureDefinition.childComponents[0]"
ROOT_C = "spec.structureDefinition.rootComponent"
TEMPLATE = f"{CHILD}.specDefinition.podTemplateSpecPath"
JOB = GVK("batch", "v1", "Job")


def crds(*files: Path) -> SchemaIndex:
    return read_crds([d for f in files for d in read_documents(f)])


def volcano_karta() -> dict[str, Any]:
    doc = yaml.safe_load((VOLCANO / "karta.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def volcano_job() -> dict[str, Any]:
    doc = yaml.safe_load((VOLCANO / "mpi-job.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


VOLCANO_CRDS = crds(VOLCANO / "crd.yaml")
TRAINER_CRDS = crds(OUTSIDE / "training.example.com_trainers.yaml")


def judge(
    doc: dict[str, Any],
    schemas: SchemaIndex | None,
    samples: list[tuple[str, Any]] = (),  # type: ignore[assignment]
    **kw: Any,
) -> Report:
    """``validate`` as the CLI runs it, with ``samples`` as the only samples of the kind."""
    index = SampleIndex(sources=["test"])
    for label, obj in samples:
        index.add(label, obj)
    result = validate(request_for(doc), index, (), ENGINE, schemas=schemas, **kw)
    assert result.report is not None
    assert result.response.allowed == result.report.ok
    return result.report


def errors_at(r: Report, path: str) -> list[str]:
    return [e.message for e in r.errors if e.path == path]


# --------------------------------------------------------------------------- 1. schema checks


def test_typo_path_is_refused_at_its_field_with_the_closest_name() -> None:
    d = volcano_karta()
    child = d["spec"]["structureDefinition"]["childComponents"][0]
    child["specDefinition"]["podTemplateSpecPath"] = ".spec.task[].template"
    r = judge(d, VOLCANO_CRDS)
    assert not r.ok
    [msg] = errors_at(r, TEMPLATE)
    assert '.spec has no field "task"; did you mean "tasks"?' in msg
    assert "(the Job schema)" in msg
    # Without the CRD the same definition is admitted: nothing could tell.
    assert judge(d, None).ok


def test_sound_definition_is_admitted_with_no_sample_at_all() -> None:
    r = judge(volcano_karta(), VOLCANO_CRDS)
    assert r.ok, r.errors
    assert r.samples == 0 and r.synthesised == 1
    assert r.lines()[0] == (
        "OK batch-volcano-sh-job-v1alpha1 (batch.volcano.sh/v1alpha1 Job): no samples found; "
        "checked against a sample synthesised from the schema"
    )
    notes = [ln for ln in r.lines() if ln.startswith("  note: ")]
    assert any("CustomResourceDefinition jobs.batch.volcano.sh" in n for n in notes)
    assert any("synthesised from the schema" in n for n in notes)
    assert not r.warnings, r.warnings


def test_real_samples_are_named_and_used_instead_of_a_synthesised_one() -> None:
    r = judge(volcano_karta(), VOLCANO_CRDS, [("mpi-job.yaml", volcano_job())])
    assert r.ok, r.errors
    assert r.samples == 1 and r.synthesised == 0
    assert r.lines()[0].endswith("checked against 1 sample(s)")
    assert any(
        n.startswith("  note: real sample(s), with the schema's defaults applied: mpi-job.yaml")
        for n in r.lines()
    )


def test_definition_needing_schema_defaults_is_admitted_once_they_apply() -> None:
    """Trainer groups default their name to "main" and replicas to 1: a stored object always
    has both, so a definition may read them bare."""
    karta = {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "trainer"},
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "name": "trainer",
                    "kind": {"group": "training.example.com", "version": "v1", "kind": "Trainer"},
                    "statusDefinition": {
                        "phaseDefinition": {"path": ".status.phase"},
                        "statusMappings": {"running": [{"byPhase": "Running"}]},
                    },
                },
                "childComponents": [
                    {
                        "name": "group",
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "ownerRef": "trainer",
                        "specDefinition": {
                            "podTemplateSpecPath": (
                                ".spec.groups[] | select(.replicas != null and .replicas != 0)"
                                " | .template"
                            )
                        },
                        "instanceIdPath": ".spec.groups[] | select(.replicas > 0) | .name",
                        "scaleDefinition": {"replicasPath": ".spec.groups[] | .replicas"},
                        "podSelector": {
                            "componentInstanceSelector": {"idPath": '.metadata.labels["group"]'}
                        },
                    }
                ],
            }
        },
    }
    sample = {
        "apiVersion": "training.example.com/v1",
        "kind": "Trainer",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {"groups": [{"template": {"spec": {"containers": [{"name": "main"}]}}}]},
    }
    before = judge(karta, None, [("trainer.yaml", sample)])
    assert not before.ok
    assert any("finds nothing" in m for m in errors_at(before, TEMPLATE))
    after = judge(karta, TRAINER_CRDS, [("trainer.yaml", sample)])
    assert after.ok, after.errors
    assert after.samples == 1


def test_cannot_judge_where_the_schema_keeps_unknown_fields_is_a_warning() -> None:
    d = {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "trainer"},
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "name": "trainer",
                    "kind": {"group": "training.example.com", "version": "v1", "kind": "Trainer"},
                    "specDefinition": {"podTemplateSpecPath": ".spec.extensions.template"},
                    "statusDefinition": {"statusMappings": {}},
                }
            }
        },
    }
    r = judge(d, TRAINER_CRDS)
    assert r.ok, r.errors
    assert any(
        w.startswith(f"{ROOT_C}.specDefinition.podTemplateSpecPath: ")
        and "x-kubernetes-preserve-unknown-fields" in w
        and "cannot judge" in w
        for w in r.warnings
    ), r.warnings


def test_paths_must_land_on_the_shape_their_field_needs() -> None:
    d = volcano_karta()
    child = d["spec"]["structureDefinition"]["childComponents"][0]
    child["specDefinition"]["podTemplateSpecPath"] = ".spec.tasks[].template.spec"
    child["instanceIdPath"] = ".spec.tasks[].replicas"
    r = judge(d, VOLCANO_CRDS, [("mpi-job.yaml", volcano_job())])
    assert any(
        "expected a PodTemplateSpec" in m and "found an object with fields" in m
        for m in errors_at(r, TEMPLATE)
    ), r.errors
    ids = errors_at(r, f"{CHILD}.instanceIdPath")
    assert any("expected a string, found an integer" in m for m in ids), ids


def test_non_plain_paths_are_judged_at_the_locations_they_find() -> None:
    d = volcano_karta()
    child = d["spec"]["structureDefinition"]["childComponents"][0]
    child["specDefinition"]["podTemplateSpecPath"] = ".spec.tasks[]?.templat"
    r = judge(d, VOLCANO_CRDS, [("mpi-job.yaml", volcano_job())])
    msgs = errors_at(r, TEMPLATE)
    assert any('.spec.tasks[0].templat: .spec.tasks[0] has no field "templat"' in m for m in msgs)
    assert any('did you mean "template"?' in m for m in msgs)


def test_pod_side_plain_paths_are_judged_against_the_pod_schema() -> None:
    d = volcano_karta()
    child = d["spec"]["structureDefinition"]["childComponents"][0]
    child["podSelector"]["componentInstanceSelector"]["idPath"] = (
        '.metadata.annotation["volcano.sh/task-spec"]'
    )
    r = judge(d, VOLCANO_CRDS)
    [msg] = errors_at(r, f"{CHILD}.podSelector.componentInstanceSelector.idPath")
    assert 'did you mean "annotations"' in msg and "(the Pod schema" in msg


def test_builtin_kinds_are_judged_without_any_crd() -> None:
    d = yaml.safe_load((catalog_dir() / "batch-job-v1.yaml").read_text())
    d["spec"]["structureDefinition"]["rootComponent"]["specDefinition"] = {
        "podTemplateSpecPath": ".spec.templates"
    }
    r = judge(d, None)
    [msg] = errors_at(r, f"{ROOT_C}.specDefinition.podTemplateSpecPath")
    assert 'did you mean "template"?' in msg
    assert any("schema: the built-in batch/v1 Job" in n for n in r.notes)


# --------------------------------------------------------------------------- CRD lookups


def test_a_root_kind_without_crd_in_a_cluster_is_admitted_with_a_warning() -> None:
    r = judge(volcano_karta(), SchemaIndex(), crd_required=True)
    assert r.ok, r.errors
    assert any(
        "no CustomResourceDefinition for batch.volcano.sh/v1alpha1 Job is installed" in w
        for w in r.warnings
    )


def test_a_version_the_crd_does_not_serve_is_an_error_offline_a_warning_in_a_cluster() -> None:
    d = volcano_karta()
    d["spec"]["structureDefinition"]["rootComponent"]["kind"]["version"] = "v1beta1"
    offline = judge(d, VOLCANO_CRDS)
    [msg] = errors_at(offline, f"{ROOT_C}.kind.version")
    assert "does not serve version 'v1beta1'" in msg and "v1alpha1" in msg
    cluster = judge(d, VOLCANO_CRDS, crd_required=True)
    assert cluster.ok and any("does not serve version" in w for w in cluster.warnings)


def test_live_objects_are_checked_like_samples_even_without_apiversion_and_kind() -> None:
    item = volcano_job()
    del item["apiVersion"], item["kind"]  # as items of a LIST come
    item["spec"]["tasks"][0]["name"] = ""  # an id no definition can use
    r = judge(volcano_karta(), VOLCANO_CRDS, live_samples=[("live research/mpi-train", item)])
    assert r.samples == 1
    [msg] = errors_at(r, f"{CHILD}.instanceIdPath")
    assert "must yield non-empty strings" in msg and "live research/mpi-train" in msg


def test_data_findings_on_a_synthesised_sample_are_warnings() -> None:
    d = volcano_karta()
    child = d["spec"]["structureDefinition"]["childComponents"][0]
    # Task names are optional: the synthesised task has none, a real one has.
    child["instanceIdPath"] = ".spec.tasks[] | .name | ascii_downcase"
    r = judge(d, VOLCANO_CRDS)
    assert r.ok, r.errors
    assert any(
        w.startswith(f"{CHILD}.instanceIdPath: fails on sample {SYNTHESISED}") for w in r.warnings
    ), r.warnings
    real = judge(d, VOLCANO_CRDS, [("mpi-job.yaml", volcano_job())])
    assert real.ok and not any("instanceIdPath" in w for w in real.warnings)
    broken = volcano_job()
    broken["spec"]["tasks"][0]["name"] = 7
    assert errors_at(judge(d, VOLCANO_CRDS, [("broken.yaml", broken)]), f"{CHILD}.instanceIdPath")


# --------------------------------------------------------------------------- 4. writes


def job_karta(spec_definition: dict[str, str]) -> dict[str, Any]:
    d = yaml.safe_load((catalog_dir() / "batch-job-v1.yaml").read_text())
    d["metadata"]["name"] = "misdirected"
    d["spec"]["structureDefinition"]["rootComponent"]["specDefinition"] = spec_definition
    return d


def job_samples() -> list[tuple[str, Any]]:
    index = SampleIndex.load([SAMPLES])
    return index.for_gvk(JOB)


@pytest.mark.parametrize("with_samples", [True, False], ids=["samples", "no-sample"])
def test_metadata_path_on_the_job_itself_is_refused(with_samples: bool) -> None:
    d = job_karta({"podSpecPath": ".spec.template.spec", "metadataPath": ".metadata"})
    r = judge(d, None, job_samples() if with_samples else [])
    [msg] = errors_at(r, f"{ROOT_C}.specDefinition.metadataPath")
    assert msg.startswith("writes to the Job's own metadata (/metadata)")


def test_pod_spec_path_on_the_jobs_spec_is_refused() -> None:
    d = job_karta({"podSpecPath": ".spec", "metadataPath": ".spec.template.metadata"})
    r = judge(d, None, job_samples())
    assert any(
        m.startswith("writes to the Job's own spec (/spec)")
        for m in errors_at(r, f"{ROOT_C}.specDefinition.podSpecPath")
    )


@pytest.mark.parametrize("with_samples", [True, False], ids=["samples", "no-sample"])
def test_write_path_conditional_on_the_workloads_name_is_refused(with_samples: bool) -> None:
    d = job_karta(
        {
            "podSpecPath": 'if .metadata.name == "evil" then . else .spec.template.spec end',
            "metadataPath": 'if .metadata.name == "evil" then .metadata else .spec.template.metadata end',
        }
    )
    r = judge(d, None, job_samples() if with_samples else [])
    assert not r.ok
    for field, where in (("podSpecPath", "/"), ("metadataPath", "/metadata")):
        [msg] = errors_at(r, f"{ROOT_C}.specDefinition.{field}")
        assert msg.startswith("write locations depend on .metadata.name: on sample "), msg
        assert f'with .metadata.name "evil", they are {where}' in msg


@pytest.mark.parametrize(
    ("condition", "named"),
    [
        ('.metadata.labels.team == "x"', ".metadata.labels"),
        ('.metadata.annotations["example.com/route"] == "pod"', ".metadata.annotations"),
        ('.metadata.namespace == "kube-system"', ".metadata.namespace"),
        ("(.metadata.name | length) > 40", ".metadata.name"),
    ],
)
def test_write_locations_must_not_depend_on_any_metadata_value(condition: str, named: str) -> None:
    d = job_karta({"podTemplateSpecPath": f"if {condition} then .spec else .spec.template end"})
    r = judge(d, None, job_samples()[:1])
    [msg] = errors_at(r, f"{ROOT_C}.specDefinition.podTemplateSpecPath")
    assert msg.startswith(f"write locations depend on {named}:"), msg


def test_paths_relative_to_a_template_may_read_its_own_metadata() -> None:
    d = job_karta(
        {"podTemplateSpecPath": ('.spec.template | if .metadata.labels.x == "y" then . else . end')}
    )
    assert judge(d, None, job_samples()).ok


def test_a_pod_is_its_own_template() -> None:
    d = yaml.safe_load((catalog_dir() / "core-pod-v1.yaml").read_text())
    assert judge(d, None).ok


def test_a_write_path_that_never_ends_for_one_name_is_refused_by_its_text() -> None:
    """A write path that never ends for one name: refused at its field from the text (a
    recursive ``def`` is beyond what a write path may use), so no probe runs it forever."""
    d = job_karta(
        {
            "podTemplateSpecPath": 'if .metadata.name == "x" then (def f: f; f) else .spec.template end'
        }
    )
    r = judge(d, None, job_samples()[:1], budget=1.5, timeout=1.0)
    msgs = errors_at(r, f"{ROOT_C}.specDefinition.podTemplateSpecPath")
    assert msgs and "uses jq beyond what a write path may use" in msgs[0], r.errors
    assert "'def'" in msgs[0]


def test_synthesised_sample_evaluation_stays_within_the_budget() -> None:
    d = volcano_karta()
    child = d["spec"]["structureDefinition"]["childComponents"][0]
    child["specDefinition"]["podTemplateSpecPath"] = "def f: f; f"
    r = judge(d, VOLCANO_CRDS, budget=1.0, timeout=2.0)
    assert r.synthesised == 1
    msgs = errors_at(r, TEMPLATE)
    # refused by its text (a write path), and still run on the synthesised sample within budget
    assert any("not evaluated" in m or "timed out" in m for m in msgs), r.errors


# --------------------------------------------------------------------------- the catalog


def _catalog_with_fixture() -> list[Any]:
    index = crds(*sorted((ROOT / "tests" / "crds").glob("*.yaml")))
    out = []
    for p in sorted(catalog_dir().glob("*.yaml")):
        [(_, doc)] = read_documents(p)
        kind = doc["spec"]["structureDefinition"]["rootComponent"]["kind"]
        if GVK(kind["group"], kind["version"], kind["kind"]) in index:
            out.append(pytest.param(doc, index, id=p.stem))
    assert len(out) == 3  # JobSet, TFJob, Argo Workflow
    return out


@pytest.mark.parametrize(("doc", "index"), _catalog_with_fixture())
def test_bundled_definitions_pass_against_their_crd(doc: Any, index: SchemaIndex) -> None:
    real = SampleIndex.load([SAMPLES])
    result = validate(request_for(doc), real, (), ENGINE, schemas=index)
    assert result.report is not None and result.report.ok, result.report.errors
    assert any("schema: CustomResourceDefinition" in n for n in result.report.notes)
    none = validate(request_for(copy.deepcopy(doc)), SampleIndex(), (), ENGINE, schemas=index)
    assert none.report is not None and none.report.ok, none.report.errors
    assert none.report.synthesised == 1


# --------------------------------------------------------------------------- the probes


def test_probes_change_every_metadata_value_to_the_expressions_constants() -> None:
    from webhook.validation import targets as writes

    values, keys = writes.constants(['if .metadata.labels.team == "evil" then .a else .b end'])
    assert values == ["evil"] and {"team", "evil", "metadata", "labels"} <= set(keys)
    obj = {"kind": "Job", "metadata": {"name": "n", "labels": {"app": "a"}}, "spec": {}}
    before = copy.deepcopy(obj)
    probes = writes.probes(obj, values, keys)
    assert obj == before  # copies only
    evil = probes[-1].obj["metadata"]
    assert probes[-1].value == "evil" and evil["name"] == "evil" and evil["namespace"] == "evil"
    assert evil["labels"]["app"] == "evil" and evil["labels"]["team"] == "evil"
    assert {p.value for p in probes} >= set(writes.PROBE_VALUES)
    assert writes.changed(obj, "namespace", "x", keys).obj["metadata"] == {
        **obj["metadata"],
        "namespace": "x",
    }


def test_probe_constants_are_bounded() -> None:
    from webhook.base.limits import MAX_PROBE_KEYS, MAX_PROBE_VALUES
    from webhook.validation import targets as writes

    expr = " , ".join(f'.f{i} == "v{i}"' for i in range(200))
    values, keys = writes.constants([expr, "((("])  # text jq cannot tokenize is skipped
    assert len(values) == MAX_PROBE_VALUES and len(keys) == MAX_PROBE_KEYS


def test_misdirected_locations_are_the_root_its_metadata_and_its_spec_except_for_pods() -> None:
    from webhook.validation import targets as writes

    for loc in [(), ("metadata",), ("spec",)]:
        assert writes.misdirected(loc, JOB)
    for loc in [("spec", "template"), ("metadata", "labels"), ("spec", "template", "spec")]:
        assert writes.misdirected(loc, JOB) is None
    assert writes.misdirected((), GVK("", "v1", "Pod")) is None


ODD_PATHS = [
    ".spec.template.spec.containers[0:1]",
    ".spec.tasks[1:][].template",
    ".spec.tasks[]?.template",
    "first(.spec.tasks[].template)",
    "limit(1; .spec.tasks[].template)",
    ".spec.tasks[0].template // .spec",
    "(.spec.tasks[].template, .metadata)",
    "empty",
    '.["spec"]["tasks"][-1].template',
    'getpath(["spec", "tasks", 0, "template"])',
    ".spec.tasks[].template[]",
    ".spec.tasks | .[]? | .template",
    ".[]",
    ".",
    "if .spec then .spec.tasks[].template else empty end",
]


@pytest.mark.parametrize("expr", ODD_PATHS)
@pytest.mark.parametrize("kind", ["volcano", "job"])
def test_odd_path_expressions_are_judged_never_an_internal_error(expr: str, kind: str) -> None:
    if kind == "volcano":
        d, schemas, samples = volcano_karta(), VOLCANO_CRDS, [("mpi-job.yaml", volcano_job())]
        child = d["spec"]["structureDefinition"]["childComponents"][0]
        child["specDefinition"]["podTemplateSpecPath"] = expr
        del child["instanceIdPath"], child["podSelector"]
    else:
        d, schemas, samples = job_karta({"podTemplateSpecPath": expr}), None, job_samples()[:2]
    for given in (samples, []):
        r = judge(copy.deepcopy(d), schemas, given)
        assert not any("internal error" in e.message for e in r.errors), r.errors
