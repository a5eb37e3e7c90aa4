"""The webhook configurations, as pure functions of the kinds the registry knows.

``karta-webhook manifests`` prints them for the bundled catalog, and the server's
:class:`~webhook.cluster.wiring.WebhookConfigKeeper` computes the same rules from the live registry, so a
definition added with ``kubectl apply`` starts being mutated without a restart. Everything here is
dicts in, dicts out: no cluster, no files.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from webhook.base.errors import InputError
from webhook.base.gvk import GVK
from webhook.base.limits import WEBHOOK_TIMEOUT_SECONDS
from webhook.karta.model import GROUP, VERSION, is_karta_kind
from webhook.mutation import policyobject
from webhook.workload.gang import GANG_LABEL, MODES

NAME = "karta-webhook"  # configurations, Service and ServiceAccount share it
WORKLOAD_WEBHOOK = "workloads.karta-webhook.run.ai"
KARTA_WEBHOOK = "kartas.karta-webhook.run.ai"
KARTA_RESOURCE = "kartas"
#: refuses a KartaPolicy the server could not use, with the policy file's messages
POLICY_WEBHOOK = "policies.karta-webhook.run.ai"
#: a pod of a workload a rule gangs joins its group at creation (registered only while a rule
#: of the policy in force has ``gang``)
GANG_WEBHOOK = "pods.gang.karta-webhook.run.ai"
GANG_PATH = "/gang"
DEFAULT_NAMESPACE = "karta-system"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": NAME}

# kubebuilder (flect) plurals that the suffix rules below would get wrong.
_IRREGULAR = {
    "endpoints": "endpoints",
    "person": "people",
    "child": "children",
    "schema": "schemas",
    "quiz": "quizzes",
}


def default_plural(gvk: GVK) -> str:
    """The resource name kubebuilder would give a kind: lower case, English plural.

    Used offline (``manifests``) and when discovery does not know a kind yet (its CRD is not
    installed): ``Milvus`` → ``milvuses``, ``Policy`` → ``policies``, ``Gateway`` → ``gateways``,
    ``Service`` → ``services``. A CRD with a custom plural is found by discovery instead.
    """
    kind = gvk.kind.lower()
    if kind in _IRREGULAR:
        return _IRREGULAR[kind]
    if kind.endswith(("s", "x", "z", "ch", "sh")):
        return kind + "es"
    if kind.endswith("y") and len(kind) > 1 and kind[-2] not in "aeiou":
        return kind[:-1] + "ies"
    return kind + "s"


def default_scope(gvk: GVK) -> str:
    """Offline assumption: a workload kind is namespaced (every catalog kind is)."""
    return "Namespaced"


def webhook_rules(
    kinds: Iterable[GVK],
    plural: Callable[[GVK], str],
    operations: Iterable[str] = ("CREATE",),
    scope: Callable[[GVK], str | None] | None = None,
) -> list[dict[str, Any]]:
    """admissionregistration/v1 RuleWithOperations for ``kinds``: one rule per group/version,
    resources sorted, rules sorted by group then version, never subresources.

    Karta itself (``run.ai`` ``Karta``) is left out: it has its own webhook. A rule's ``scope``
    is what ``scope`` says for all its kinds (``Namespaced`` or ``Cluster``), and ``"*"`` when
    they differ or any is unknown, so a kind whose scope we cannot tell is never silently
    missed (a ``Namespaced`` rule would never match a cluster-scoped resource).
    """
    by_gv: dict[tuple[str, str], dict[str, str | None]] = {}
    for gvk in kinds:
        if is_karta_kind(gvk) or not gvk.kind:
            continue
        resource = plural(gvk)
        if not resource or "/" in resource:
            continue
        by_gv.setdefault((gvk.group, gvk.version), {})[resource] = (
            scope(gvk) if scope is not None else None
        )
    rules = []
    for (group, version), resources in sorted(by_gv.items()):
        scopes = set(resources.values())
        rule_scope = scopes.pop() if len(scopes) == 1 else None
        rules.append(
            {
                "apiGroups": [group],
                "apiVersions": [version],
                "resources": sorted(resources),
                "operations": list(operations),
                "scope": rule_scope if rule_scope in ("Namespaced", "Cluster") else "*",
            }
        )
    return rules


def check_webhook_url(url: str, flag: str = "--url") -> str:
    """``url`` when the API server would take it as the base of a webhook's ``clientConfig.url``
    (``https://HOST[:PORT]``: https, a host, no user info, query or fragment; ``/mutate`` and
    ``/validate`` are appended), without a trailing slash. Raises :class:`InputError` naming
    ``flag``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise InputError(f"{flag} {url!r}: not a URL: {e}") from e
    problem = None
    if parts.scheme != "https":
        problem = "the API server calls webhooks over https only"
    elif not parts.hostname:
        problem = "no host"
    elif parts.username is not None or parts.password is not None:
        problem = "no user info allowed"
    elif parts.query or parts.fragment or url.endswith(("?", "#")):
        problem = "no query or fragment allowed"
    elif parts.path not in ("", "/"):
        problem = "give the base URL only: /mutate and /validate are appended"
    elif port == 0:
        problem = "port 0"
    if problem:
        raise InputError(f"{flag} {url!r}: {problem} (want https://HOST:PORT)")
    return url.rstrip("/")


