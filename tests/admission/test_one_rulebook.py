"""One rulebook for every source (issue 25 item 2; issue 28 item 3's catalog folders):
definitions from ``--catalog`` folders and the cluster pass ``/validate``'s checks before
use; one that fails is not used, is named (logged, counted, ``Validated=False`` for a
cluster Karta) and the others load. The bundled catalog passes the same checks here, at
test time, rather than at every start."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakeapi import karta, trainer
from helpers import ENGINE
from test_validation import BASE

from webhook.admission.rulebook import definition_vet
from webhook.admission.state import State
from webhook.base.documents import read_documents
from webhook.cli.console import EXIT_FINDING, EXIT_INPUT
from webhook.cli.main import main
from webhook.cluster.kartasync import load_cluster_karta
from webhook.karta.loading import catalog_dir, load_definition, samples_dir
from webhook.karta.samples import SampleIndex

POLICY = "rules:\n- name: kai\n  schedulerName: kai-scheduler\n"
TEMPLATE_PATH = "spec.structureDefinition.childComponents[0].specDefinition.podTemplateSpecPath"


@pytest.fixture(scope="module")
def vet() -> Any:
    return definition_vet(SampleIndex.load([samples_dir()]), engine=ENGINE)


def misspelt_jobset() -> dict[str, Any]:
    """Well-formed and safe, so it parses and passes the screen, but its template path finds
    nothing on any JobSet sample: ``/validate`` refuses it."""
    d = copy.deepcopy(BASE)
    d["metadata"]["name"] = "misspelt"
    child = d["spec"]["structureDefinition"]["childComponents"][0]
    child["specDefinition"]["podTemplateSpecPath"] = ".spec.replicatedJob[].template.spec.template"
    return d


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A catalog folder: a good definition (Trainer), one /validate refuses (a JobSet with a
    misspelt path) and a file that is not YAML."""
    d = tmp_path / "catalog"
    d.mkdir()
    (d / "a-trainer.yaml").write_text(yaml.safe_dump(karta("trainer")))
    (d / "b-misspelt.yaml").write_text(yaml.safe_dump(misspelt_jobset()))
    (d / "c-broken.yaml").write_text("spec: [unclosed\n")
    return d


def test_misspelt_definition_loads_but_fails_the_vet(vet: Any) -> None:
    load_definition(misspelt_jobset(), "m.yaml")  # shape and safety screen: fine
    problems = vet(misspelt_jobset(), "m.yaml")
    assert any(e.path == TEMPLATE_PATH and "finds nothing" in e.message for e in problems)


def test_every_bundled_definition_passes_the_vet(vet: Any) -> None:
    """The bundled catalog is checked here rather than at each start (see
    :func:`webhook.admission.registry.load_catalogs`)."""
    checked = 0
    for path in sorted(catalog_dir().glob("*.yaml")):
        for source, doc in read_documents(path):
            assert vet(doc, source) == [], source
            checked += 1
    assert checked >= 32


