"""A reload reads again only the catalog files whose bytes changed and keeps the very objects
of the others: what keeps the definitions a server's master loaded before forking shared with
its workers after a reload (docs/install.md, Memory; bench/bench_memory.py measures it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import JOBSET_KARTA

from webhook.admission.state import State
from webhook.base.gvk import GVK


def _write(folder: Path, i: int, note: str = "") -> Path:
    doc = yaml.safe_load(JOBSET_KARTA.read_text())
    doc["metadata"]["name"] = f"copy{i}{note}"
    doc["spec"]["structureDefinition"]["rootComponent"]["kind"]["group"] = f"copy{i}.example.com"
    f = folder / f"copy{i}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return f


def _gvk(i: int) -> GVK:
    return GVK(f"copy{i}.example.com", "v1alpha2", "JobSet")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "defs"
    d.mkdir()
    for i in range(3):
        _write(d, i)
    return d


_clock = [0]


def _settle(*files: Path) -> None:
    """Every file of the folder modified well before the settle time (a reload reads a
    source once none of its files is being written), ``files`` at a time none had before."""
    folder = files[0].parent
    for f in folder.iterdir():
        if f not in files:
            st = f.stat()
            os.utime(f, ns=(st.st_atime_ns, min(st.st_mtime_ns, 10**9)))
    for f in files:
        _clock[0] += 1
        t = 10**9 * (100 + _clock[0])
        os.utime(f, ns=(t, t))


def test_only_the_changed_file_is_read_and_checked_again(folder: Path) -> None:
    vetted: list[str] = []

    def vet(doc: Any, source: str) -> list[Any]:
        vetted.append(source)
        return []

    state = State([folder], bundled=False, vet=vet)
    assert len(vetted) == 3
    before = {i: state.snapshot.registry.lookup(_gvk(i)) for i in range(3)}
    assert all(before.values())
    vetted.clear()
    _settle(_write(folder, 1, "-edited"))
    assert state.reload_files() == []
    after = {i: state.snapshot.registry.lookup(_gvk(i)) for i in range(3)}
    assert [Path(s.split(":")[0]).name for s in vetted] == ["copy1.yaml"]
    assert after[0] is before[0] and after[2] is before[2]  # the same objects, not copies
    assert after[1] is not before[1] and after[1] is not None
    assert after[1].name == "copy1-edited"


def test_files_written_anew_with_the_same_bytes_keep_every_object(folder: Path) -> None:
    """A ConfigMap update: every file replaced (new inode, new time), most bytes the same."""
    state = State([folder], bundled=False)
    before = state.snapshot.registry.definitions()
    files = sorted(folder.iterdir())
    for f in files:
        data = f.read_bytes()
        f.unlink()
        f.write_bytes(data)
    _settle(*files)
    assert state.reload_files() == []
    after = state.snapshot.registry.definitions()
    assert len(after) == 3 and all(a is b for a, b in zip(after, before, strict=True))


def test_a_removed_file_goes_and_an_added_one_comes(folder: Path) -> None:
    state = State([folder], bundled=False)
    kept = state.snapshot.registry.lookup(_gvk(0))
    (folder / "copy2.yaml").unlink()
    _settle(_write(folder, 7), folder / "copy0.yaml")
    assert state.reload_files() == []
    reg = state.snapshot.registry
    assert reg.lookup(_gvk(2)) is None and reg.lookup(_gvk(7)) is not None
    assert reg.lookup(_gvk(0)) is kept


def test_a_file_that_turns_bad_is_rejected_and_mended_is_read_again(folder: Path) -> None:
    state = State([folder], bundled=False)
    bad = folder / "copy1.yaml"
    good = bad.read_bytes()
    bad.write_text("a: [\n")
    _settle(bad)
    state.reload_files()
    assert state.snapshot.registry.lookup(_gvk(1)) is None
    assert any("copy1.yaml" in s for s in state.snapshot.file_errors)
    bad.write_bytes(good)
    _settle(bad)
    state.reload_files()
    assert state.snapshot.registry.lookup(_gvk(1)) is not None
    assert not state.snapshot.file_errors
