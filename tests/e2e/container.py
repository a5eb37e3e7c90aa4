"""The karta-webhook image (``hack/build-image.sh``) run with podman as the Helm chart runs it:
read-only root, a tmpfs ``/tmp``, uid 65532, every capability dropped, no new privileges, the
TLS Secret (``tls.crt``, ``tls.key``, ``ca.crt``) and the policy ConfigMap mounted read-only at
the chart's paths in the kubelet's layout (files are symlinks through ``..data``, which an update
swaps atomically), and the chart's ``serve`` arguments.

``image()`` is the image built from this checkout; in CI (``CI`` set) a missing podman or image
fails the test, elsewhere it is a skip naming ``hack/build-image.sh``. A container is stopped
and removed by its id.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
BUILD = ROOT / "hack" / "build-image.sh"
UID = 65532
TLS_DIR, POLICY_DIR = "/etc/karta-webhook/tls", "/etc/karta-webhook/policy"
# The chart's terminationGracePeriodSeconds (charts/karta-webhook/templates/deployment.yaml).
GRACE_SECONDS = 30
# The chart's container arguments, with the Service's port and metrics port.
CHART_ARGS = [
    "serve", "--host=0.0.0.0",
    "--tls-cert", f"{TLS_DIR}/tls.crt", "--tls-key", f"{TLS_DIR}/tls.key",
    "--policy", f"{POLICY_DIR}/policy.yaml", "--metrics-port", "9090",
]  # fmt: skip


class ImageMissing(RuntimeError):
    """No podman, or no image built from this checkout (the message says how to build it)."""


def env() -> dict[str, str]:
    """podman's environment: the host's forced settings (hack/containers.conf) unless set."""
    e = dict(os.environ)
    e.setdefault("CONTAINERS_CONF", str(ROOT / "hack" / "containers.conf"))
    return e


def podman(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        ["podman", *args], capture_output=True, text=True, env=env(), timeout=timeout, check=False
    )
    if check and out.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {out.returncode}:\n{out.stderr}")
    return out


def find_image() -> str:
    if shutil.which("podman") is None:
        raise ImageMissing(
            "no podman on PATH: hack/build-image.sh installs it and builds the image"
        )
    out = subprocess.run(
        ["bash", str(BUILD), "--check"], capture_output=True, text=True, env=env(), check=False
    )
    if out.returncode != 0:
        raise ImageMissing(
            out.stderr.strip() or f"hack/build-image.sh --check exited {out.returncode}"
        )
    return out.stdout.strip()


def image() -> str:
    """The image built from this checkout; a skip (a failure in CI) when there is none."""
    try:
        return find_image()
    except ImageMissing as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI: {e}", pytrace=False)
        pytest.skip(str(e))


def project(volume: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into ``volume`` the way the kubelet updates a Secret or ConfigMap volume:
    a new timestamped folder, ``..data`` swapped to it by one rename, ``name -> ..data/name``."""
    volume.mkdir(parents=True, exist_ok=True)
    stamp = volume / f"..{time.time_ns()}"
    stamp.mkdir()
    for name, data in files.items():
        (stamp / name).write_bytes(data)
        (stamp / name).chmod(0o444)
    stamp.chmod(0o755)
    tmp = volume / "..data_tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(stamp.name)
    old = (volume / "..data").resolve() if (volume / "..data").is_symlink() else None
    tmp.rename(volume / "..data")
    for name in files:
        if not (volume / name).is_symlink():
            (volume / name).symlink_to(f"..data/{name}")
    if old is not None and old != stamp:
        shutil.rmtree(old)


@dataclass
class Container:
    id: str
    image: str
    port: int
    metrics_port: int
    volumes: Path

    def logs(self) -> str:
        out = podman("logs", self.id, check=False)
        return out.stdout + out.stderr

    def running(self) -> bool:
        out = podman("inspect", "--format", "{{.State.Running}}", self.id, check=False)
        return out.stdout.strip() == "true"

    def stop(self, timeout: int = GRACE_SECONDS) -> float:
        """SIGTERM, SIGKILL after ``timeout`` s (as the kubelet after the grace period); the
        seconds it took."""
        start = time.monotonic()
        podman("stop", "--time", str(timeout), self.id, check=False, timeout=timeout + 60)
        return time.monotonic() - start

    def remove(self) -> None:
        podman("rm", "--force", "--time", "0", self.id, check=False)


def run(
    image_name: str,
    volumes: Path,
    tls: dict[str, bytes],
    policy: str,
    args: Sequence[str] = (),
    *,
    network_host: bool = False,
    port: int = 0,
    metrics_port: int = 0,
    extra: Sequence[str] = (),
) -> Container:
    """Start the image with the chart's settings; ``args`` after the chart's (``--no-kube``
    outside a cluster). Without ``network_host`` the two ports are published on free ports of
    127.0.0.1; with it, the server listens on 127.0.0.1 at ``port`` and ``metrics_port`` of the
    host's network (as a process of the host would)."""
    project(volumes / "tls", tls)
    project(volumes / "policy", {"policy.yaml": policy.encode()})
    for d in (volumes, volumes / "tls", volumes / "policy"):
        d.chmod(0o755)
    net = (
        ["--network=host"]
        if network_host
        else ["--publish=127.0.0.1::8443", "--publish=127.0.0.1::9090"]
    )
    chart_args = list(CHART_ARGS)
    if network_host:
        chart_args = [
            a.replace("0.0.0.0", "127.0.0.1") for a in chart_args
        ]  # the host's network: loopback only
        chart_args[chart_args.index("--metrics-port") + 1] = str(metrics_port)
        chart_args.append(f"--port={port}")
    out = podman(
        "run", "--detach", "--no-healthcheck",
        "--read-only", "--tmpfs=/tmp:rw,mode=1777", f"--user={UID}:{UID}",
        "--cap-drop=ALL", "--security-opt=no-new-privileges",
        "--env=PROMETHEUS_MULTIPROC_DIR=/tmp/metrics",
        f"--volume={volumes / 'tls'}:{TLS_DIR}:ro", f"--volume={volumes / 'policy'}:{POLICY_DIR}:ro",
        *net, *extra, image_name, *chart_args, *args,
    )  # fmt: skip
    cid = out.stdout.strip()
    if not network_host:
        port, metrics_port = (_host_port(cid, p) for p in (8443, 9090))
    return Container(cid, image_name, port, metrics_port, volumes)


def _host_port(cid: str, port: int) -> int:
    out = podman("port", cid, f"{port}/tcp").stdout.strip()
    return int(out.rsplit(":", 1)[1])


@contextmanager
def running(image_name: str, volumes: Path, *a: object, **kw: object) -> Iterator[Container]:
    """:func:`run` for a test, the container removed (by its id) on the way out."""
    c = run(image_name, volumes, *a, **kw)  # type: ignore[arg-type]
    try:
        yield c
    finally:
        c.remove()