def encode_ca_bundle(pem: bytes | None) -> str | None:
    return base64.b64encode(pem).decode("ascii") if pem else None


def _client_config(
    namespace: str, path: str, ca_bundle: str | None, url: str | None = None
) -> dict[str, Any]:
    """The Service in ``namespace`` (port 443), or with ``url`` (``https://HOST:PORT``, a
    webhook run outside the cluster) that URL with ``path`` appended."""
    config: dict[str, Any] = (
        {"url": url.rstrip("/") + path}
        if url
        else {"service": {"name": NAME, "namespace": namespace, "path": path, "port": 443}}
    )
    if ca_bundle:
        config["caBundle"] = ca_bundle
    return config


def _karta_rules() -> list[dict[str, Any]]:
    return [
        {
            "apiGroups": [GROUP],
            "apiVersions": [VERSION],
            "resources": [KARTA_RESOURCE],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Cluster",
        }
    ]


def _common(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "timeoutSeconds": WEBHOOK_TIMEOUT_SECONDS,
    }


def _configuration(kind: str, webhooks: list[dict[str, Any]]) -> dict[str, Any]:
    """A webhook configuration object: both kinds share the name and the labels."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": NAME, "labels": dict(LABELS)},
        "webhooks": webhooks,
    }


def _excluded(namespace: str) -> dict[str, Any]:
    excluded = list(dict.fromkeys(["kube-system", namespace]))
    return {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded}
        ]
    }


def gang_webhook(
    client_config: dict[str, Any], namespace: str = DEFAULT_NAMESPACE
) -> dict[str, Any]:
    """The Pod webhook of the native gang (docs/install.md): Pod CREATE, only pods labelled
    by a gang rule's mutation (``objectSelector``), failurePolicy Fail (a pod created
    without its group is placed alone, and its group can never take it: the field is
    immutable), reinvoked after other webhooks change the pod (a label a key path reads)."""
    return {
        **_common(GANG_WEBHOOK),
        "failurePolicy": "Fail",
        "reinvocationPolicy": "IfNeeded",
        "matchPolicy": "Equivalent",
        "clientConfig": client_config,
        "namespaceSelector": _excluded(namespace),
        "objectSelector": {
            "matchExpressions": [{"key": GANG_LABEL, "operator": "In", "values": list(MODES)}]
        },
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "operations": ["CREATE"],
                "scope": "Namespaced",
            }
        ],
    }


def gang_client_config(workloads: dict[str, Any]) -> dict[str, Any]:
    """The gang webhook's ``clientConfig``: the workload webhook's, at :data:`GANG_PATH`."""
    out = dict(workloads)
    if "url" in out:
        base, _, _ = str(out["url"]).rpartition("/")
        out["url"] = base + GANG_PATH
    if isinstance(out.get("service"), dict):
        out["service"] = {**out["service"], "path": GANG_PATH}
    return out


def mutating_webhook_configuration(
    rules: list[dict[str, Any]],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    ca_bundle: str | None = None,
    url: str | None = None,
    gang: bool = False,
) -> dict[str, Any]:
    """The MutatingWebhookConfiguration: workloads (``rules``, failurePolicy Ignore, our own
    namespace and kube-system excluded), Kartas (stamps the index labels) and, with ``gang``
    (a rule of the policy has ``gang``), the gang's Pod webhook."""
    workloads = {
        **_common(WORKLOAD_WEBHOOK),
        "failurePolicy": "Ignore",
        "reinvocationPolicy": "IfNeeded",
        "matchPolicy": "Equivalent",
        "clientConfig": _client_config(namespace, "/mutate", ca_bundle, url),
        "namespaceSelector": _excluded(namespace),
        "rules": rules,
    }
    kartas = {
        **_common(KARTA_WEBHOOK),
        "failurePolicy": "Ignore",
        "reinvocationPolicy": "Never",
        "matchPolicy": "Equivalent",
        "clientConfig": _client_config(namespace, "/mutate", ca_bundle, url),
        "rules": _karta_rules(),
    }
    hooks = [workloads, kartas]
    if gang:
        hooks.append(gang_webhook(gang_client_config(workloads["clientConfig"]), namespace))
    return _configuration("MutatingWebhookConfiguration", hooks)


