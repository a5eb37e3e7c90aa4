"""The image (``hack/build-image.sh``) run as the Helm chart runs it (``container.py``): it
serves ``/readyz`` and ``/metrics``, answers README's AdmissionReview with what
``karta-webhook mutate`` prints for the same object, picks up a TLS Secret rotated in place,
ends within the chart's grace period on SIGTERM; and holds what it should and nothing else.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import container
import pytest
from running import NAMESPACE, ROOT, SERVICE, TLSConn

from webhook.server.certs import write_certs

REVIEW = ROOT / "examples" / "review-jobset.json"
POLICY = ROOT / "examples" / "policy.yaml"
MAX_IMAGE_BYTES = 250 * 1000 * 1000
# What only the kubernetes client's asyncio half needs, which the webhook never imports: the
# Dockerfile removes it with kubernetes/aio (constraints.txt pins it for `pip install .`).
ASYNC_ONLY = (
    "aiohttp aiohttp-retry aiosignal aiohappyeyeballs attrs frozenlist multidict propcache yarl"
)


@pytest.fixture(scope="module")
def image() -> str:
    return container.image()


def tls_files(d: Path) -> dict[str, bytes]:
    """A CA and a serving certificate for the Service, as the chart's TLS Secret holds them."""
    paths = write_certs(d, SERVICE, NAMESPACE)
    return {
        "tls.crt": paths.cert.read_bytes(),
        "tls.key": paths.key.read_bytes(),
        "ca.crt": paths.ca_cert.read_bytes(),
    }


def get(c: container.Container, path: str, ca: bytes, timeout: float = 5) -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cadata=ca.decode())
    conn = TLSConn(c.port, ctx, timeout)
    try:
        body = REVIEW.read_bytes() if path == "/mutate" else None
        headers = {"Content-Type": "application/json"} if body else {}
        conn.request("POST" if body else "GET", path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_ready(c: container.Container, ca: bytes, seconds: float = 30) -> float:
    """Seconds from now until /readyz answers 200; fails with the container's log."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            if get(c, "/readyz", ca, timeout=2)[0] == 200:
                return time.monotonic() - start
        except OSError:
            pass
        if not c.running():
            pytest.fail(f"the container exited:\n{c.logs()}")
        time.sleep(0.1)
    pytest.fail(f"/readyz not 200 in {seconds} s:\n{c.logs()}")


@pytest.fixture
def served(image: str, tmp_path: Path) -> Iterator[tuple[container.Container, dict[str, bytes]]]:
    tls = tls_files(tmp_path / "certs")
    with container.running(
        image, tmp_path / "volumes", tls, POLICY.read_text(), ["--no-kube"]
    ) as c:
        wait_ready(c, tls["ca.crt"])
        yield c, tls


def offline_patch() -> list[dict[str, Any]]:
    """``karta-webhook mutate -o patch`` of the review's object (with its namespace)."""
    req = json.loads(REVIEW.read_text())["request"]
    obj = dict(req["object"])
    obj["metadata"] = {**obj["metadata"], "namespace": req["namespace"]}
    out = subprocess.run(
        [sys.executable, "-m", "webhook", "mutate", "-f", "-", "--policy", str(POLICY), "-o", "patch"],
        input=json.dumps(obj), capture_output=True, text=True, cwd=ROOT, check=True, timeout=60,
    )  # fmt: skip
    return list(json.loads(out.stdout))


def test_serves_readyz_metrics_and_mutate_as_offline_mutate(
    served: tuple[container.Container, dict[str, bytes]],
) -> None:
    c, tls = served
    status, body = get(c, "/mutate", tls["ca.crt"])
    assert status == 200, body
    response = json.loads(body)["response"]
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    assert patch == offline_patch()
    assert {op["path"].rsplit("/", 1)[-1] for op in patch} >= {"schedulerName"}
    with urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port}/metrics", timeout=5) as r:
        metrics = r.read().decode()
    assert "karta_webhook_requests_total{" in metrics and 'webhook="mutate"' in metrics


