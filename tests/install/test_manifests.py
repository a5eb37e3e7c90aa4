"""The kustomize manifests: valid for Kubernetes 1.31, secure, and wired together correctly.

The kustomizations are built with a tiny in-Python subset of kustomize (resources, namespace,
strategic-merge patches of maps, replacement transformers). When ``kubectl`` (with its
built-in kustomize) or ``kustomize`` is installed, the real build is run as well and must
produce the same objects, so the subset cannot drift from what ``kubectl apply -k`` does.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from webhook.karta.statusmodel import STATUS_ORDER

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
K8S_VERSION = "1.31"
NS = "karta-system"
APP = "karta-webhook"

Obj = dict[str, Any]

CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}
# Kinds whose schemas are not part of Kubernetes (kubernetes_validate cannot check them).
THIRD_PARTY = {("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate")}


# --------------------------------------------------------------------------------------------
# a minimal kustomize


def _load_docs(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _merge(base: Any, patch: Any) -> Any:
    """Strategic merge of maps (lists are replaced: enough for the patches used here)."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(patch)


def _key(obj: Obj) -> tuple[str, str, str]:
    return obj["apiVersion"], obj["kind"], obj["metadata"]["name"]


def _set_namespace(obj: Obj, namespace: str) -> None:
    kind = obj["kind"]
    if kind not in CLUSTER_SCOPED:
        obj["metadata"]["namespace"] = namespace
    if kind in {"RoleBinding", "ClusterRoleBinding"}:
        for subject in obj.get("subjects", []):
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = namespace
    if kind in {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}:
        for hook in obj.get("webhooks", []):
            service = hook.get("clientConfig", {}).get("service")
            if service:
                service["namespace"] = namespace


_PATH_PART = re.compile(r"\[[^\]]*\]|[^.\[]+")


def _step(node: Any, part: str) -> tuple[Any, Any]:
    """The container and key that one part of a kustomize field path names in ``node``:
    ``name``, ``[dotted.key]``, ``[field=value]`` (the list item with it), ``3`` (an index)."""
    if part.startswith("["):
        inner = part[1:-1]
        if "=" in inner:
            key, value = inner.split("=", 1)
            (index,) = [i for i, item in enumerate(node) if item.get(key) == value]
            return node, index
        return node, inner
    return node, int(part) if isinstance(node, list) else part


def _locate(obj: Obj, field_path: str) -> tuple[Any, Any]:
    node: Any = obj
    *parents, last = _PATH_PART.findall(field_path)
    for part in parents:
        container, key = _step(node, part)
        node = container[key]
    return _step(node, last)


def _selected(obj: Obj, select: Obj) -> bool:
    assert set(select) <= {"kind", "name", "annotationSelector", "fieldPath"}, select
    if select.get("kind", obj["kind"]) != obj["kind"]:
        return False
    if select.get("name", obj["metadata"]["name"]) != obj["metadata"]["name"]:
        return False
    if "annotationSelector" in select:  # "key" (exists) or "key=value"
        key, _, value = select["annotationSelector"].partition("=")
        annotations = obj["metadata"].get("annotations") or {}
        return key in annotations and (not value or annotations[key] == value)
    return True


def _replace(objects: list[Obj], config: Obj) -> None:
    """A ``ReplacementTransformer`` (the subset used: whole values, or one part of a value
    split at a delimiter)."""
    assert (config["apiVersion"], config["kind"]) == ("builtin", "ReplacementTransformer")
    for replacement in config["replacements"]:
        source = replacement["source"]
        (origin,) = [o for o in objects if _selected(o, source)]
        container, key = _locate(origin, source["fieldPath"])
        value = container[key]
        for target in replacement["targets"]:
            options = target.get("options", {})
            assert set(options) <= {"delimiter", "index"}, options
            for obj in (o for o in objects if _selected(o, target["select"])):
                for field_path in target["fieldPaths"]:
                    container, key = _locate(obj, field_path)
                    new = value
                    if "delimiter" in options:
                        parts = container[key].split(options["delimiter"])
                        parts[options.get("index", 0)] = value
                        new = options["delimiter"].join(parts)
                    container[key] = new


