"""``karta-webhook manifests``: the webhook configurations for the bundled catalog.

Its output must equal the static configurations in ``manifests/base/webhooks.yaml`` (so the
first install already mutates every catalog kind) and use the same rule computation as the
server's keeper (tested in ``test_kube.py``).
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict], str]:
    code = main(["manifests", *args])
    out = capsys.readouterr()
    return code, [d for d in yaml.safe_load_all(out.out) if d], out.err


def test_default_output_equals_static_manifests(capsys: pytest.CaptureFixture[str]) -> None:
    code, docs, err = run(capsys)
    assert code == 0 and not err
    static = [
        d for d in yaml.safe_load_all((ROOT / "manifests/base/webhooks.yaml").read_text()) if d
    ]
    assert docs == static
    assert [d["kind"] for d in docs] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]


def test_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    code, (mwc, vwc), _ = run(capsys, "--namespace", "gpu-infra")
    assert code == 0
    hooks = [*mwc["webhooks"], *vwc["webhooks"]]
    assert {h["clientConfig"]["service"]["namespace"] for h in hooks} == {"gpu-infra"}
    assert {h["clientConfig"]["service"]["name"] for h in hooks} == {"karta-webhook"}
    workloads = mwc["webhooks"][0]
    assert workloads["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "gpu-infra",
    ]
    assert workloads["failurePolicy"] == "Ignore"
    assert vwc["webhooks"][0]["failurePolicy"] == "Fail"


def test_ca_bundle(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    (tmp_path / "ca.crt").write_bytes(pem)
    code, (mwc, vwc), _ = run(capsys, "--ca-bundle", str(tmp_path / "ca.crt"))
    assert code == 0
    want = base64.b64encode(pem).decode()
    assert [h["clientConfig"]["caBundle"] for h in [*mwc["webhooks"], *vwc["webhooks"]]] == [
        want,
        want,
        want,
    ]


@pytest.mark.parametrize("content", [None, b""])
def test_bad_ca_bundle_is_an_input_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes | None
) -> None:
    path = tmp_path / "ca.crt"
    if content is not None:
        path.write_bytes(content)
    code, docs, err = run(capsys, "--ca-bundle", str(path))
    assert code == 2 and not docs
    assert str(path) in err and "Traceback" not in err


def test_manifests_takes_operations_from_a_policy(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import yaml as _yaml

    from webhook.cli import main as _main

    pol = tmp_path / "policy.yaml"
    pol.write_text(
        "operations: [CREATE, UPDATE]\nrules: [{name: s, schedulerName: kai-scheduler}]\n"
    )
    assert _main(["manifests", "--policy", str(pol)]) == 0
    mwc = next(_yaml.safe_load_all(capsys.readouterr().out))
    workloads = next(h for h in mwc["webhooks"] if h["name"] == "workloads.karta-webhook.run.ai")
    assert all(r["operations"] == ["CREATE", "UPDATE"] for r in workloads["rules"])
