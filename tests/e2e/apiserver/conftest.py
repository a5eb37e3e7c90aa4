"""Fixtures of the end-to-end suite against a real kube-apiserver (see ``kapi.py``).

One control plane for the whole run (``plane``), one of a test's own when it needs a new
cluster (``fresh_plane``), a fresh namespace per test (``ns``), and the
CRDs: Karta's own from ``manifests/base`` and the workload kinds' real CRDs
(``workload_crds``); the scheduling plane, controllers, scheduler, operators and nodes on a
control plane of its own (``scheduling_plane``, ``scheduling_plane_factory``). In CI (``CI`` set) a control plane that is not built is a failure, never a
skip; elsewhere the skip says how to build it. When a test fails, the summary names the folder
with the apiserver's, etcd's and the webhook servers' logs (pytest keeps the last three runs).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import kapi
import pytest
import schedplane
import yaml

_run_dirs: list[Path] = []

KARTA_CRD = kapi.ROOT / "manifests" / "base" / "crd-kartas.yaml"
OWN_CRDS = kapi.ROOT / "tests" / "crds"


@contextlib.contextmanager
def _started(where: Callable[[], Path]) -> Iterator[kapi.ControlPlane]:
    """A control plane started in the folder ``where()`` makes, stopped at the end; when it is
    not built, a skip (a failure in CI) before ``where`` is called."""
    try:
        tools = kapi.tools_dir()
        kapi.kubectl_binary()
    except kapi.ToolsMissing as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI: {e}", pytrace=False)
        pytest.skip(str(e))
    p = kapi.start(where(), tools)
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kapi.ControlPlane]:
    def run_dir() -> Path:
        d = tmp_path_factory.mktemp("kapi")
        _run_dirs.append(d.parent)
        return d

    with _started(run_dir) as p:
        p.apply(KARTA_CRD.read_text())
        p.wait_established("kartas.run.ai")
        yield p


@pytest.fixture
def fresh_plane(tmp_path: Path) -> Iterator[kapi.ControlPlane]:
    """A control plane of this test's own, with nothing installed (not even Karta's CRD)."""
    with _started(lambda: tmp_path / "kapi") as p:
        yield p


@pytest.fixture
def ns(plane: kapi.ControlPlane) -> str:
    """A new namespace for this test (no namespace controller runs: never waited for)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    plane.kubectl("create", "namespace", name)
    return name


@pytest.fixture(scope="session")
def scheduling_plane_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., schedplane.SchedulingPlane]]:
    """``factory(feature_gates=(), runtime_config=(), operators=("jobset", "lws"))``: the
    scheduling plane (``schedplane.py``) started with those, one per distinct arguments for the
    session, all stopped at its end. In CI a plane that is not built is a failure, never a
    skip."""
    planes: dict[tuple[tuple[str, ...], ...], schedplane.SchedulingPlane] = {}

    def make(
        feature_gates: Sequence[str] = (),
        runtime_config: Sequence[str] = (),
        operators: Sequence[str] = schedplane.OPERATORS,
    ) -> schedplane.SchedulingPlane:
        key = tuple(tuple(sorted(x)) for x in (feature_gates, runtime_config, operators))
        if key not in planes:
            try:
                tools = schedplane.plane_tools()
                kapi.kubectl_binary()
            except kapi.ToolsMissing as e:
                if os.environ.get("CI"):
                    pytest.fail(f"CI: {e}", pytrace=False)
                pytest.skip(str(e))
            d = tmp_path_factory.mktemp("sched")
            _run_dirs.append(d.parent)
            planes[key] = schedplane.start(
                d, tools, feature_gates=feature_gates, runtime_config=runtime_config,
                operators=operators,
            )  # fmt: skip
        return planes[key]

    try:
        yield make
    finally:
        for p in planes.values():
            p.stop()


@pytest.fixture(scope="session")
def scheduling_plane(
    scheduling_plane_factory: Callable[..., schedplane.SchedulingPlane],
) -> schedplane.SchedulingPlane:
    """The shared scheduling plane, with the native gang's gate and API on (``schedplane.GANG``:
    only pods with a ``schedulingGroup`` are treated otherwise), so the gang's tests and the
    others share one plane."""
    return scheduling_plane_factory(**schedplane.GANG)


#: Where hack/workload-crds.sh keeps the CRDs it read from the Go modules: it does nothing when
#: its list is unchanged (a fresh folder costs a ``go mod download`` a module, a minute loaded).
WORKLOAD_CRDS_CACHE = Path.home() / ".cache" / "karta-webhook" / "workload-crds"


def workload_crd_files(out: Path = WORKLOAD_CRDS_CACHE) -> list[Path]:
    """The workload kinds' CRDs from their projects' Go modules (``hack/workload-crds.sh``),
    then ours in ``tests/crds`` for a kind no module gives."""
    script = kapi.ROOT / "hack" / "workload-crds.sh"
    files: list[Path] = []
    if script.is_file():
        res = subprocess.run(
            ["bash", str(script), str(out)], capture_output=True, text=True, check=False
        )
        if res.returncode != 0:
            raise AssertionError(f"hack/workload-crds.sh failed:\n{res.stderr}{res.stdout}")
        files = sorted(out.glob("*.yaml"))
    return files


def crd_names(path: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        (d["metadata"]["name"], d)
        for d in kapi.load_all(path.read_text())
        if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"
    ]


CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture(scope="session")
def workload_crds(plane: kapi.ControlPlane) -> dict[str, str]:
    """Install every workload CRD we have (modules first, ours for the rest); returns where
    each CRD came from, by CRD name."""
    source: dict[str, str] = {}
    docs: list[dict[str, Any]] = []
    for path in workload_crd_files():
        for name, doc in crd_names(path):
            if name not in source:
                source[name] = f"module: {path.name}"
                docs.append(doc)
    for path in sorted(OWN_CRDS.glob("*.yaml")):
        for name, doc in crd_names(path):
            if name not in source:
                source[name] = f"tests/crds: {path.name}"
                docs.append(doc)
    for doc in docs:  # created by REST: a kubectl a CRD cost seconds more on a loaded machine
        status, body = plane.request("POST", CRDS_PATH, doc)
        if status == 409:  # there already: server-side apply (too large for last-applied)
            plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc))
        else:
            assert status == 201, (doc["metadata"]["name"], status, body)
    plane.wait_established(*source)
    return source


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """After a failed end-to-end test, where its logs are (with workers, each one's folder
    ``popen-gwN`` is under the run's)."""
    failed = terminalreporter.stats.get("failed") or []
    if not any(r.nodeid.startswith("tests/e2e/apiserver/") for r in failed):
        return
    factory = getattr(terminalreporter.config, "_tmp_path_factory", None)
    where = _run_dirs[0] if _run_dirs else factory.getbasetemp() if factory else "pytest's basetemp"
    terminalreporter.write_line(f"apiserver e2e: control-plane and webhook logs under {where}")