def test_cli_mutate_uses_the_good_definitions_and_names_the_bad(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    obj = tmp_path / "trainer.yaml"
    obj.write_text(yaml.safe_dump(trainer()))
    argv = ["mutate", "-f", str(obj), "--catalog", str(folder), "--policy", str(policy)]
    code = main([*argv, "-o", "patch"])
    out, err = capsys.readouterr()
    assert code == EXIT_FINDING
    ops = json.loads(out)
    assert {
        "op": "add",
        "path": "/spec/template/spec/schedulerName",
        "value": "kai-scheduler",
    } in ops
    assert "b-misspelt.yaml" in err and "podTemplateSpecPath: finds nothing" in err
    assert "c-broken.yaml" in err
    assert "a-trainer.yaml" not in err
    assert err.count("(not loaded; the other definitions are)") == 2


def test_cli_keeps_the_bundled_definition_a_rejected_one_would_replace(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The misspelt JobSet is not used: the bundled JobSet still mutates JobSets."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    sample = catalog_dir() / "samples" / "jobset.x-k8s.io-jobset-v1alpha2" / "leader-workers.yaml"
    argv = ["mutate", "-f", str(sample), "--catalog", str(folder), "--policy", str(policy)]
    assert main([*argv, "-o", "patch"]) == EXIT_FINDING
    ops = json.loads(capsys.readouterr().out)
    assert any(op["path"].startswith("/spec/replicatedJobs/0/template") for op in ops)


def test_cli_without_bad_definitions_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "catalog"
    d.mkdir()
    (d / "trainer.yaml").write_text(yaml.safe_dump(karta("trainer")))
    obj = tmp_path / "trainer.yaml"
    obj.write_text(yaml.safe_dump(trainer()))
    assert main(["mutate", "-f", str(obj), "--catalog", str(d), "-o", "patch"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_missing_catalog_folder_is_still_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    obj = tmp_path / "trainer.yaml"
    obj.write_text(yaml.safe_dump(trainer()))
    assert main(["mutate", "-f", str(obj), "--catalog", str(tmp_path / "nope")]) == EXIT_INPUT


def test_cli_describe_file_mode_also_loads_the_rest(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    obj = tmp_path / "trainer.yaml"
    obj.write_text(yaml.safe_dump(trainer()))
    assert main(["describe", "-f", str(obj), "--catalog", str(folder)]) == EXIT_FINDING
    out, err = capsys.readouterr()
    assert "Trainer" in out and "b-misspelt.yaml" in err


def test_server_state_loads_the_rest_and_records_why(folder: Path, vet: Any) -> None:
    state = State([folder], vet=vet)
    snap = state.snapshot
    kinds = {str(g) for g in snap.registry.kinds()}
    assert "example.com/v1 Trainer" in kinds or any("Trainer" in k for k in kinds)
    jobset = next(k for k in snap.registry.definitions() if k.gvk and k.gvk.kind == "JobSet")
    assert jobset.name == "jobset-x-k8s-io-jobset-v1alpha2"  # the bundled one stays
    assert set(snap.file_errors) == {f"{folder}/b-misspelt.yaml", f"{folder}/c-broken.yaml"}
    assert any("finds nothing" in e for e in snap.file_errors[f"{folder}/b-misspelt.yaml"])
    # fixing the file and reloading brings it in and clears its error
    good = copy.deepcopy(BASE)
    good["metadata"]["name"] = "mended"
    (folder / "b-misspelt.yaml").write_text(yaml.safe_dump(good))
    (folder / "c-broken.yaml").unlink()
    state._reload_defs()
    state._publish()
    assert state.snapshot.file_errors == {}
    jobset = next(
        k for k in state.snapshot.registry.definitions() if k.gvk and k.gvk.kind == "JobSet"
    )
    assert jobset.name == "mended"


def test_cluster_karta_failing_validate_is_not_loaded(vet: Any) -> None:
    doc = misspelt_jobset()
    doc["metadata"]["uid"] = "u1"
    loaded, why = load_cluster_karta(doc, ENGINE, vet)
    assert loaded is None
    assert any(TEMPLATE_PATH in w and "finds nothing" in w for w in why)
    ok, none = load_cluster_karta(copy.deepcopy(BASE), ENGINE, vet)
    assert ok is not None and none == []
    # without samples (the old sample-free check) the misspelling went through
    assert load_cluster_karta(doc, ENGINE)[0] is not None


def test_rejected_definitions_are_counted(folder: Path, vet: Any) -> None:
    """``karta_webhook_definitions_rejected``: by origin, following the snapshot."""
    from prometheus_client import REGISTRY

    from webhook.server import app as server

    def rejected(origin: str) -> float | None:
        return REGISTRY.get_sample_value("karta_webhook_definitions_rejected", {"origin": origin})

    state = State([folder], vet=vet)
    server.create_app(state)
    assert rejected("file") == 2 and rejected("cluster") == 0
    state.set_cluster([], [], {"bad-karta": ("spec: invalid",)})
    assert rejected("file") == 2 and rejected("cluster") == 1
    assert state.reload_status["catalog"][0] is False  # the catalog's reload gauge says so too


def test_cli_validate_takes_a_catalog_folder(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every file of the folder is checked and reported; an unreadable one is named; exit 1."""
    assert main(["validate", "-f", str(folder)]) == EXIT_FINDING
    lines = capsys.readouterr().out.splitlines()
    heads = [line for line in lines if line.startswith(("OK ", "INVALID "))]
    assert heads[0].startswith(f"INVALID {folder}/c-broken.yaml: not valid YAML")
    assert heads[1].startswith("OK trainer ")
    assert heads[2] == "INVALID misspelt"
    assert any(TEMPLATE_PATH in line and "finds nothing" in line for line in lines)


def test_cluster_karta_failing_the_samples_gets_validated_false(fake: Any) -> None:
    """A Karta the API server stored (no validating webhook, or one that was off) that
    /validate refuses: not used, and its Validated condition says why."""
    from fakeapi import install_crds, trainer_crd
    from test_status import Cluster, add

    install_crds(fake, trainer_crd())
    doc = misspelt_jobset()
    add(fake, doc)
    good = copy.deepcopy(BASE)
    good["metadata"]["name"] = "good"
    add(fake, good)
    cluster = Cluster(fake)
    cluster.sync()
    cluster.writer.reconcile()
    names = {k.name for k in cluster.state.snapshot.registry.definitions()}
    assert names == {"good"}
    validated = cluster.conditions("misspelt")["Validated"]
    assert (validated["status"], validated["reason"]) == ("False", "ValidationFailed")
    assert "podTemplateSpecPath: finds nothing" in validated["message"]
    assert cluster.conditions("good")["Validated"]["status"] == "True"
