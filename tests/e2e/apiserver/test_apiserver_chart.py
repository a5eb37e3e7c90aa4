"""The Helm chart against a real API server: every object it renders passes the API server's own
validation (defaulting, schemas, webhook-configuration rules, RBAC escalation checks), with the
defaults and with nearly every value set, in ``karta-system`` and in another namespace; and
``helm install`` itself, as an admin runs it, installs and uninstalls the release.

As in ``test_apiserver_kustomize.py``, the namespace and the CRD are applied for real and the
rest with a server-side dry run (no controller runs here, and live webhook configurations that
point at a Service nobody serves would stand in the way of the other tests). Not checked here:
the ServiceMonitor, PodMonitor (Prometheus Operator) and cert-manager Issuer and Certificate
kinds, whose CRDs this API server does not have; their objects are left out of the dry runs
(``tests/install/test_chart.py`` checks them against the kustomize components and overlay).

``helm install --dry-run=server`` (helm v4.3) renders with the cluster's version and lookups
but sends no object to the API server for a dry run; a test below holds that, and why
docs/install.md tells admins to pipe ``helm template`` into ``kubectl apply --dry-run=server``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kapi
import pytest
import yaml
from test_chart import Helm as OfflineHelm

CHART = kapi.ROOT / "charts" / "karta-webhook"
MANIFESTS = kapi.ROOT / "manifests"
#: Kinds whose CRDs this API server does not have (Prometheus Operator, cert-manager).
NO_CRD_HERE = {"monitoring.coreos.com", "cert-manager.io"}

Obj = dict[str, Any]


class Helm(OfflineHelm):
    """The offline tests' helm runner, pointed at the test API server."""

    def __init__(self, binary: Path, home: Path, kubeconfig: Path) -> None:
        super().__init__(binary, home)
        self.env["KUBECONFIG"] = str(kubeconfig)

    def values(self, values: Obj) -> list[str]:
        path = self.home / f"values-{uuid.uuid4().hex[:8]}.yaml"
        path.write_text(yaml.safe_dump(values))
        return ["-f", str(path)]

    def template(self, namespace: str, values: Obj | None = None) -> list[Obj]:
        out = self.run(
            "template",
            "karta-webhook",
            str(CHART),
            "--namespace",
            namespace,
            "--include-crds",
            *self.values(values or {}),
        ).stdout
        return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="module")
def helm(plane: kapi.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    binary = kapi.tools_dir() / "helm"
    if not os.access(binary, os.X_OK):
        message = f"no helm in {binary.parent}: run hack/build-tools.sh"
        if os.environ.get("CI"):
            pytest.fail(f"CI: {message}", pytrace=False)
        pytest.skip(message)
    yield Helm(binary, tmp_path_factory.mktemp("helm-home"), plane.kubeconfig)


def _group(obj: Obj) -> str:
    return obj["apiVersion"].rpartition("/")[0]


def accepted_in_a_dry_run(plane: kapi.ControlPlane, docs: list[Obj]) -> list[Obj]:
    """Apply the Namespace and CRD for real, dry-run the rest on the server; every object must
    come back as "(server dry run)" and without a warning. Returns the dry-run objects."""
    for d in docs:
        if d["kind"] in ("Namespace", "CustomResourceDefinition"):
            plane.kubectl(
                "apply",
                "--server-side",
                "--field-manager=chart-e2e",
                "-f",
                "-",
                input=yaml.safe_dump(d),
            )
    rest = [d for d in docs if _group(d) not in NO_CRD_HERE]
    out = plane.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(rest), check=False
    )
    assert out.returncode == 0, out.stderr
    warnings = [w for w in out.stderr.splitlines() if "last-applied-configuration" not in w]
    assert not warnings, out.stderr
    for d in rest:
        kind, name = d["kind"].lower(), d["metadata"]["name"]
        assert any(
            line.split()[0].split("/")[0].startswith(kind)
            and line.split()[0].endswith(f"/{name}")
            and line.endswith("(server dry run)")
            for line in out.stdout.splitlines()
        ), f"{d['kind']}/{name} not in:\n{out.stdout}"
    assert out.stdout.count("(server dry run)") == len(rest)
    return rest


