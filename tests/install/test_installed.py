"""The installed command (``pip install .``) on every bundled sample, away from the checkout.

CI installs the project non-editable; these tests run the ``karta-webhook`` console script from
an empty directory, so the definitions it uses are the package data that ``pip install .``
shipped, not the repository's ``catalog/``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "catalog" / "samples").rglob("*.yaml"))
EXPECTED = Path(__file__).resolve().parents[1] / "catalog_expected"
EXE = shutil.which("karta-webhook")


def _all_samples() -> str:
    return "\n---\n".join(p.read_text() for p in SAMPLES)


def _installed_catalog(tmp_path: Path) -> Path:
    """Where the installed package keeps its catalog, asked from a directory outside the
    checkout (so that the checkout's ``webhook/`` is not what gets imported)."""
    import sys

    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from webhook.karta.loading import catalog_dir; print(catalog_dir())",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    if run.returncode != 0:
        pytest.skip("karta-webhook is not installed")
    where = Path(run.stdout.strip())
    if where.is_relative_to(ROOT):
        pytest.skip("installed in editable mode: package data is the checkout")
    return where


def test_distribution_ships_catalog_and_samples(tmp_path: Path) -> None:
    installed = _installed_catalog(tmp_path)
    want = sorted(str(p.relative_to(ROOT / "catalog")) for p in (ROOT / "catalog").rglob("*.yaml"))
    got = sorted(str(p.relative_to(installed)) for p in installed.rglob("*.yaml"))
    assert got == want
    assert (installed / "README.md").is_file()


@pytest.mark.skipif(EXE is None, reason="the karta-webhook command is not on PATH")
def test_describe_and_mutate_every_sample_with_the_installed_command(tmp_path: Path) -> None:
    _installed_catalog(tmp_path)

    def command(*args: str) -> Any:
        run = subprocess.run(
            [str(EXE), *args, "-f", "-", "-o", "json"],
            input=_all_samples(),
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)

    views = command("describe")
    assert views["count"] == len(SAMPLES)
    expected = {
        p: yaml.safe_load((EXPECTED / f"{p.parent.name}.yaml").read_text())[p.name] for p in SAMPLES
    }
    assert [v["gpus"] for v in views["items"]] == [expected[p]["gpus"] for p in SAMPLES]

    policy = tmp_path / "policy.yaml"
    policy.write_text("rules: [{name: kai, schedulerName: kai-scheduler, labels: {team: ml}}]\n")
    items = command("mutate", "--policy", str(policy))["items"]
    assert len(items) == len(SAMPLES)
    scheduled = ["kai-scheduler" in json.dumps(i) for i in items]
    assert scheduled == [bool(expected[p]["schedulerName"]) for p in SAMPLES]


@pytest.mark.skipif(EXE is None, reason="the karta-webhook command is not on PATH")
def test_pip_install_puts_the_kubectl_plugin_beside_the_command(tmp_path: Path) -> None:
    """``pip install .`` installs ``kubectl-karta`` (the same CLI, named for kubectl's plugin
    lookup) where it installs ``karta-webhook``: beside the interpreter's scripts."""
    import sys

    _installed_catalog(tmp_path)
    plugin = Path(sys.executable).parent / "kubectl-karta"
    if not plugin.is_file():
        plugin = Path(shutil.which("kubectl-karta") or plugin)
    assert plugin.is_file(), f"no kubectl-karta beside {sys.executable} nor on PATH"
    run = subprocess.run(
        [str(plugin), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: kubectl karta ")
