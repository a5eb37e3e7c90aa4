"""README's "The image" block run as written, then README's "Talk to the server" against the
container it starts: the image built by ``hack/build-image.sh`` (already built from this
checkout: the block's first command finds it current and returns at once), run as the chart
runs it, answers README's AdmissionReview with README's patch.

The one change, as in ``test_docs_readme``: the published port, 8443 in README, is a free one.
The container is removed by the id ``podman run -d`` printed.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import container
from docblocks import block
from running import free_port

ROOT = container.ROOT


def test_readme_runs_the_image_and_talks_to_it(tmp_path: Path) -> None:
    image = container.image()
    run = block("README.md", "readme-run-image")
    assert image in run
    assert run.count("127.0.0.1:8443:8443") == 1
    port = free_port()
    work = tmp_path / "work"
    work.mkdir()
    for name in ("examples", "hack"):
        (work / name).symlink_to(ROOT / name)
    env = container.env()
    env.pop("CONTAINERS_CONF")  # the block exports it
    started = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", run.replace("127.0.0.1:8443:", f"127.0.0.1:{port}:")],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    cid = started.stdout.strip().splitlines()[-1] if started.stdout.strip() else ""
    try:
        assert started.returncode == 0, started.stderr + started.stdout
        c = container.Container(cid, image, port, 0, work)
        talk = block("README.md", "readme-talk-to-the-server")
        ca = work / "certs" / "ca.crt"
        deadline = time.monotonic() + 30
        while True:
            probe = subprocess.run(
                ["curl", "-sf", "--cacert", str(ca), f"https://localhost:{port}/readyz"],
                capture_output=True, check=False,
            )  # fmt: skip
            if probe.returncode == 0:
                break
            assert c.running(), c.logs()
            assert time.monotonic() < deadline, f"/readyz not answered in 30 s:\n{c.logs()}"
            time.sleep(0.2)
        ran = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", talk.replace(":8443/", f":{port}/")],
            cwd=work, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr + ran.stdout + c.logs()
        text = ran.stdout
        ops = json.loads(text[text.index("[") : text.rindex("]") + 1])
        paths = {op["path"] for op in ops}
        assert "/spec/replicatedJobs/0/template/spec/template/spec/schedulerName" in paths
        assert any(p.endswith("/labels/kai.scheduler~1queue") for p in paths)
        assert "karta_webhook_requests_total" in text[text.rindex("]") :]
    finally:
        if cid:
            container.podman("rm", "--force", "--time", "0", cid, check=False)
