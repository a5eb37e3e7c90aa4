"""Karta definitions through a real API server: the CRD is structural and established, every
bundled definition is admitted by the validating webhook, and broken ones are denied with a
message kubectl prints that names the field."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kapi
import pytest
import yaml
from hooks import Webhook, configurations, register, start_webhook, unregister, wait_until

CATALOG = kapi.ROOT / "catalog"
DEFINITIONS = sorted(CATALOG.glob("*.yaml"))


@pytest.fixture(scope="module")
def validating(
    plane: kapi.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    """``serve --no-kube`` registered through ``manifests --url``, checking its caller's
    client certificate (the API server presents one from its admission configuration)."""
    hook = start_webhook(
        tmp_path_factory.mktemp("serve-validate"),
        "rules: []\n",
        ["--no-kube", f"--client-ca={plane.webhook_client_ca}"],
    )
    try:
        register(plane, configurations(hook))
        wait_until("the validating webhook denies a broken Karta", lambda: _denied(plane))
        yield hook
    finally:
        unregister(plane)
        hook.stop()


def _broken(name: str = "probe-broken") -> dict[str, Any]:
    doc = yaml.safe_load((CATALOG / "batch-job-v1.yaml").read_text())
    doc["metadata"]["name"] = name
    spec = doc["spec"]["structureDefinition"]["rootComponent"]["specDefinition"]
    spec["podTemplateSpecPath"] = ".spec.template | ("
    return dict(doc)


def _denied(plane: kapi.ControlPlane) -> bool:
    out = plane.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(_broken()), check=False
    )
    return out.returncode != 0 and "denied the request" in out.stderr


def test_the_karta_crd_is_structural_and_established(plane: kapi.ControlPlane) -> None:
    crd = plane.get_json("crd", "kartas.run.ai")
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    assert "NonStructuralSchema" not in conditions
    assert crd["status"]["acceptedNames"]["kind"] == "Karta"


@pytest.mark.parametrize("path", DEFINITIONS, ids=[p.stem for p in DEFINITIONS])
def test_every_bundled_definition_is_admitted(
    plane: kapi.ControlPlane, validating: Webhook, path: Path
) -> None:
    out = plane.kubectl("apply", "-f", str(path), check=False)
    assert out.returncode == 0, out.stderr
    name = yaml.safe_load(path.read_text())["metadata"]["name"]
    stored = plane.get_json("karta", name)
    want = yaml.safe_load(path.read_text())["spec"]
    assert stored["spec"]["structureDefinition"] == want["structureDefinition"]


def _variant(mutate: Any, name: str, base: str = "batch-job-v1.yaml") -> tuple[dict[str, Any], str]:
    doc = copy.deepcopy(yaml.safe_load((CATALOG / base).read_text()))
    doc["metadata"]["name"] = name
    field = mutate(doc["spec"]["structureDefinition"]["rootComponent"])
    return doc, field


ROOT_SPEC = "spec.structureDefinition.rootComponent.specDefinition"


def _misspelt(root: dict[str, Any]) -> str:
    root["specDefinition"]["podTemplateSpecPath"] = ".spec.tempalte"
    return f"{ROOT_SPEC}.podTemplateSpecPath"


def _not_compiling(root: dict[str, Any]) -> str:
    root["specDefinition"]["podTemplateSpecPath"] = ".spec.template | ("
    return f"{ROOT_SPEC}.podTemplateSpecPath"


def _own_metadata(root: dict[str, Any]) -> str:
    root["specDefinition"] = {
        "podSpecPath": ".spec.template.spec",
        "metadataPath": ".metadata",
    }
    return f"{ROOT_SPEC}.metadataPath"


@pytest.mark.parametrize(
    "mutate",
    [_misspelt, _not_compiling, _own_metadata],
    ids=["misspelt-path", "does-not-compile", "writes-own-metadata"],
)
def test_a_broken_definition_is_denied_naming_the_field(
    plane: kapi.ControlPlane, validating: Webhook, mutate: Any
) -> None:
    doc, field = _variant(mutate, f"broken-{mutate.__name__.strip('_').replace('_', '-')}")
    out = plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc), check=False)
    assert out.returncode != 0
    # What kubectl prints: the API server's wording around our status message.
    assert 'admission webhook "kartas.karta-webhook.run.ai" denied the request' in out.stderr
    assert field in out.stderr, out.stderr
    assert out.stderr.startswith("The request is invalid: error when creating"), out.stderr
    got = plane.kubectl("get", "karta", doc["metadata"]["name"], check=False)
    assert got.returncode != 0 and "NotFound" in got.stderr


def test_the_webhook_checked_the_api_servers_client_certificate(
    plane: kapi.ControlPlane, validating: Webhook
) -> None:
    """The server runs with ``--client-ca``: a caller without the API server's certificate is
    refused, so the admissions above were the API server's own calls."""
    import ssl
    import urllib.request

    ctx = ssl.create_default_context(cafile=str(validating.ca))
    req = urllib.request.Request(
        f"{validating.url}/validate", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, context=ctx, timeout=5)
    assert e.value.code in (401, 403)
