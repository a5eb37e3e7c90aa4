"""Certificates: what the API server will check, proven with real TLS handshakes on loopback."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from webhook.server import certs, certs_x509
from webhook.server.certs import (
    CertError,
    CertPaths,
    cert_fingerprint,
    cert_sans,
    service_dns_names,
    write_certs,
)
from webhook.server.certs_dev import ensure_dev_certs

SERVICE, NAMESPACE = "karta-webhook", "karta-system"
SVC_NAMES = [
    "karta-webhook",
    "karta-webhook.karta-system",
    "karta-webhook.karta-system.svc",
    "karta-webhook.karta-system.svc.cluster.local",
]


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


@contextmanager
def tls_server(paths: CertPaths) -> Iterator[tuple[int, list[BaseException]]]:
    """A one-connection TLS server on 127.0.0.1 serving tls.crt/tls.key; yields its port."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(paths.cert, paths.key)
    errors: list[BaseException] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            with ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"ok")
        except (OSError, ssl.SSLError) as e:  # a failed handshake from the client side lands here
            errors.append(e)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], errors
    finally:
        thread.join(10)
        listener.close()


def handshake(paths: CertPaths, server_hostname: str) -> bytes:
    """Connect as the API server would: trust only ca.crt, check the name."""
    client = ssl.create_default_context(cafile=str(paths.ca_cert))
    client.minimum_version = ssl.TLSVersion.TLSv1_2
    with (
        tls_server(paths) as (port, _),
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        client.wrap_socket(raw, server_hostname=server_hostname) as tls,
    ):
        return tls.recv(2)


# --------------------------------------------------------------------------------------------
# write_certs


@pytest.fixture
def svc_certs(tmp_path: Path) -> CertPaths:
    return write_certs(tmp_path / "out", SERVICE, NAMESPACE)


def test_write_certs_files(svc_certs: CertPaths, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert svc_certs == CertPaths.in_dir(out)
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    for path in (svc_certs.ca_cert, svc_certs.cert):
        assert path.read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
    for path in (svc_certs.ca_key, svc_certs.key):
        assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")


def test_serving_cert_sans_and_usage(svc_certs: CertPaths) -> None:
    assert cert_sans(svc_certs.cert) == SVC_NAMES
    assert service_dns_names(SERVICE, NAMESPACE) == SVC_NAMES
    leaf = load(svc_certs.cert)
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    days = (leaf.not_valid_after_utc - dt.datetime.now(dt.UTC)).days
    assert 363 <= days <= 365


def test_ca_is_a_ca(svc_certs: CertPaths) -> None:
    ca = load(svc_certs.ca_cert)
    bc = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca
    ku = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.key_cert_sign
    assert ca.subject == ca.issuer
    assert ca.not_valid_after_utc >= load(svc_certs.cert).not_valid_after_utc


def test_ca_verifies_leaf_with_cryptography(svc_certs: CertPaths) -> None:
    store = Store([load(svc_certs.ca_cert)])
    leaf = load(svc_certs.cert)
    for name in SVC_NAMES:
        verifier = PolicyBuilder().store(store).build_server_verifier(x509.DNSName(name))
        chain = verifier.verify(leaf, [])
        assert chain[-1] == load(svc_certs.ca_cert)
    wrong = PolicyBuilder().store(store).build_server_verifier(x509.DNSName("evil.example.com"))
    with pytest.raises(VerificationError):
        wrong.verify(leaf, [])


def test_tls_handshake_with_service_name(svc_certs: CertPaths) -> None:
    assert handshake(svc_certs, "karta-webhook.karta-system.svc") == b"ok"
    assert handshake(svc_certs, "karta-webhook.karta-system.svc.cluster.local") == b"ok"


def test_tls_handshake_fails_for_wrong_name(svc_certs: CertPaths) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match=r"[Hh]ostname mismatch"):
        handshake(svc_certs, "other.karta-system.svc")


