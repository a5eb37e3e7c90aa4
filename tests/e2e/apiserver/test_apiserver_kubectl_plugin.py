"""``kubectl karta ...`` against the real kube-apiserver (issue 38 item 3): the real kubectl finds
the ``kubectl-karta`` console script on PATH and runs it as a plugin; ``describe KIND/NAME``
reads the cluster of kubectl's current context from the default kubeconfig
(``~/.kube/config``), with no ``--kubeconfig``, and its namespace from the context or ``-n``.

The plugin on PATH is what ``pip install`` makes of the ``[project.scripts]`` entry of
``pyproject.toml`` (a wrapper that imports the entry point and exits with its result), made
here for this checkout so that the test does not depend on how the package was installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kapi
import yaml
from docblocks import block, console_commands, matches
from hooks import serve_env

SAMPLE = kapi.ROOT / "catalog/samples/jobset.x-k8s.io-jobset-v1alpha2/leader-workers.yaml"


def plugin_bin(d: Path) -> Path:
    """A folder holding ``kubectl-karta`` as pip's console-script wrapper would be, from the
    entry point ``pyproject.toml`` names."""
    scripts = tomllib.loads((kapi.ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, func = scripts["kubectl-karta"].split(":")
    assert scripts["karta-webhook"].split(":")[0] == module  # the same CLI
    d.mkdir(parents=True, exist_ok=True)
    exe = d / "kubectl-karta"
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n"
    )
    exe.chmod(0o755)
    return d


def home_with_kubeconfig(plane: kapi.ControlPlane, home: Path, namespace: str | None) -> Path:
    """``home/.kube/config``: the plane's kubeconfig, its context's namespace set."""
    cfg: dict[str, Any] = yaml.safe_load(plane.kubeconfig.read_text())
    if namespace:
        for ctx in cfg["contexts"]:
            ctx["context"]["namespace"] = namespace
    (home / ".kube").mkdir(parents=True, exist_ok=True)
    (home / ".kube" / "config").write_text(yaml.safe_dump(cfg))
    return home


def kubectl_karta(
    plane: kapi.ControlPlane, home: Path, bin_dir: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = serve_env({"HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    env.pop("KUBECONFIG", None)
    env["KUBECACHEDIR"] = str(home / "kubectl-cache")
    return subprocess.run(
        [str(plane.kubectl_path), "karta", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False, cwd=home,
    )  # fmt: skip


def test_kubectl_karta_describe_jobset(
    plane: kapi.ControlPlane, ns: str, workload_crds: dict[str, str], tmp_path: Path
) -> None:
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["metadata"]["namespace"] = ns
    plane.apply([doc])
    bin_dir = plugin_bin(tmp_path / "bin")

    listed = subprocess.run(
        [str(plane.kubectl_path), "plugin", "list", "--name-only"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    assert "kubectl-karta" in listed.stdout, listed.stdout + listed.stderr

    # The default kubeconfig, the namespace given with -n, as kubectl takes it.
    home = home_with_kubeconfig(plane, tmp_path / "home", None)
    out = kubectl_karta(plane, home, bin_dir, "describe", "jobset/trainer", "-n", ns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "JobSet/trainer"
    assert lines[1] == f"  Namespace:   {ns}"
    assert lines[2].startswith("  Definition:  jobset-x-k8s-io-jobset-v1alpha2 (")
    assert "JobSet/trainer: 0/0 ready, 12 GPUs" in out.stdout
    assert "      workers: replicas 2, 0/0 ready, 8 GPUs" in out.stdout

    # README's example, as written but for the namespace (research there, this test's here).
    # The definition may be a Karta another test applied: its origin then says cluster.
    [(cmd, expected)] = console_commands(block("README.md", "readme-kubectl-karta"))
    assert cmd.startswith("kubectl karta ")
    args = cmd.removeprefix("kubectl karta ").replace("research", ns).split()
    out = kubectl_karta(plane, home, bin_dir, *args)
    assert out.returncode == 0, out.stderr
    printed = out.stdout.replace(" (cluster)", " (catalog)").splitlines()
    assert matches([x.replace("research", ns) for x in expected], printed), out.stdout

    # The namespace of kubectl's current context, no -n; JSON as karta-webhook prints it.
    home2 = home_with_kubeconfig(plane, tmp_path / "home2", ns)
    out = kubectl_karta(plane, home2, bin_dir, "describe", "jobset/trainer", "-o", "json")
    assert out.returncode == 0, out.stderr
    view = json.loads(out.stdout)
    assert (view["kind"], view["name"], view["namespace"], view["gpus"]) == (
        "JobSet", "trainer", ns, 12,
    )  # fmt: skip
    direct = subprocess.run(
        [sys.executable, "-m", "webhook", "describe", "jobset/trainer", "-o", "json",
         f"--kubeconfig={home2 / '.kube' / 'config'}"],
        capture_output=True, text=True, env=serve_env(), timeout=120, check=False,
    )  # fmt: skip
    assert direct.returncode == 0, direct.stderr
    same = json.loads(direct.stdout)
    for v in (view, same):
        v.pop("age")
    assert view == same

    # Its own errors keep the CLI's exit codes, and its usage names the plugin.
    out = kubectl_karta(plane, home, bin_dir, "describe", "jobset/nothere", "-n", ns)
    assert out.returncode == 1
    assert f'JobSet "nothere" not found in namespace "{ns}"' in out.stderr
    out = kubectl_karta(plane, home, bin_dir, "frobnicate")
    assert out.returncode == 2
    assert out.stderr.startswith("usage: kubectl karta ")
