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

from webhook.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


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


def _ca_pem(tmp_path: Path, name: str) -> bytes:
    from webhook.server.certs import write_certs

    return write_certs(tmp_path / name, "karta-webhook", "karta-system").ca_cert.read_bytes()


def test_ca_bundle(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pem = _ca_pem(tmp_path, "a") + _ca_pem(tmp_path, "b")  # a bundle may hold several
    (tmp_path / "ca.crt").write_bytes(pem)
    code, (mwc, vwc), _ = run(capsys, "--ca-bundle", str(tmp_path / "ca.crt"))
    assert code == 0
    want = base64.b64encode(pem).decode()
    assert [h["clientConfig"]["caBundle"] for h in [*mwc["webhooks"], *vwc["webhooks"]]] == [
        want,
        want,
        want,
        want,
    ]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read"),
        (b"", "no PEM certificate"),
        (b"garbage\n", "no PEM certificate"),
        (b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "not a valid PEM"),
        ("key", "holds a private key (PRIVATE KEY)"),
        ("cert+key", "holds a private key (PRIVATE KEY)"),
        (b"-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----\n", "holds PUBLIC KEY"),
    ],
    ids=["missing", "empty", "garbage", "broken-cert", "key", "cert-and-key", "public-key"],
)
def test_bad_ca_bundle_is_an_input_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes | str | None, says: str
) -> None:
    path = tmp_path / "ca.crt"
    if content in ("key", "cert+key"):
        from webhook.server.certs import write_certs

        made = write_certs(tmp_path / "made", "karta-webhook", "karta-system")
        key = made.ca_key.read_bytes()
        content = key if content == "key" else made.ca_cert.read_bytes() + key
    if isinstance(content, bytes):
        path.write_bytes(content)
    code, docs, err = run(capsys, "--ca-bundle", str(path))
    assert code == 2 and not docs
    assert f"--ca-bundle {path}" in err and says in err, err
    assert "Traceback" not in err
    if isinstance(content, bytes) and b"PRIVATE KEY" in content:  # never echoed
        assert content.decode().splitlines()[1] not in err


def test_url_puts_the_address_in_client_config(capsys: pytest.CaptureFixture[str]) -> None:
    code, (mwc, vwc), _ = run(capsys, "--url", "https://127.0.0.1:9443/")
    assert code == 0
    configs = [h["clientConfig"] for h in [*mwc["webhooks"], *vwc["webhooks"]]]
    assert [c["url"] for c in configs] == [
        "https://127.0.0.1:9443/mutate",
        "https://127.0.0.1:9443/mutate",
        "https://127.0.0.1:9443/validate",
        "https://127.0.0.1:9443/validate",
    ]
    assert not any("service" in c for c in configs)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:9443", "https only"),
        ("https://:9443", "no host"),
        ("https://u:p@127.0.0.1:9443", "no user info"),
        ("https://127.0.0.1:9443?x=1", "no query or fragment"),
        ("https://127.0.0.1:9443#f", "no query or fragment"),
        ("https://127.0.0.1:9443/mutate", "base URL only"),
        ("https://127.0.0.1:99999", "not a URL"),
    ],
)
def test_bad_url_is_an_input_error_naming_the_flag(
    capsys: pytest.CaptureFixture[str], url: str, says: str
) -> None:
    code, docs, err = run(capsys, "--url", url)
    assert code == 2 and not docs
    assert err.startswith(f"karta-webhook: --url {url!r}") and says in err, err


def test_manifests_takes_operations_from_a_policy(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import yaml as _yaml

    from webhook.cli.main import main as _main

    pol = tmp_path / "policy.yaml"
    pol.write_text(
        "operations: [CREATE, UPDATE]\nrules: [{name: s, schedulerName: kai-scheduler}]\n"
    )
    assert _main(["manifests", "--policy", str(pol)]) == 0
    mwc = next(_yaml.safe_load_all(capsys.readouterr().out))
    workloads = next(h for h in mwc["webhooks"] if h["name"] == "workloads.karta-webhook.run.ai")
    assert all(r["operations"] == ["CREATE", "UPDATE"] for r in workloads["rules"])


def test_catalog_prints_the_bundled_definitions_as_kartas(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, docs, err = run(capsys, "--catalog")
    assert code == 0 and not err
    kartas = docs  # the Kartas alone, to pipe into kubectl apply
    files = sorted((ROOT / "catalog").glob("*.yaml"))
    assert len(kartas) == len(files) and {d["kind"] for d in docs} == {"Karta"}
    for path, karta in zip(files, kartas, strict=True):
        original = yaml.safe_load(path.read_text())
        assert karta["spec"] == original["spec"]
        assert karta["metadata"]["name"] == original["metadata"]["name"]
        assert karta["metadata"]["labels"]["app.kubernetes.io/part-of"] == "karta-webhook"


@pytest.mark.parametrize(("text", "value"), [("true", True), ("false", False), ("False", False)])
def test_serve_manage_webhooks_takes_true_or_false(text: str, value: bool) -> None:
    from webhook.cli.main import build_parser

    args = build_parser().parse_args(["serve", f"--manage-webhooks={text}"])
    assert args.manage_webhooks is value
    assert build_parser().parse_args(["serve"]).manage_webhooks is True


def test_serve_manage_webhooks_refuses_anything_else(capsys: pytest.CaptureFixture[str]) -> None:
    from webhook.cli.main import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["serve", "--manage-webhooks=maybe"])
    assert e.value.code == 2
    assert "--manage-webhooks: 'maybe' is not true or false" in capsys.readouterr().err


def test_serve_listens_on_loopback_unless_told() -> None:
    """A development server is not on the network by default; the manifests, the chart and
    the image pass --host=0.0.0.0 (tests/install/test_manifests.py, tests/install/test_chart.py)."""
    from webhook.cli.main import build_parser

    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["serve", "--host=0.0.0.0"]' in dockerfile