def validating_webhook_configuration(
    *, namespace: str = DEFAULT_NAMESPACE, ca_bundle: str | None = None, url: str | None = None
) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration: rejects Kartas and KartaPolicies the server could
    not use (failurePolicy Fail: a definition or policy nobody checked must not slip in)."""
    hook = {
        **_common(KARTA_WEBHOOK),
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "clientConfig": _client_config(namespace, "/validate", ca_bundle, url),
        "rules": _karta_rules(),
    }
    policies = {
        **_common(POLICY_WEBHOOK),
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "clientConfig": _client_config(namespace, "/validate", ca_bundle, url),
        "rules": [
            {
                "apiGroups": [policyobject.GROUP],
                "apiVersions": [policyobject.VERSION],
                "resources": [policyobject.PLURAL],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Cluster",
            },
            {
                "apiGroups": [policyobject.GROUP],
                "apiVersions": [policyobject.VERSION],
                "resources": [policyobject.NAMESPACED_PLURAL],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            },
        ],
    }
    return _configuration("ValidatingWebhookConfiguration", [hook, policies])


def catalog_rules(
    kinds: Iterable[GVK], operations: Iterable[str] = ("CREATE",)
) -> list[dict[str, Any]]:
    """The workload rules for ``kinds`` computed offline (no discovery)."""
    return webhook_rules(kinds, default_plural, operations, scope=default_scope)


def webhook_configurations(
    kinds: Iterable[GVK],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    ca_bundle: bytes | None = None,
    operations: Iterable[str] = ("CREATE",),
    url: str | None = None,
    gang: bool = False,
) -> list[dict[str, Any]]:
    """Both configurations for ``kinds`` (what ``karta-webhook manifests`` prints); ``url``
    (``https://HOST:PORT``) calls a webhook run outside the cluster instead of the Service;
    ``gang`` adds the gang's Pod webhook."""
    ca = encode_ca_bundle(ca_bundle)
    rules = catalog_rules(kinds, operations)
    return [
        mutating_webhook_configuration(
            rules, namespace=namespace, ca_bundle=ca, url=url, gang=gang
        ),
        validating_webhook_configuration(namespace=namespace, ca_bundle=ca, url=url),
    ]
