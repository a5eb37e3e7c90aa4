"""``karta-webhook serve`` as a user runs it beside a real API server: a subprocess over real TLS
on 127.0.0.1, registered with the webhook configurations that ``karta-webhook manifests --url``
generates, and probed through the API server until the registration is in effect.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kapi import ROOT, ControlPlane, free_port

PROBE_SECONDS = 30


def serve_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def karta(*args: str, input: str | None = None, check: bool = True) -> str:
    """The CLI as a user runs it (``python -m webhook``), from this checkout."""
    out = subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        input=input, capture_output=True, text=True, env=serve_env(), timeout=120, check=False,
    )  # fmt: skip
    if check and out.returncode != 0:
        raise AssertionError(
            f"karta-webhook {' '.join(args)} exited {out.returncode}:\n{out.stderr}"
        )
    return out.stdout


@dataclass
class Webhook:
    """A running ``serve``; ``ca`` is the CA its development certificate chains to."""

    dir: Path
    port: int
    proc: subprocess.Popen[bytes]
    policy: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca(self) -> Path:
        return self.dir / "certs" / "ca.crt"

    @property
    def log(self) -> Path:
        return self.dir / "serve.log"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def healthy(self) -> bool:
        import ssl
        import urllib.request

        try:  # the server makes its development CA at start: none yet is "not yet"
            ctx = ssl.create_default_context(cafile=str(self.ca))
            with urllib.request.urlopen(f"{self.url}/healthz", context=ctx, timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def readyz(self) -> dict[str, Any]:
        import ssl
        import urllib.request

        ctx = ssl.create_default_context(cafile=str(self.ca))
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", context=ctx, timeout=5) as r:
                return dict(json.loads(r.read()))
        except urllib.error.HTTPError as e:
            return dict(json.loads(e.read()))

    def stop(self) -> None:
        """SIGTERM the process group it leads (gunicorn's master, its workers, their sandbox
        children), SIGKILL after 20 s."""
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def start_webhook(
    d: Path,
    policy: str,
    args: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    certs_from: Path | None = None,
    port: int | None = None,
) -> Webhook:
    """Start ``serve`` with a development certificate for 127.0.0.1 made in ``d/certs`` (or
    the one in ``certs_from``, so two servers share a CA), ``policy`` as its policy file."""
    d.mkdir(parents=True, exist_ok=True)
    if certs_from is not None and not (d / "certs").exists():
        (d / "certs").symlink_to(certs_from)
    policy_file = d / "policy.yaml"
    policy_file.write_text(policy)
    port = port or free_port()
    cmd = [
        sys.executable, "-m", "webhook", "serve", "--host=127.0.0.1", f"--port={port}",
        f"--certs-dir={d / 'certs'}", f"--policy={policy_file}", *args,
    ]  # fmt: skip
    with (d / "serve.log").open("ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=d, env=serve_env(env), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    hook = Webhook(d, port, proc, policy_file)
    deadline = time.monotonic() + 60
    while not hook.healthy() or _loading(hook):
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}:\n{hook.log_text()}")
        if time.monotonic() > deadline:
            hook.stop()
            raise AssertionError(f"serve did not answer /healthz in 60 s:\n{hook.log_text()}")
        time.sleep(0.2)
    return hook


def _loading(hook: Webhook) -> bool:
    """Whether ``hook`` still loads its definitions (the probes of webhook.server.early)."""
    try:
        return bool(hook.readyz().get("loading"))
    except (OSError, ValueError):
        return True


def configurations(
    hook: Webhook,
    *,
    policy: Path | None = None,
    failure_policy: str | None = None,
    namespace: str | None = None,
) -> list[dict[str, Any]]:
    """What ``karta-webhook manifests --url`` prints for ``hook`` (its CA as caBundle; with
    ``namespace``, the namespace it excludes beside kube-system), with the workloads webhook's
    failurePolicy changed when asked."""
    args = ["manifests", f"--url={hook.url}", f"--ca-bundle={hook.ca}"]
    if namespace is not None:
        args.append(f"--namespace={namespace}")
    if policy is not None:
        args.append(f"--policy={policy}")
    docs = list(yaml.safe_load_all(karta(*args)))
    if failure_policy is not None:
        for hook_def in docs[0]["webhooks"]:
            if hook_def["name"].startswith("workloads."):
                hook_def["failurePolicy"] = failure_policy
    return docs


def register(plane: ControlPlane, docs: list[dict[str, Any]]) -> None:
    plane.apply(docs)


def unregister(plane: ControlPlane) -> None:
    plane.kubectl(
        "delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
        "-l", "app.kubernetes.io/name=karta-webhook", "--ignore-not-found", "--wait=false",
    )  # fmt: skip


def wait_until(what: str, ok: Callable[[], bool], seconds: float = PROBE_SECONDS) -> None:
    """Poll ``ok`` until it holds (the API server picks up webhook configurations, CRDs and
    RBAC changes asynchronously); fail naming ``what``."""
    deadline = time.monotonic() + seconds
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"not in {seconds:.0f} s: {what}")
        time.sleep(0.25)


def probe_pod(namespace: str, name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name or f"probe-{uuid.uuid4().hex[:8]}", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def mutated_by_webhook(plane: ControlPlane, namespace: str, scheduler: str) -> bool:
    """A server-side dry-run Pod create comes back with ``scheduler`` as its schedulerName."""
    status, body = plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", probe_pod(namespace)
    )
    return status == 201 and body["spec"].get("schedulerName") == scheduler


# -- one webhook per test module, and the bundled samples as objects to create


@contextmanager
def registered(
    plane: ControlPlane,
    d: Path,
    policy: str,
    what: str,
    ready: Callable[[str], bool],
    args: Sequence[str] = ("--no-kube",),
) -> Iterator[Webhook]:
    """``serve`` with ``policy`` in ``d``, registered as ``manifests --url --policy`` prints it
    (the workloads webhook with ``failurePolicy: Fail``) until ``ready(namespace)`` holds for
    a probe namespace of its own (``what`` names it in the failure); unregistered and stopped
    when the block ends."""
    served = start_webhook(d, policy, list(args))
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    plane.kubectl("create", "namespace", probe)
    try:
        register(plane, configurations(served, policy=served.policy, failure_policy="Fail"))
        wait_until(what, lambda: ready(probe))
        yield served
    finally:
        unregister(plane)
        served.stop()


def catalog_sample(
    stem: str, name: str | None, namespace: str, object_name: str | None = None
) -> dict[str, Any]:
    """A bundled sample (``catalog/samples/STEM/NAME``, the first when NAME is None) as a
    new object in ``namespace``: no status, metadata reduced to its labels, named
    ``object_name`` (default: the sample's name, or a new one when it has none)."""
    folder = ROOT / "catalog" / "samples" / stem
    doc = yaml.safe_load(
        (folder / (name or sorted(p.name for p in folder.iterdir())[0])).read_text()
    )
    doc.pop("status", None)
    meta = doc.get("metadata") or {}
    doc["metadata"] = {
        "name": object_name or meta.get("name") or f"x-{uuid.uuid4().hex[:6]}",
        "namespace": namespace,
    }
    if "labels" in meta:
        doc["metadata"]["labels"] = meta["labels"]
    return dict(doc)


def create_and_read(plane: ControlPlane, collection: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` to ``collection`` and return what the API server stored (asserting both)."""
    status, created = plane.request("POST", collection, body)
    assert status == 201, created
    status, stored = plane.request("GET", f"{collection}/{created['metadata']['name']}")
    assert status == 200, stored
    return dict(stored)


def dry_run(plane: ControlPlane, collection: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """What a server-side dry-run create of ``body`` returns, None when it is refused."""
    status, out = plane.request("POST", f"{collection}?dryRun=All", body)
    return dict(out) if status == 201 else None
