"""Issue 48 item 3: ``init --crd`` drafts a definition from a CRD that validates against the
same CRD, finds the template paths the bundled definitions use, and comments every guess."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ENGINE

from webhook.base.documents import read_documents
from webhook.cli.main import main
from webhook.jq.readpaths import read_paths
from webhook.karta.loading import catalog_dir
from webhook.schema.crds import read_crds
from webhook.validation.check import check

ROOT = Path(__file__).resolve().parents[2]
CRDS = {
    "batch.volcano.sh-job-v1alpha1": ROOT / "examples" / "volcano" / "crd.yaml",
    "kubeflow.org-tfjob-v1": ROOT / "tests" / "crds" / "kubeflow.org_tfjobs.yaml",
    "jobset.x-k8s.io-jobset-v1alpha2": ROOT / "tests" / "crds" / "jobset.x-k8s.io_jobsets.yaml",
}


def _template_paths(doc: dict[str, Any]) -> set[str]:
    sd = doc["spec"]["structureDefinition"]
    out: set[str] = set()
    for c in [sd["rootComponent"], *sd.get("childComponents", [])]:
        expr = (c.get("specDefinition") or {}).get("podTemplateSpecPath")
        found = read_paths(expr) if expr else None
        out.update(found.results if found else ())
    return out


@pytest.mark.parametrize("stem", sorted(CRDS))
def test_the_draft_validates_and_finds_the_bundled_template_paths(stem: str, capsys: Any) -> None:
    crd = CRDS[stem]
    assert main(["init", "--crd", str(crd)]) == 0
    text = capsys.readouterr().out
    draft = yaml.safe_load(text)
    assert "# guess:" in text and "# found: a PodTemplateSpec at" in text
    [(_, entry)] = [(e.kind, e) for e in read_crds(read_documents(crd))]
    report = check(draft, [], ENGINE, schema=entry.schema)
    assert report.ok, report.errors
    bundled = yaml.safe_load((catalog_dir() / f"{stem}.yaml").read_text())
    # a role map's literal keys (.Chief) are the draft's [] (one child for every role)
    want = {p.replace(".Chief", "[]").replace(".Master", "[]").replace(".PS", "[]")
            .replace(".Worker", "[]").replace(".Evaluator", "[]") for p in _template_paths(bundled)}  # fmt: skip
    assert want <= _template_paths(draft)


def test_init_needs_a_crd_of_the_kind(tmp_path: Path, capsys: Any) -> None:
    crd = CRDS["kubeflow.org-tfjob-v1"]
    assert main(["init", "--crd", str(crd), "--kind", "PyTorchJob"]) == 2
    assert "no CustomResourceDefinition of kind PyTorchJob" in capsys.readouterr().err