def python_build(directory: Path) -> list[Obj]:
    """``kustomize build`` for the subset of features the manifests use."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    supported = {"apiVersion", "kind", "namespace", "resources", "patches", "transformers"}
    unsupported = set(kustomization) - supported
    assert not unsupported, f"the in-Python build does not implement {sorted(unsupported)}"
    objects: list[Obj] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        objects += python_build(path) if path.is_dir() else _load_docs(path)
    for patch in kustomization.get("patches", []):
        assert set(patch) == {"path"}, "only strategic-merge patch files are implemented"
        for doc in _load_docs(directory / patch["path"]):
            matches = [i for i, o in enumerate(objects) if _key(o) == _key(doc)]
            assert len(matches) == 1, f"patch target {_key(doc)} not found exactly once"
            objects[matches[0]] = _merge(objects[matches[0]], doc)
    if "namespace" in kustomization:
        for obj in objects:
            _set_namespace(obj, kustomization["namespace"])
    for entry in kustomization.get("transformers", []):  # after the built-in ones, as kustomize
        path = (directory / entry).resolve()
        for config in python_build(path) if path.is_dir() else _load_docs(path):
            _replace(objects, config)
    keys = [_key(o) for o in objects]
    assert len(keys) == len(set(keys)), "duplicate objects"
    return objects


def _tool_build(directory: Path) -> list[Obj] | None:
    if shutil.which("kubectl"):
        cmd = ["kubectl", "kustomize", str(directory)]
    elif shutil.which("kustomize"):
        cmd = ["kustomize", "build", str(directory)]
    else:
        return None
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


KUSTOMIZATIONS = {
    "base": MANIFESTS,
    "cert-manager": MANIFESTS / "cert-manager",
}


@pytest.fixture(scope="module", params=sorted(KUSTOMIZATIONS))
def build(request: pytest.FixtureRequest) -> list[Obj]:
    return python_build(KUSTOMIZATIONS[request.param])


@pytest.fixture(scope="module")
def base() -> list[Obj]:
    return python_build(MANIFESTS)


@pytest.fixture(scope="module")
def overlay() -> list[Obj]:
    return python_build(MANIFESTS / "cert-manager")


def find(objects: list[Obj], kind: str, name: str = APP) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: found {len(found)}"
    return found[0]


@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_python_build_matches_kustomize(name: str) -> None:
    real = _tool_build(KUSTOMIZATIONS[name])
    if real is None:
        pytest.skip("neither kubectl nor kustomize installed; relying on the in-Python build")
    ours = python_build(KUSTOMIZATIONS[name])
    assert sorted(map(_key, real)) == sorted(map(_key, ours))
    by_key = {_key(o): o for o in real}
    for obj in ours:
        assert obj == by_key[_key(obj)], f"{_key(obj)} differs from kustomize's build"


def test_base_contents(base: list[Obj]) -> None:
    assert sorted((o["kind"], o["metadata"]["name"]) for o in base) == sorted(
        [
            ("Namespace", NS),
            ("CustomResourceDefinition", "kartas.run.ai"),
            ("CustomResourceDefinition", "kartapolicies.policies.karta-webhook.run.ai"),
            ("CustomResourceDefinition", "kartanamespacepolicies.policies.karta-webhook.run.ai"),
            ("ServiceAccount", APP),
            ("ClusterRole", APP),
            ("ClusterRoleBinding", APP),
            ("Role", APP),
            ("RoleBinding", APP),
            ("ConfigMap", "karta-webhook-policy"),
            ("Deployment", APP),
            ("PodDisruptionBudget", APP),
            ("Service", APP),
            ("NetworkPolicy", APP),
            ("MutatingWebhookConfiguration", APP),
            ("ValidatingWebhookConfiguration", APP),
        ]
    )


# --------------------------------------------------------------------------------------------
# schemas


def test_every_object_is_valid_for_kubernetes_1_31(build: list[Obj]) -> None:
    for obj in build:
        if (obj["apiVersion"], obj["kind"]) in THIRD_PARTY:
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_namespaces(build: list[Obj]) -> None:
    for obj in build:
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in obj["metadata"], _key(obj)
        else:
            assert obj["metadata"]["namespace"] == NS, _key(obj)
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == APP, _key(obj)


def test_cert_manager_objects(overlay: list[Obj]) -> None:
    selfsigned = find(overlay, "Issuer", "karta-webhook-selfsigned")
    assert selfsigned["apiVersion"] == "cert-manager.io/v1"
    assert selfsigned["spec"] == {"selfSigned": {}}

    ca = find(overlay, "Certificate", "karta-webhook-ca")
    assert ca["apiVersion"] == "cert-manager.io/v1"
    assert ca["spec"]["isCA"] is True
    assert ca["spec"]["issuerRef"]["name"] == "karta-webhook-selfsigned"
    assert ca["spec"]["issuerRef"]["kind"] == "Issuer"

    ca_issuer = find(overlay, "Issuer", "karta-webhook-ca")
    assert ca_issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]

    serving = find(overlay, "Certificate", "karta-webhook-serving")
    spec = serving["spec"]
    assert spec["secretName"] == "karta-webhook-tls"
    assert spec["issuerRef"] == {
        "group": "cert-manager.io",
        "kind": "Issuer",
        "name": "karta-webhook-ca",
    }
    assert spec["dnsNames"] == [
        "karta-webhook",
        "karta-webhook.karta-system",
        "karta-webhook.karta-system.svc",
        "karta-webhook.karta-system.svc.cluster.local",
    ]
    assert "server auth" in spec["usages"]
    for cert in (ca, serving):
        assert {"secretName", "issuerRef"} <= set(cert["spec"])

    # The Deployment mounts the Secret cert-manager writes.
    volumes = find(overlay, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "tls",
        "secret": {"secretName": spec["secretName"], "defaultMode": 0o440},
    } in volumes

    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = find(overlay, kind)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"{NS}/karta-webhook-serving"}
        assert find(overlay, kind)["webhooks"]  # patch merged, not replaced


def test_base_has_no_ca_injection(base: list[Obj]) -> None:
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert "annotations" not in find(base, kind)["metadata"]


# --------------------------------------------------------------------------------------------
# Deployment, Service, PDB


@pytest.fixture(scope="module")
def deployment(base: list[Obj]) -> Obj:
    return find(base, "Deployment")


def test_deployment_shape(deployment: Obj) -> None:
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == APP
    terms = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == spec["selector"]["matchLabels"]
    )
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/karta-webhook/karta-webhook:0.2.0"
    assert container["args"] == [
        "serve",
        "--host=0.0.0.0",  # the server's default is 127.0.0.1
        "--tls-cert",
        "/etc/karta-webhook/tls/tls.crt",
        "--tls-key",
        "/etc/karta-webhook/tls/tls.key",
        "--policy",
        "/etc/karta-webhook/policy/policy.yaml",
        "--metrics-port",
        "9090",
    ]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["PROMETHEUS_MULTIPROC_DIR"]["value"].startswith("/tmp/")
    assert container["ports"] == [
        {"name": "https", "containerPort": 8443, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
    ]


def _flag(args: list[str], name: str, default: str | None = None) -> str | None:
    for i, arg in enumerate(args):
        if arg == name:
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def test_deployment_ports_follow_the_serve_flags(deployment: Obj) -> None:
    """The container ports are where ``serve`` listens with these arguments (``--port``
    defaults to 8443), and the probes reach a port that serves them over its scheme."""
    from webhook.cli.main import build_parser

    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    parsed = build_parser().parse_args(args)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": parsed.port, "metrics": parsed.metrics_port}
    assert _flag(args, "--metrics-port") == str(ports["metrics"])
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        scheme = "HTTPS" if get["port"] == "https" else "HTTP"
        assert get["port"] in ports and get["scheme"] == scheme


def test_network_policy_restricts_the_metrics_port(base: list[Obj], deployment: Obj) -> None:
    policy = find(base, "NetworkPolicy")["spec"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["policyTypes"] == ["Ingress"]
    by_port = {p["port"]: rule for rule in policy["ingress"] for p in rule["ports"]}
    assert set(by_port) == {"https", "metrics"}  # the container's port names, nothing else open
    assert "from" not in by_port["https"]  # the API server calls from anywhere
    sources = by_port["metrics"]["from"]
    assert sources and all(set(s) == {"namespaceSelector"} for s in sources)
    assert all(p["protocol"] == "TCP" for rule in policy["ingress"] for p in rule["ports"])


def test_deployment_security(deployment: Obj) -> None:
    pod = deployment["spec"]["template"]["spec"]
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True
    assert psc["runAsUser"] == 65532
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc.get("privileged", False) is False
        assert sc.get("runAsNonRoot", True) is True
        res = container["resources"]
        assert {"cpu", "memory"} <= set(res["requests"])
        assert "memory" in res["limits"]


def _mib(quantity: str) -> int:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    for suffix, scale in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * scale)
    return int(quantity) // (1024 * 1024)


def test_memory_limit_is_derived_from_workers_and_their_children(deployment: Obj) -> None:
    """The limit covers every worker and every sandbox child at its peak (limits.py), for the
    workers and threads the Deployment runs with, so that no process is killed for memory."""
    from webhook.base.limits import memory_limit_mib
    from webhook.cli.main import build_parser

    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(container["args"])
    need = memory_limit_mib(args.workers, args.threads)
    limit = _mib(container["resources"]["limits"]["memory"])
    assert need <= limit < need * 1.25, (need, limit)


def test_memory_limit_grows_with_the_definitions() -> None:
    """docs/install.md: per definition beyond the bundled catalog, what bench/bench_memory.py
    measured (about 28 KiB shared, and about 47 KiB in each worker when a reload changes
    them all), with a margin under half again as much."""
    from webhook.base.limits import memory_limit_mib

    base = memory_limit_mib(2, 4)
    assert memory_limit_mib(2, 4, 0) == base
    measured = 2000 * (28 + 2 * 47) / 1024
    assert base + measured <= memory_limit_mib(2, 4, 2000) < base + 1.5 * measured
    assert memory_limit_mib(3, 4, 2000) - memory_limit_mib(3, 4) > measured


def test_deployment_probes(deployment: Obj) -> None:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    for probe, path in (
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
        ("startupProbe", "/healthz"),
    ):
        get = container[probe]["httpGet"]
        assert get == {"path": path, "port": "https", "scheme": "HTTPS"}
    # thousands of --catalog definitions take minutes to load before the server listens
    # (bench/bench_memory.py: 2,000 in about 160 s on 2 busy cores): not a restart loop
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600


def test_deployment_volumes(deployment: Obj) -> None:
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert volumes[mounts["/etc/karta-webhook/tls"]["name"]]["secret"]["secretName"] == (
        "karta-webhook-tls"
    )
    assert volumes[mounts["/etc/karta-webhook/policy"]["name"]]["configMap"]["name"] == (
        "karta-webhook-policy"
    )
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    assert mounts["/etc/karta-webhook/tls"]["readOnly"] is True
    assert mounts["/etc/karta-webhook/policy"]["readOnly"] is True


def test_policy_configmap(base: list[Obj]) -> None:
    policy = yaml.safe_load(find(base, "ConfigMap", "karta-webhook-policy")["data"]["policy.yaml"])
    assert policy == {
        "rules": [
            {
                "name": "kai",
                "match": {"namespaces": ["team-*", "research"]},
                "schedulerName": "kai-scheduler",
                "labels": {"kai.scheduler/queue": "research"},
                "annotations": {"example.com/owner": "$(workload.name)"},
            }
        ]
    }


def test_service_and_pdb_select_the_pods(base: list[Obj], deployment: Obj) -> None:
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = find(base, "Service")
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    pdb = find(base, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    for selector in (
        service["spec"]["selector"],
        pdb["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"],
    ):
        assert selector.items() <= pod_labels.items()


# --------------------------------------------------------------------------------------------
# RBAC


def test_rbac_least_privilege(base: list[Obj]) -> None:
    cluster_rules = find(base, "ClusterRole")["rules"]
    role_rules = find(base, "Role")["rules"]
    for rule in cluster_rules + role_rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
        assert "secrets" not in rule["resources"]
        assert not {"delete", "deletecollection", "escalate", "bind", "impersonate"} & set(
            rule["verbs"]
        )

    def verbs(rules: list[Obj], group: str, resource: str) -> set[str]:
        return {
            v for r in rules if group in r["apiGroups"] and resource in r["resources"]
            for v in r["verbs"]
        }  # fmt: skip

    assert verbs(cluster_rules, "run.ai", "kartas") == {"get", "list", "watch"}
    assert verbs(cluster_rules, "run.ai", "kartas/status") == {"patch"}
    assert verbs(cluster_rules, "", "namespaces") == {"list", "watch"}
    assert verbs(cluster_rules, "policies.karta-webhook.run.ai", "kartapolicies/status") == {
        "patch"
    }
    assert verbs(cluster_rules, "policies.karta-webhook.run.ai", "kartapolicies") == {
        "get", "list", "watch",
    }  # fmt: skip
    assert verbs(cluster_rules, "apiextensions.k8s.io", "customresourcedefinitions") == {
        "get",
        "list",
        "watch",
    }
    # Live samples (list) and the gang's owner walk (get) of every kind of the catalog, and
    # of nothing else; the gang's PodGroups made and followed, never deleted (owner references).
    for group, _, resources in WORKLOAD_RULES:
        for resource in resources:
            assert verbs(cluster_rules, group, resource) == {"get", "list"}, (group, resource)
    assert verbs(cluster_rules, "scheduling.k8s.io", "podgroups") == {
        "get", "list", "create", "patch",
    }  # fmt: skip
    workloads = {(g, r) for g, _, rs in WORKLOAD_RULES for r in rs}
    own = {
        ("", "namespaces"),
        ("policies.karta-webhook.run.ai", "kartapolicies"),
        ("policies.karta-webhook.run.ai", "kartapolicies/status"),
        ("policies.karta-webhook.run.ai", "kartanamespacepolicies"),
        ("policies.karta-webhook.run.ai", "kartanamespacepolicies/status"),
        ("run.ai", "kartas"),
        ("run.ai", "kartas/status"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("scheduling.k8s.io", "podgroups"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    }
    granted = {
        (g, r) for rule in cluster_rules for g in rule["apiGroups"] for r in rule["resources"]
    }
    assert granted == workloads | own
    for resource in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        assert verbs(cluster_rules, "admissionregistration.k8s.io", resource) == {
            "get",
            "update",
            "patch",
        }
    webhook_rule = next(
        r for r in cluster_rules if "admissionregistration.k8s.io" in r["apiGroups"]
    )
    assert webhook_rule["resourceNames"] == [APP]
    assert verbs(role_rules, "coordination.k8s.io", "leases") == {"get", "create", "update"}
    assert verbs(role_rules, "", "events") == {"create"}

    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = find(base, kind)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": APP,
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": APP, "namespace": NS}]


# --------------------------------------------------------------------------------------------
# webhook configurations

WORKLOAD_RULES = [
    ("", "v1", ["pods"]),
    ("agents.x-k8s.io", "v1alpha1", ["sandboxes"]),
    ("agents.x-k8s.io", "v1beta1", ["sandboxes"]),
    ("apps", "v1", ["daemonsets", "deployments", "replicasets", "statefulsets"]),
    ("apps.nvidia.com", "v1alpha1", ["nimcaches", "nimservices"]),
    ("argoproj.io", "v1alpha1", ["workflows"]),
    ("batch", "v1", ["cronjobs", "jobs"]),
    ("batch.volcano.sh", "v1alpha1", ["jobs"]),
    ("grove.io", "v1alpha1", ["podcliquesets"]),
    ("jobset.x-k8s.io", "v1alpha2", ["jobsets"]),
    (
        "kubeflow.org",
        "v1",
        ["jaxjobs", "notebooks", "paddlejobs", "pytorchjobs", "tfjobs", "xgboostjobs"],
    ),
    ("kubeflow.org", "v2beta1", ["mpijobs"]),
    ("leaderworkerset.x-k8s.io", "v1", ["leaderworkersets"]),
    ("milvus.io", "v1beta1", ["milvuses"]),
    ("nvidia.com", "v1alpha1", ["dynamographdeployments"]),
    ("nvidia.com", "v1beta1", ["dynamographdeployments"]),
    ("ray.io", "v1", ["rayclusters", "rayjobs", "rayservices"]),
    ("serving.knative.dev", "v1", ["services"]),
    ("serving.kserve.io", "v1alpha1", ["llminferenceservices"]),
    ("serving.kserve.io", "v1beta1", ["inferenceservices"]),
    ("sparkoperator.k8s.io", "v1beta2", ["sparkapplications"]),
    ("tekton.dev", "v1", ["taskruns"]),
    ("trainer.kubeflow.org", "v1alpha1", ["trainjobs"]),
]


def _common_hook_checks(hook: Obj, path: str) -> None:
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] == 5
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["clientConfig"]["service"] == {
        "name": APP,
        "namespace": NS,
        "path": path,
        "port": 443,
    }
    assert "caBundle" not in hook["clientConfig"]  # filled in by the server or cainjector


def test_mutating_webhook_for_workloads(base: list[Obj]) -> None:
    config = find(base, "MutatingWebhookConfiguration")
    hooks = {h["name"]: h for h in config["webhooks"]}
    assert list(hooks) == ["workloads.karta-webhook.run.ai", "kartas.karta-webhook.run.ai"]
    hook = hooks["workloads.karta-webhook.run.ai"]
    _common_hook_checks(hook, "/mutate")
    assert hook["failurePolicy"] == "Ignore"
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "karta-system"],
            }
        ]
    }
    rules = hook["rules"]
    got = [(r["apiGroups"][0], r["apiVersions"][0], r["resources"]) for r in rules]
    assert got == WORKLOAD_RULES
    for rule in rules:
        assert len(rule["apiGroups"]) == len(rule["apiVersions"]) == 1
        assert rule["resources"] == sorted(rule["resources"])
        assert rule["operations"] == ["CREATE"]
        assert rule["scope"] == "Namespaced"
    assert [(g, v) for g, v, _ in got] == sorted((g, v) for g, v, _ in got)


#: Both Karta webhooks see creates and updates of the cluster-scoped ``kartas`` resource.
KARTA_RULES = [
    {
        "apiGroups": ["run.ai"],
        "apiVersions": ["v1alpha1"],
        "resources": ["kartas"],
        "operations": ["CREATE", "UPDATE"],
        "scope": "Cluster",
    }
]


def test_mutating_webhook_for_kartas(base: list[Obj]) -> None:
    config = find(base, "MutatingWebhookConfiguration")
    hook = next(h for h in config["webhooks"] if h["name"] == "kartas.karta-webhook.run.ai")
    _common_hook_checks(hook, "/mutate")
    assert hook["failurePolicy"] == "Ignore"
    assert "namespaceSelector" not in hook
    assert hook["rules"] == KARTA_RULES


def test_validating_webhook_for_kartas(base: list[Obj]) -> None:
    config = find(base, "ValidatingWebhookConfiguration")
    hook, policies = config["webhooks"]
    assert hook["name"] == "kartas.karta-webhook.run.ai"
    _common_hook_checks(hook, "/validate")
    assert hook["failurePolicy"] == "Fail"
    assert hook["rules"] == KARTA_RULES
    # KartaPolicies: refused at apply when the server could not use them
    assert policies["name"] == "policies.karta-webhook.run.ai"
    _common_hook_checks(policies, "/validate")
    assert policies["failurePolicy"] == "Fail"
    assert policies["rules"] == [
        {
            "apiGroups": ["policies.karta-webhook.run.ai"],
            "apiVersions": ["v1alpha1"],
            "resources": ["kartapolicies"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Cluster",
        },
        {
            "apiGroups": ["policies.karta-webhook.run.ai"],
            "apiVersions": ["v1alpha1"],
            "resources": ["kartanamespacepolicies"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        },
    ]


def test_webhooks_spare_their_own_namespace(base: list[Obj], deployment: Obj) -> None:
    """The webhook's own pods are never sent to it (else it could block its own recovery)."""
    config = find(base, "MutatingWebhookConfiguration")
    for hook in config["webhooks"]:
        if any(r["scope"] == "Namespaced" for r in hook["rules"]):
            (expr,) = hook["namespaceSelector"]["matchExpressions"]
            assert deployment["metadata"]["namespace"] in expr["values"]


