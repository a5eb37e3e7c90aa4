"""``kubectl apply -k manifests/`` against a real API server: every object of the kustomize
base passes the API server's own validation (defaulting, schemas, webhook-configuration
rules, RBAC escalation checks, Pod Security admission of the Deployment's pods)."""

from __future__ import annotations

import kapi
import yaml

MANIFESTS = kapi.ROOT / "manifests"


def test_the_kustomize_base_is_accepted_in_full(plane: kapi.ControlPlane) -> None:
    docs = list(yaml.safe_load_all(plane.kubectl("kustomize", str(MANIFESTS)).stdout))
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "CustomResourceDefinition", "Deployment", "ClusterRole"} <= kinds
    # The namespace and the CRD for real (other objects live in the one or need the other);
    # the rest server-side dry-run: a Deployment needs a controller, and live webhook
    # configurations pointing at a Service nobody serves would get in the other tests' way.
    for d in docs:
        if d["kind"] in ("Namespace", "CustomResourceDefinition"):
            plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(d))
    out = plane.kubectl("apply", "-k", str(MANIFESTS), "--dry-run=server", check=False)
    assert out.returncode == 0, out.stderr
    warnings = [  # e.g. Pod Security would warn here; kubectl's own bookkeeping aside
        w for w in out.stderr.splitlines() if "last-applied-configuration" not in w
    ]
    assert not warnings, out.stderr
    for d in docs:
        kind = d["kind"].lower()
        name = d["metadata"]["name"]
        assert any(
            line.split()[0].split("/")[0].startswith(kind) and line.split()[0].endswith(f"/{name}")
            for line in out.stdout.splitlines()
        ), f"{d['kind']}/{name} not in:\n{out.stdout}"
    assert out.stdout.count("(server dry run)") == len(docs)