def _fresh_namespace() -> str:
    return f"kw-{uuid.uuid4().hex[:8]}"


def test_the_chart_defaults_are_accepted(plane: kapi.ControlPlane, helm: Helm) -> None:
    docs = helm.template("karta-system")
    assert "Namespace" not in {d["kind"] for d in docs}
    plane.kubectl("create", "namespace", "karta-system", check=False)  # --create-namespace
    accepted_in_a_dry_run(plane, docs)


def _most_values(plane: kapi.ControlPlane) -> Obj:
    """Every value away from its default, but the monitors and cert-manager (kinds without a
    CRD here): certificates from a given Secret with the CA in caBundle instead."""
    trainer = {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "chart-e2e-trainer"},
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "name": "trainer",
                    "kind": {"group": "training.example.com", "version": "v1", "kind": "Trainer"},
                    "specDefinition": {"podTemplateSpecPath": ".spec.groups[].template"},
                }
            }
        },
    }
    return {
        "image": {"repository": "registry.example.com/kw", "tag": "9.9.9", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "pull"}],
        "replicas": 3,
        "namespace": {"create": True},
        "policy": {
            "operations": ["CREATE", "UPDATE"],
            "rules": [{"name": "gpu", "schedulerName": "kai-scheduler", "overwrite": True}],
        },
        "failureMode": "closed",
        "failurePolicy": "Fail",
        "catalog": {"trainer": yaml.safe_dump(trainer)},
        "installCatalog": True,
        "manageWebhooks": False,
        "extraWorkloadRules": [
            {
                "apiGroups": ["training.example.com"],
                "apiVersions": ["v1"],
                "resources": ["trainers"],
                "operations": ["CREATE"],
                "scope": "Namespaced",
            }
        ],
        "certificates": {
            "mode": "secret",
            "secretName": "corp-tls",
            "caBundle": plane.ca.read_text(),
        },
        "resources": {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "infra", "operator": "Exists"}]}
                    ]
                }
            }
        },
        "podDisruptionBudget": {"enabled": True, "minAvailable": "50%"},
        "networkPolicy": {
            "enabled": True,
            "metricsFrom": [{"podSelector": {"matchLabels": {"app": "prometheus"}}}],
        },
        "extraArgs": ["--live-samples", "5"],
    }


def test_the_chart_with_most_values_in_another_namespace_is_accepted(
    plane: kapi.ControlPlane, helm: Helm
) -> None:
    ns = _fresh_namespace()
    docs = helm.template(ns, _most_values(plane))
    assert "karta-system" not in yaml.safe_dump_all(docs)
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "Karta", "ConfigMap", "Deployment"} <= kinds
    rest = accepted_in_a_dry_run(plane, docs)
    assert len([d for d in rest if d["kind"] == "Karta"]) == len(
        list((kapi.ROOT / "catalog").glob("*.yaml"))
    )
    ns_labels = plane.get_json("namespace", ns)["metadata"]["labels"]
    assert ns_labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_chart_in_cert_manager_mode_is_accepted(plane: kapi.ControlPlane, helm: Helm) -> None:
    """The webhook configurations with cainjector's annotation, the Deployment mounting the
    Secret cert-manager writes (the Issuers and Certificates themselves: no CRD here)."""
    ns = _fresh_namespace()
    docs = helm.template(
        ns, {"certificates": {"mode": "certManager"}, "namespace": {"create": True}}
    )
    assert {_group(d) for d in docs} & NO_CRD_HERE == {"cert-manager.io"}
    accepted_in_a_dry_run(plane, docs)


def test_a_kustomize_overlay_in_another_namespace_is_accepted(
    plane: kapi.ControlPlane, tmp_path: Path
) -> None:
    """docs/install.md's recipe: ``namespace:`` plus ``manifests/namespace`` as a transformer."""
    ns = _fresh_namespace()
    rel = os.path.relpath(MANIFESTS, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "namespace": ns,
                "resources": [f"{rel}/cert-manager"],
                "transformers": [f"{rel}/namespace"],
            }
        )
    )
    text = plane.kubectl("kustomize", str(tmp_path)).stdout
    assert "karta-system" not in text
    accepted_in_a_dry_run(plane, [d for d in yaml.safe_load_all(text) if d])


