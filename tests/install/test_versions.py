"""The libraries whose internals the code depends on are installed at a version within the
range those internals were checked against (pyproject.toml's upper bounds, issue 50 item 3),
and constraints.txt pins each inside it: a new major release fails here, loudly, not in
production with a green ``pip install``."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
#: what each depends on, for the message
INTERNALS = {
    "gunicorn": "gthread's tpool, nr, keepalived_conns and http.body.LengthReader (server/transport)",
    "kubernetes": "the watch's private _resp (cluster/namespaces.py, cluster/listwatch.py)",
    "jq": "libjq 1.8.2's behaviour, which the native evaluator reproduces byte for byte (jq/native)",
}


def requirement(name: str) -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [req] = [r for r in map(Requirement, project["dependencies"]) if r.name == name]
    return req


def pinned(name: str) -> str:
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.split("==")[1].split()[0]
    raise AssertionError(f"constraints.txt pins no {name}")


@pytest.mark.parametrize("name", sorted(INTERNALS))
def test_the_dependency_has_an_upper_bound(name: str) -> None:
    assert any(s.operator in ("<", "<=", "==", "~=") for s in requirement(name).specifier), (
        f"{name} has no upper bound in pyproject.toml; the code depends on {INTERNALS[name]}"
    )


@pytest.mark.parametrize("name", sorted(INTERNALS))
def test_the_installed_version_is_in_the_checked_range(name: str) -> None:
    req, installed = requirement(name), metadata.version(name)
    assert req.specifier.contains(installed, prereleases=True), (
        f"{name} {installed} is installed, outside {req.specifier} (pyproject.toml), the range "
        f"its internals were checked against: {INTERNALS[name]}. Check them against "
        f"{installed}, then widen the bound and update constraints.txt"
    )


@pytest.mark.parametrize("name", sorted(INTERNALS))
def test_constraints_pin_a_version_in_the_range(name: str) -> None:
    assert requirement(name).specifier.contains(pinned(name), prereleases=True)
