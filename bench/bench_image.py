"""The image's figures (issue 47's goals): its size by layer, a code-only rebuild, start to the
first 200 on ``/readyz`` and SIGTERM to stopped, the container run as the chart runs it
(``tests/e2e/container.py``), each start beside one of the same server as a process (``serve``
from the checkout, interleaved: what the container adds).

    python bench/bench_image.py [--runs N] [--no-rebuild]

Needs the image built from this checkout (``hack/build-image.sh``). The rebuild copies the
build context to a temporary folder, changes one line under ``webhook/`` and builds it as
``localhost/karta-webhook:bench`` (the checkout and its image are left alone), after one build of
the unchanged copy under that tag so that only the change is timed; the tag is removed at the
end. CPU figures are noisy on a shared machine: compare runs made side by side.
"""

from __future__ import annotations

import argparse
import json
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "e2e")]

import container  # noqa: E402
from running import NAMESPACE, SERVICE, TLSConn, start  # noqa: E402

from webhook.server.certs import write_certs  # noqa: E402

CONTEXT = ["Dockerfile", ".dockerignore", "constraints.txt", "pyproject.toml", "README.md"]
BENCH_TAG = "localhost/karta-webhook:bench"


def layers(image: str) -> list[tuple[int, str]]:
    out = container.podman("history", "--format", "json", image).stdout
    return [(int(h["size"]), h["CreatedBy"][:70]) for h in json.loads(out) if int(h["size"])]


def build(context: Path, tag: str) -> float:
    start = time.monotonic()
    ca = "/etc/ssl/certs/ca-certificates.crt"
    container.podman(
        "build", "--quiet", "--format", "docker", "-v", f"{ca}:{ca}:ro",
        "--build-arg", "BASE_IMAGE=localhost/karta-base:bookworm", "-t", tag, str(context),
        timeout=1800,
    )  # fmt: skip
    return time.monotonic() - start


def rebuild() -> tuple[float, float]:
    """Seconds for a build of an unchanged copy, then for one with a line of webhook/ changed."""
    with tempfile.TemporaryDirectory() as d:
        ctx = Path(d)
        for name in CONTEXT:
            shutil.copy2(ROOT / name, ctx / name)
        for tree in ("webhook", "catalog"):
            shutil.copytree(ROOT / tree, ctx / tree, ignore=shutil.ignore_patterns("__pycache__"))
        unchanged = build(ctx, BENCH_TAG)
        init = ctx / "webhook" / "__init__.py"
        init.write_text(init.read_text() + f"# bench {time.time_ns()}\n")
        changed = build(ctx, BENCH_TAG)
    container.podman("rmi", "--force", BENCH_TAG, check=False)
    return unchanged, changed


def start_and_stop(image: str, tmp: Path) -> tuple[float, float]:
    """Seconds from ``podman run -d`` to the first 200 on /readyz, and from SIGTERM to stopped."""
    paths = write_certs(tmp / "certs", SERVICE, NAMESPACE)
    tls = {
        "tls.crt": paths.cert.read_bytes(),
        "tls.key": paths.key.read_bytes(),
        "ca.crt": paths.ca_cert.read_bytes(),
    }
    policy = (ROOT / "examples" / "policy.yaml").read_text()
    ctx = ssl.create_default_context(cadata=tls["ca.crt"].decode())
    t0 = time.monotonic()
    c = container.run(image, tmp / "volumes", tls, policy, ["--no-kube"])
    try:
        while True:
            try:
                conn = TLSConn(c.port, ctx, 2)
                conn.request("GET", "/readyz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() - t0 > 60:
                raise SystemExit(f"/readyz not answered in 60 s:\n{c.logs()}")
            time.sleep(0.05)
        ready = time.monotonic() - t0
        stopped = c.stop(container.GRACE_SECONDS)
        return ready, stopped
    finally:
        c.remove()


def local_start(tmp: Path) -> float:
    """The same server as a process of this machine (``serve`` from the checkout, no
    container): seconds from its start to the first 200 on /readyz."""
    t0 = time.monotonic()
    server = start(tmp, (ROOT / "examples" / "policy.yaml").read_text(), wait=60)
    try:
        while server.request("GET", "/readyz", timeout=2)[0] != 200:
            time.sleep(0.05)
        return time.monotonic() - t0
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-rebuild", action="store_true")
    args = ap.parse_args()
    image = container.find_image()
    size = int(container.podman("image", "inspect", "--format", "{{.Size}}", image).stdout)
    print(f"{image}: {size / 1e6:.1f} MB")
    for n, what in layers(image):
        print(f"  {n / 1e6:7.1f} MB  {what}")
    if not args.no_rebuild:
        unchanged, changed = rebuild()
        print(
            f"build, nothing changed: {unchanged:.1f} s; one line of webhook/ changed: {changed:.1f} s"
        )
    ready, stop, local = [], [], []
    for _ in range(args.runs):  # interleaved: the container, then the same server as a process
        with tempfile.TemporaryDirectory() as d:
            r, s = start_and_stop(image, Path(d))
        ready.append(r)
        stop.append(s)
        with tempfile.TemporaryDirectory() as d:
            local.append(local_start(Path(d)))
    for name, xs in (
        ("run to /readyz 200", ready),
        ("SIGTERM to stopped", stop),
        ("the same server as a process, start to /readyz 200", local),
    ):
        print(
            f"{name}: median {statistics.median(xs):.2f} s, "
            f"min {min(xs):.2f}, max {max(xs):.2f} ({len(xs)} runs)"
        )


if __name__ == "__main__":
    main()