def _cluster_objects(plane: kapi.ControlPlane) -> list[str]:
    kinds = (
        "clusterrole,clusterrolebinding,mutatingwebhookconfiguration,validatingwebhookconfiguration"
    )
    out = plane.kubectl("get", kinds, "-l", "app.kubernetes.io/name=karta-webhook", "-o", "name")
    return sorted(out.stdout.split())


def _no_other_owners(plane: kapi.ControlPlane) -> None:
    """Cluster-scoped objects of the release's names that another test applied (manifests/base's
    RBAC, webhook configurations) are not a release's to own, and helm refuses to install over
    them (``invalid ownership metadata``), even in a dry run: removed first."""
    plane.kubectl(
        "delete", "clusterrole,clusterrolebinding,mutatingwebhookconfiguration,"
        "validatingwebhookconfiguration", "-l", "app.kubernetes.io/name=karta-webhook",
        "--ignore-not-found",
    )  # fmt: skip
    assert _cluster_objects(plane) == []


def test_helm_dry_run_server_renders_against_the_cluster_but_validates_nothing(
    plane: kapi.ControlPlane, helm: Helm
) -> None:
    """What admins try first: it passes (the cluster's version meets kubeVersion) ... and would
    pass an object the API server refuses, which ``kubectl apply --dry-run=server`` catches."""
    _no_other_owners(plane)
    ns = _fresh_namespace()
    install = ["install", "karta-webhook", str(CHART), "-n", ns, "--dry-run=server"]
    out = helm.run(*install)
    assert "STATUS: pending-install" in out.stdout and "Dry run complete" in out.stdout
    bad = helm.run(*install, "--set", "priorityClassName=Not_A_Name", check=False)
    assert bad.returncode == 0, bad.stderr
    plane.kubectl("create", "namespace", ns)
    docs = helm.template(ns, {"priorityClassName": "Not_A_Name"})
    refused = plane.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(docs), check=False
    )
    assert refused.returncode != 0 and "priorityClassName" in refused.stderr


def test_helm_install_and_uninstall(plane: kapi.ControlPlane, helm: Helm) -> None:
    """``helm install --create-namespace`` as an admin runs it (helm v4: server-side apply),
    then ``helm uninstall``: every object is created in the release namespace, the CRD from
    ``crds/`` is kept, and uninstall removes the rest, webhook configurations included."""
    _no_other_owners(plane)
    ns = _fresh_namespace()
    try:
        out = helm.run("install", "karta-webhook", str(CHART), "-n", ns, "--create-namespace")
        assert "STATUS: deployed" in out.stdout
        assert _cluster_objects(plane) == [
            "clusterrole.rbac.authorization.k8s.io/karta-webhook",
            "clusterrolebinding.rbac.authorization.k8s.io/karta-webhook",
            "mutatingwebhookconfiguration.admissionregistration.k8s.io/karta-webhook",
            "validatingwebhookconfiguration.admissionregistration.k8s.io/karta-webhook",
        ]
        names = plane.kubectl(
            "get",
            "deployment,service,serviceaccount,configmap,role,rolebinding,"
            "poddisruptionbudget,networkpolicy",
            "-n",
            ns,
            "-l",
            "app.kubernetes.io/instance=karta-webhook",
            "-o",
            "name",
        ).stdout.split()
        assert len(names) == 8, names
        mwc = plane.get_json("mutatingwebhookconfiguration", "karta-webhook")
        assert mwc["webhooks"][0]["clientConfig"]["service"]["namespace"] == ns
        assert mwc["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == [
            "kube-system",
            ns,
        ]
    finally:
        helm.run("uninstall", "karta-webhook", "-n", ns, check=False)
        # Never leave webhooks behind for the other tests (the Karta one fails closed).
        plane.kubectl(
            "delete",
            "mutatingwebhookconfiguration,validatingwebhookconfiguration",
            "-l",
            "app.kubernetes.io/instance=karta-webhook",
            "--ignore-not-found",
            check=False,
        )
    assert _cluster_objects(plane) == []
    assert plane.get_json("crd", "kartas.run.ai")["metadata"]["name"] == "kartas.run.ai"