def test_the_images_health_check_passes_in_the_running_container(
    served: tuple[container.Container, dict[str, bytes]],
) -> None:
    c, _ = served
    info = json.loads(container.podman("image", "inspect", c.image).stdout)[0]
    kind, *command = info["Healthcheck"]["Test"]
    assert kind == "CMD"
    out = container.podman("exec", c.id, *command, check=False)
    assert out.returncode == 0, out.stderr


def test_tls_secret_rotated_in_place_is_picked_up(
    served: tuple[container.Container, dict[str, bytes]], tmp_path: Path
) -> None:
    c, tls = served
    new = tls_files(tmp_path / "new-certs")
    assert new["ca.crt"] != tls["ca.crt"]
    container.project(c.volumes / "tls", new)  # the kubelet's atomic ..data swap
    deadline = time.monotonic() + 15
    while True:
        try:
            if get(c, "/readyz", new["ca.crt"], timeout=2)[0] == 200:
                break
        except (OSError, ssl.SSLError):
            pass
        assert time.monotonic() < deadline, f"new certificate not served in 15 s:\n{c.logs()}"
        time.sleep(0.2)
    with pytest.raises(ssl.SSLCertVerificationError):
        get(c, "/readyz", tls["ca.crt"])


def test_sigterm_ends_it_within_the_grace_period(
    served: tuple[container.Container, dict[str, bytes]],
) -> None:
    c, _ = served
    took = c.stop(container.GRACE_SECONDS)
    state = container.podman("inspect", "--format", "{{.State.ExitCode}}", c.id).stdout.strip()
    assert not c.running()
    assert took < container.GRACE_SECONDS, f"stopped in {took:.1f} s:\n{c.logs()}"
    assert state == "0", f"exit code {state} (137: killed after the grace period):\n{c.logs()}"


def test_image_runs_as_65532_and_holds_no_build_tools(image: str) -> None:
    info = json.loads(container.podman("image", "inspect", image).stdout)[0]
    assert info["Config"]["User"] == "65532:65532"
    assert info["Config"]["Entrypoint"] == ["karta-webhook"]
    assert {"8443/tcp", "9090/tcp"} <= set(info["Config"]["ExposedPorts"])
    assert "/healthz" in " ".join(info["Healthcheck"]["Test"])  # kept: --format docker
    assert info["Size"] <= MAX_IMAGE_BYTES, f"{info['Size'] / 1e6:.0f} MB"
    # What a shell in the image finds (the entrypoint replaced by sh for this look only).
    script = (
        "for c in gcc cc g++ make pip pip3 git; do command -v $c; done;"
        "ls -d /src /wheels /opt/build /root/.cache/pip /var/lib/karta-webhook/.cache 2>/dev/null;"
        "find / -xdev \\( -name tests -path '*karta*' -o -name 'test_*.py' -path '*webhook*' \\)"
        " 2>/dev/null; python -c 'import pip' 2>/dev/null && echo pip importable; true"
    )
    found = container.podman(
        "run", "--rm", "--no-healthcheck", "--entrypoint", "sh", image, "-c", script
    ).stdout
    assert found.strip() == "", found
    listed = container.podman(
        "run", "--rm", "--no-healthcheck", "--entrypoint", "cat", image,
        "/opt/karta-webhook/share/pip-list.txt",
    ).stdout  # fmt: skip
    version = _pyproject_version()
    assert f"karta-webhook=={version}" in listed.splitlines()
    inside = {_canonical(line) for line in listed.splitlines() if "==" in line}
    removed = {pin for pin in _runtime_constraints() if pin.split("==")[0] in ASYNC_ONLY.split()}
    assert len(removed) == len(ASYNC_ONLY.split())
    assert inside - {f"karta-webhook=={version}"} == _runtime_constraints() - removed


def _pyproject_version() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def _canonical(pin: str) -> str:
    from packaging.utils import canonicalize_name

    name, version = pin.split("==")
    return f"{canonicalize_name(name)}=={version}"


def _runtime_constraints() -> set[str]:
    """constraints.txt's runtime part (the closure of ``pip install .``)."""
    text = (ROOT / "constraints.txt").read_text().split("# What the test extras add")[0]
    return {_canonical(line) for line in text.splitlines() if line and not line.startswith("#")}