# --------------------------------------------------------------------------------------------
# the Karta CRD


@pytest.fixture(scope="module")
def crd(base: list[Obj]) -> Obj:
    return find(base, "CustomResourceDefinition", "kartas.run.ai")


@pytest.fixture(scope="module")
def karta_schema(crd: Obj) -> Obj:
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def test_crd_names(crd: Obj) -> None:
    spec = crd["spec"]
    assert spec["group"] == "run.ai"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "Karta",
        "listKind": "KartaList",
        "plural": "kartas",
        "singular": "karta",
        "shortNames": ["krt"],
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    assert version["additionalPrinterColumns"] == [
        {
            "name": "Framework",
            "type": "string",
            "jsonPath": ".spec.structureDefinition.rootComponent.kind.kind",
        },
        {
            "name": "Root Component",
            "type": "string",
            "jsonPath": ".spec.structureDefinition.rootComponent.name",
        },
        # written by the leader (webhook.cluster.kartastatus): why a definition is or is not in use
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {
            "name": "Message",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def _walk(schema: Obj, path: str = "") -> Iterator[tuple[str, Obj]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if "items" in schema:
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}{{}}")


def test_crd_schema_is_structural(karta_schema: Obj) -> None:
    """The rules of a structural schema the API server enforces, plus our own conventions."""
    preserved = []
    for path, node in _walk(karta_schema):
        assert "type" in node, f"{path}: no type"
        assert not {"$ref", "anyOf", "oneOf", "allOf", "not"} & set(node), path
        if node.get("x-kubernetes-preserve-unknown-fields"):
            preserved.append(path)
        if node["type"] == "array":
            assert "items" in node, path
            list_type = node.get("x-kubernetes-list-type")
            assert list_type in {"atomic", "set", "map"}, f"{path}: list type {list_type}"
            if list_type == "map":
                keys = node["x-kubernetes-list-map-keys"]
                assert set(keys) <= set(node["items"].get("required", [])), path
        for req in node.get("required", []):
            assert req in node.get("properties", {}), f"{path}: required {req} not a property"
        if "default" in node:
            jsonschema.validate(node["default"], {"type": node["type"]})
    # statusMappings keeps categories a newer upstream adds (read with a warning, not pruned)
    assert preserved == [
        ".spec.structureDefinition.rootComponent.statusDefinition.statusMappings",
        ".spec.structureDefinition.childComponents[].statusDefinition.statusMappings",
        ".spec.optimizationInstructions",
    ]


def _schema_at(schema: Obj, path: str) -> Obj:
    node = schema
    for part in path.split("."):
        if part.endswith("[]"):
            node = node["properties"][part[:-2]]["items"]
        else:
            node = node["properties"][part]
    return node


def test_crd_schema_fields(karta_schema: Obj) -> None:
    sd = "spec.structureDefinition"
    root = _schema_at(karta_schema, f"{sd}.rootComponent")
    assert _schema_at(karta_schema, f"{sd}.childComponents[]") == root
    assert set(root["properties"]) == {
        "name",
        "kind",
        "ownerRef",
        "specDefinition",
        "scaleDefinition",
        "statusDefinition",
        "suspendDefinition",
        "instanceIdPath",
        "podSelector",
    }
    assert root["required"] == ["name"]
    gvk = root["properties"]["kind"]
    assert gvk["required"] == ["group", "version", "kind"]

    def no_desc(node: Obj) -> Obj:
        return {k: v for k, v in node.items() if k != "description"}

    assert no_desc(_schema_at(karta_schema, f"{sd}.additionalChildKinds[]")) == no_desc(gvk)
    spec_def = root["properties"]["specDefinition"]["properties"]
    assert len(spec_def["fragmentedPodSpecDefinition"]["properties"]) == 11
    assert all(f.endswith("Path") for f in spec_def["fragmentedPodSpecDefinition"]["properties"])
    status = root["properties"]["statusDefinition"]["properties"]
    cond = status["conditionsDefinition"]["properties"]
    defaults = {k: v["default"] for k, v in cond.items() if "default" in v}
    assert defaults == {
        "typeFieldName": "type",
        "statusFieldName": "status",
        "messageFieldName": "message",
        "reasonFieldName": "reason",
    }
    mappings = status["statusMappings"]["properties"]
    assert set(mappings) == {
        "initializing",
        "running",
        "completed",
        "failed",
        "degraded",
        "suspended",
        "suspending",
        "resuming",
        "pending",
        "progressing",
    }
    assert set(mappings) == set(STATUS_ORDER)
    matcher = mappings["running"]["items"]["properties"]
    assert set(matcher) == {"byPhase", "byConditions", "byExpression"}
    assert set(matcher["byConditions"]["items"]["properties"]) == {"type", "status", "reason"}
    assert matcher["byExpression"]["required"] == ["expression", "expectedResult"]
    suspend = root["properties"]["suspendDefinition"]
    for actions in ("suspendActions", "resumeActions"):
        assert suspend["properties"][actions]["minItems"] == 1
        assert suspend["properties"][actions]["items"]["properties"]["value"]["type"] == "string"
    selector = root["properties"]["podSelector"]["properties"]
    assert set(selector) == {
        "componentTypeSelector",
        "componentInstanceSelector",
        "replicaSelector",
    }
    type_selector = selector["componentTypeSelector"]
    assert "required" not in type_selector  # keyPath or matchLabels (CEL rules say which)
    assert set(type_selector["properties"]) == {"keyPath", "value", "matchLabels"}
    assert [r["message"] for r in type_selector["x-kubernetes-validations"]] == [
        "at least one of keyPath or matchLabels must be set",
        "value requires keyPath",
    ]
    gang = _schema_at(karta_schema, "spec.optimizationInstructions.gangScheduling")["properties"]
    assert set(gang) == {"podGroups", "podGroup"}
    conditions = _schema_at(karta_schema, "status.conditions")
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def _unknown_fields(obj: Any, schema: Obj, path: str = "") -> list[str]:
    """Fields the API server would prune (silently drop) from ``obj`` under ``schema``."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(obj, dict) and "properties" in schema:
        for key, value in obj.items():
            if key not in schema["properties"]:
                out.append(f"{path}.{key}")
            else:
                out += _unknown_fields(value, schema["properties"][key], f"{path}.{key}")
    elif isinstance(obj, list) and "items" in schema:
        for i, item in enumerate(obj):
            out += _unknown_fields(item, schema["items"], f"{path}[{i}]")
    return out


def _check_karta(obj: Obj, schema: Obj) -> list[str]:
    """Problems the API server would find with a Karta: schema errors and pruned fields."""
    problems = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft4Validator(schema).iter_errors(obj)
    ]
    metadata_free = {k: v for k, v in obj.items() if k != "metadata"}
    return problems + [f"{p}: would be pruned" for p in _unknown_fields(metadata_free, schema)]


FULL_KARTA: Obj = yaml.safe_load(
    """
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: everything}
spec:
  structureDefinition:
    rootComponent:
      name: job
      kind: {group: example.com, version: v1, kind: Job}
      specDefinition:
        fragmentedPodSpecDefinition:
          schedulerNamePath: .spec.schedulerName
          labelsPath: .spec.labels
          annotationsPath: .spec.annotations
          resourcesPath: .spec.resources
          resourceClaimsPath: .spec.resourceClaims
          podAffinityPath: .spec.affinity.podAffinity
          nodeAffinityPath: .spec.affinity.nodeAffinity
          containersPath: .spec.containers
          containerPath: .spec.containers[0]
          priorityClassNamePath: .spec.priorityClassName
          imagePath: .spec.image
      scaleDefinition: {replicasPath: .spec.replicas, minReplicasPath: .spec.min,
                        maxReplicasPath: .spec.max}
      statusDefinition:
        phaseDefinition: {path: .status.phase}
        conditionsDefinition: {path: .status.conditions, typeFieldName: type,
                               statusFieldName: status, messageFieldName: message,
                               reasonFieldName: reason}
        statusMappings:
          initializing: [{byPhase: Pending}]
          running: [{byConditions: [{type: Running, status: "True", reason: Started}]}]
          completed: [{byExpression: {expression: .status.done, expectedResult: "true"}}]
          failed: [{byPhase: Failed}]
          degraded: [{byPhase: Degraded}]
          suspended: [{byPhase: Suspended}]
          suspending: [{byPhase: Suspending}]
          resuming: [{byPhase: Resuming}]
      suspendDefinition:
        suspendActions: [{path: .spec.suspend, value: "true"}]
        resumeActions: [{path: .spec.suspend, value: "false"}]
      podSelector:
        componentTypeSelector: {keyPath: '.metadata.labels["role"]', value: job}
    childComponents:
    - name: worker
      kind: {group: "", version: v1, kind: Pod}
      ownerRef: job
      specDefinition:
        podSpecPath: '.spec.workers[].spec'
        metadataPath: '.spec.workers[].metadata'
      instanceIdPath: '.spec.workers[].name'
      podSelector:
        componentInstanceSelector: {idPath: '.metadata.labels["worker"]'}
        replicaSelector: {keyPath: '.metadata.labels["index"]'}
    additionalChildKinds:
    - {group: "", version: v1, kind: Service}
  optimizationInstructions:
    gangScheduling:
      podGroups:
      - name: all
        members:
        - componentName: worker
          groupByKeyPaths: ['.metadata.labels["job"]']
          filters: ['.metadata.labels["x"] == "y"']
      podGroup:
        name: all
        topology: {topologyName: rack, preferredTopologyLevel: rack, requiredTopologyLevel: zone}
        subGroups:
        - componentName: worker
          topology: {topologyName: rack, preferredTopologyLevel: host, requiredTopologyLevel: rack}
    someFutureInstruction: {kept: true}
status:
  observedGeneration: 1
  conditions:
  - {type: Ready, status: "True", reason: Ready, message: ok,
     lastTransitionTime: "2026-01-01T00:00:00Z"}
"""
)


def test_crd_accepts_every_field(karta_schema: Obj) -> None:
    assert _check_karta(FULL_KARTA, karta_schema) == []


@pytest.mark.parametrize(
    ("path", "value", "error"),
    [
        (
            "spec.structureDefinition.rootComponent.kind",
            {"version": "v1", "kind": "Pod"},
            "'group'",
        ),
        (
            "spec.structureDefinition.rootComponent.suspendDefinition.suspendActions",
            [],
            "should be non-empty|is too short",
        ),
        (
            "spec.structureDefinition.rootComponent.suspendDefinition.resumeActions",
            [{"path": ".spec.suspend", "value": False}],
            "is not of type 'string'",
        ),
        (
            "spec.structureDefinition.rootComponent.statusDefinition.statusMappings.running",
            [{"byConditions": [{"status": "True"}]}],
            "'type' is a required property",
        ),
        ("spec.structureDefinition.rootComponent.name", 7, "is not of type 'string'"),
    ],
)
def test_crd_rejects(karta_schema: Obj, path: str, value: Any, error: str) -> None:
    obj = copy.deepcopy(FULL_KARTA)
    *parents, last = path.split(".")
    node = obj
    for part in parents:
        node = node[part]
    node[last] = value
    problems = _check_karta(obj, karta_schema)
    assert any(re.search(error, p) for p in problems), problems


def test_crd_prunes_unknown_fields(karta_schema: Obj) -> None:
    obj = copy.deepcopy(FULL_KARTA)
    obj["spec"]["structureDefinition"]["rootComponent"]["specDefinition"]["podTemplatePath"] = "."
    assert _check_karta(obj, karta_schema) == [
        ".spec.structureDefinition.rootComponent.specDefinition.podTemplatePath: would be pruned"
    ]


def _catalog_kartas() -> list[tuple[str, Obj]]:
    out = []
    for path in sorted((ROOT / "catalog").glob("*.yaml")):
        for doc in _load_docs(path):
            if doc.get("kind") == "Karta":
                out.append((path.name, doc))
    return out


def test_crd_accepts_the_catalog(karta_schema: Obj) -> None:
    """Every bundled definition passes the CRD schema, and nothing in it would be pruned."""
    kartas = _catalog_kartas()
    if not kartas:
        pytest.skip("no catalog definitions yet")
    problems = {name: p for name, doc in kartas if (p := _check_karta(doc, karta_schema))}
    assert problems == {}