def test_tls_handshake_fails_with_another_ca(svc_certs: CertPaths, tmp_path: Path) -> None:
    other = write_certs(tmp_path / "other", SERVICE, NAMESPACE)
    mixed = CertPaths(ca_cert=other.ca_cert, cert=svc_certs.cert, key=svc_certs.key,
                      ca_key=other.ca_key)  # fmt: skip
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(mixed, "karta-webhook.karta-system.svc")


def test_private_keys_are_0600_even_with_open_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        paths = write_certs(tmp_path / "out", SERVICE, NAMESPACE)
    finally:
        os.umask(old)
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.ca_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.cert.stat().st_mode) == 0o644


def test_keys_created_with_mode_not_chmod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file is born through os.open with its final mode; nothing is chmod-ed later."""
    opened: list[int] = []
    real_open = os.open

    def spy_open(path, flags, mode=0o777, *a, **kw):  # type: ignore[no-untyped-def]
        opened.append(mode)
        return real_open(path, flags, mode, *a, **kw)

    def no_chmod(*a: object, **kw: object) -> None:
        raise AssertionError("chmod used")

    monkeypatch.setattr(certs.os, "open", spy_open)
    monkeypatch.setattr(certs.os, "chmod", no_chmod)
    monkeypatch.setattr(Path, "chmod", no_chmod)
    write_certs(tmp_path / "out", SERVICE, NAMESPACE)
    assert sorted(opened) == [0o600, 0o600, 0o644, 0o644]


def test_no_temporary_files_left(svc_certs: CertPaths, tmp_path: Path) -> None:
    write_certs(tmp_path / "out", SERVICE, NAMESPACE)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]


def test_rerun_keeps_ca_and_reissues_serving_cert(svc_certs: CertPaths, tmp_path: Path) -> None:
    ca_before, leaf_before = cert_fingerprint(svc_certs.ca_cert), cert_fingerprint(svc_certs.cert)
    again = write_certs(tmp_path / "out", SERVICE, NAMESPACE, days=30)
    assert cert_fingerprint(again.ca_cert) == ca_before
    assert cert_fingerprint(again.cert) != leaf_before
    assert handshake(again, "karta-webhook.karta-system.svc") == b"ok"


def test_rerun_without_ca_key_makes_new_ca(svc_certs: CertPaths, tmp_path: Path) -> None:
    ca_before = cert_fingerprint(svc_certs.ca_cert)
    svc_certs.ca_key.unlink()
    again = write_certs(tmp_path / "out", SERVICE, NAMESPACE)
    assert cert_fingerprint(again.ca_cert) != ca_before
    assert handshake(again, "karta-webhook.karta-system.svc") == b"ok"


def test_days(tmp_path: Path) -> None:
    paths = write_certs(tmp_path, SERVICE, NAMESPACE, days=7)
    left = load(paths.cert).not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=6) < left <= dt.timedelta(days=7)
    with pytest.raises(CertError, match="at least 1 day"):
        write_certs(tmp_path, SERVICE, NAMESPACE, days=0)


@pytest.mark.parametrize(
    ("service", "namespace", "bad"),
    [("Karta", "ns", "service"), ("svc", "ns.x", "namespace"), ("", "ns", "service")],
)
def test_bad_names(tmp_path: Path, service: str, namespace: str, bad: str) -> None:
    with pytest.raises(CertError, match=f"{bad} name .* is not a DNS-1123 label"):
        write_certs(tmp_path, service, namespace)


def test_unwritable_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CertError, match=r"cannot create certificate directory .*file/out"):
        write_certs(blocker / "out", SERVICE, NAMESPACE)
    with pytest.raises(CertError, match=r"is not a directory|cannot create"):
        ensure_dev_certs(blocker)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_dir(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(CertError, match="not writable"):
        write_certs(ro, SERVICE, NAMESPACE)


def test_fingerprint_of_garbage(tmp_path: Path) -> None:
    junk = tmp_path / "junk.crt"
    junk.write_text("hello")
    with pytest.raises(CertError, match="does not hold a PEM certificate"):
        cert_fingerprint(junk)
    with pytest.raises(CertError, match="cannot read certificate"):
        cert_fingerprint(tmp_path / "missing.crt")


# --------------------------------------------------------------------------------------------
# ensure_dev_certs


def test_dev_certs_localhost_and_ip(tmp_path: Path) -> None:
    paths = ensure_dev_certs(tmp_path)
    assert cert_sans(paths.cert) == ["localhost", "127.0.0.1"]
    san = load(paths.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert handshake(paths, "localhost") == b"ok"
    assert handshake(paths, "127.0.0.1") == b"ok"
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(paths, "127.0.0.2")
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600


def test_dev_certs_reused(tmp_path: Path) -> None:
    first = ensure_dev_certs(tmp_path)
    fingerprints = [cert_fingerprint(first.cert), cert_fingerprint(first.ca_cert)]
    key = first.key.read_bytes()
    second = ensure_dev_certs(tmp_path)
    assert second == first
    assert [cert_fingerprint(second.cert), cert_fingerprint(second.ca_cert)] == fingerprints
    assert second.key.read_bytes() == key


def test_dev_certs_other_hosts_regenerated(tmp_path: Path) -> None:
    first = cert_fingerprint(ensure_dev_certs(tmp_path).cert)
    paths = ensure_dev_certs(tmp_path, hosts=("localhost", "::1", "dev.local"))
    assert cert_fingerprint(paths.cert) != first
    assert cert_sans(paths.cert) == ["localhost", "dev.local", "::1"]


def _shift_clock(monkeypatch: pytest.MonkeyPatch, delta: dt.timedelta) -> None:
    real = certs_x509.now
    monkeypatch.setattr(certs_x509, "now", lambda: real() + delta)


@pytest.mark.parametrize(
    "age",
    [dt.timedelta(days=400), dt.timedelta(days=364, hours=12)],
    ids=["expired", "expires-within-a-day"],
)
def test_dev_certs_expired_regenerated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, age: dt.timedelta
) -> None:
    with monkeypatch.context() as m:
        _shift_clock(m, -age)
        old = ensure_dev_certs(tmp_path)
    before = cert_fingerprint(old.cert)
    paths = ensure_dev_certs(tmp_path)
    assert cert_fingerprint(paths.cert) != before
    assert load(paths.cert).not_valid_after_utc > dt.datetime.now(dt.UTC) + dt.timedelta(days=300)
    assert handshake(paths, "localhost") == b"ok"


def test_dev_certs_not_yet_valid_regenerated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:
        _shift_clock(m, dt.timedelta(days=2))
        before = cert_fingerprint(ensure_dev_certs(tmp_path).cert)
    assert cert_fingerprint(ensure_dev_certs(tmp_path).cert) != before


@pytest.mark.parametrize("victim", ["tls.crt", "tls.key", "ca.crt"])
def test_dev_certs_garbage_regenerated(tmp_path: Path, victim: str) -> None:
    before = cert_fingerprint(ensure_dev_certs(tmp_path).cert)
    (tmp_path / victim).write_bytes(b"-----BEGIN GARBAGE-----\n")
    paths = ensure_dev_certs(tmp_path)
    assert cert_fingerprint(paths.cert) != before
    assert handshake(paths, "localhost") == b"ok"


def test_dev_certs_missing_file_regenerated(tmp_path: Path) -> None:
    first = ensure_dev_certs(tmp_path)
    first.key.unlink()
    assert handshake(ensure_dev_certs(tmp_path), "localhost") == b"ok"


@pytest.mark.parametrize(
    "swapped",
    [
        "key",  # a key from another run next to the certificate: the server could not start
        "ca_cert",  # a leaf that the CA beside it did not sign: clients would not trust it
    ],
)
def test_dev_certs_mixed_with_another_run_regenerated(tmp_path: Path, swapped: str) -> None:
    first = ensure_dev_certs(tmp_path / "a")
    other = ensure_dev_certs(tmp_path / "b")
    getattr(first, swapped).write_bytes(getattr(other, swapped).read_bytes())
    paths = ensure_dev_certs(tmp_path / "a")
    assert handshake(paths, "localhost") == b"ok"


def test_dev_certs_need_a_host(tmp_path: Path) -> None:
    with pytest.raises(CertError, match="at least one host"):
        ensure_dev_certs(tmp_path, hosts=())
