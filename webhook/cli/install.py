"""``certs`` and ``manifests``: what installing the webhook in a cluster takes (a CA and a
serving certificate; the webhook configurations, or the bundled definitions as Karta
objects)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from webhook.admission.registry import load_registry
from webhook.base.documents import read_documents
from webhook.base.errors import InputError
from webhook.cli import console
from webhook.cli.console import EXIT_OK
from webhook.karta.model import is_karta
from webhook.mutation.policyfile import load_policy

# --------------------------------------------------------------------------- certs


def cmd_certs(args: argparse.Namespace) -> int:
    from webhook.server.certs import write_certs

    paths = write_certs(Path(args.out), args.service, args.namespace, days=args.days)
    print(f"wrote {paths.ca_cert}, {paths.cert}, {paths.key}")
    return EXIT_OK


# --------------------------------------------------------------------------- manifests


def cmd_manifests(args: argparse.Namespace) -> int:
    """manifests [--namespace NS] [--ca-bundle FILE] [--url URL]: the webhook configurations
    for the bundled catalog, with the rules the server's keeper would compute."""
    from webhook.admission.manifests import check_webhook_url, webhook_configurations
    from webhook.server.certs import CertError, read_ca_bundle, service_dns_names

    url = check_webhook_url(args.url) if args.url is not None else None
    try:  # the Service's namespace: what the API server will accept as one
        service_dns_names("karta-webhook", args.namespace)
    except CertError as e:
        raise InputError(f"--namespace {args.namespace!r}: {e}") from None
    ca = None
    if args.ca_bundle:
        try:
            ca = read_ca_bundle(Path(args.ca_bundle))
        except CertError as e:
            raise InputError(f"--ca-bundle {e}") from e
    policy = load_policy(args.policy) if args.policy else None
    operations = policy.operations if policy else ("CREATE",)
    docs: list[Any] = webhook_configurations(
        load_registry().kinds(),
        namespace=args.namespace,
        ca_bundle=ca,
        operations=operations,
        url=url,
        gang=policy is not None and policy.gang,
    )
    sys.stdout.write(console.dump_yaml(catalog_kartas() if args.catalog else docs))
    return EXIT_OK


def catalog_kartas() -> list[dict[str, Any]]:
    """The bundled definitions as Karta objects to apply (``manifests --catalog``), each
    labelled as part of karta-webhook, in file order. In a cluster they take the place of the
    built-in copies (the cluster's definition wins for its kind), so ``kubectl get kartas``
    shows what the webhook uses and the leader writes their status conditions."""
    from webhook.admission.manifests import LABELS
    from webhook.karta.loading import catalog_dir

    out = []
    for path in sorted(catalog_dir().glob("*.yaml")):
        for _, doc in read_documents(path):
            if isinstance(doc, dict) and is_karta(doc):
                meta = doc.setdefault("metadata", {})
                meta["labels"] = {
                    **(meta.get("labels") or {}),
                    "app.kubernetes.io/part-of": LABELS["app.kubernetes.io/part-of"],
                }
                out.append(doc)
    return out
