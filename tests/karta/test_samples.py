"""Sample objects by kind (webhook.karta.samples): what definitions are checked against."""

from __future__ import annotations

from pathlib import Path

from webhook.base.gvk import GVK
from webhook.karta.samples import SampleIndex

JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")


def test_sample_index_loads_recursively_and_skips_unreadable(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "train.yaml").write_text(
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: t}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
    )
    (tmp_path / "list.json").write_text(
        '{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod"}]}'
    )
    (tmp_path / "broken.yaml").write_text("a: [\n")
    (tmp_path / "notes.txt").write_text("not a sample")
    idx = SampleIndex.load([tmp_path, tmp_path / "missing"])
    assert [s for s, _ in idx.for_gvk(JOBSET)] == ["a/b/train.yaml#0"]
    assert sorted(s for s, _ in idx.for_gvk(GVK("", "v1", "Pod"))) == [
        "a/b/train.yaml#1",
        "list.json[0]",
    ]
    assert idx.for_gvk(GVK("x", "v1", "Y")) == []
    assert len(idx.warnings) == 2
    assert any("broken.yaml" in w for w in idx.warnings)


def test_samples_are_chosen_by_the_root_kind_of_a_raw_document() -> None:
    idx = SampleIndex()
    idx.add("js.yaml", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"})
    karta = {
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "kind": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}
                }
            }
        }
    }
    assert [s for s, _ in idx.for_definition(karta)] == ["js.yaml"]
    assert idx.for_definition({"spec": "not an object"}) == []
    assert idx.for_definition(None) == []
