"""The serving TLS context: client certificates checked against ``--client-ca``, which is
reloaded like the serving certificate; only that CA is trusted."""

from __future__ import annotations

import os
import socket
import ssl
import threading
from pathlib import Path

import pytest
from clientcerts import ClientCert, client_ca

from webhook.server.certs import write_certs
from webhook.server.tls import CertReloader, ClientCAError

SERVICE, NAMESPACE = "karta-webhook", "karta-system"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"


def handshake(
    reloader: CertReloader, ca: Path, client: ClientCert | None
) -> tuple[dict[str, object] | None, Exception | None]:
    """One TLS connection over a socket pair: the peer certificate the server saw (None: the
    client presented none) and the error the server got (None: it completed and answered)."""
    a, b = socket.socketpair()
    seen: dict[str, object] = {}

    def serve() -> None:
        try:
            with reloader.context().wrap_socket(a, server_side=True) as s:
                seen["cert"] = s.getpeercert()
                s.sendall(b"ok")
                seen["done"] = True
        except (OSError, ssl.SSLError) as e:
            seen["error"] = e

    t = threading.Thread(target=serve)
    t.start()
    ctx = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        ctx.load_cert_chain(str(client.cert), str(client.key))
    try:
        with ctx.wrap_socket(b, server_hostname=SERVER_NAME) as c:
            c.settimeout(10)
            c.recv(2)
    except (OSError, ssl.SSLError):
        pass
    finally:
        t.join(10)
        a.close()
        b.close()
    assert "done" in seen or "error" in seen, "the server side did not finish"
    return seen.get("cert"), seen.get("error")  # type: ignore[return-value]


@pytest.fixture
def serving(tmp_path: Path) -> tuple[Path, Path, Path]:
    paths = write_certs(tmp_path / "certs", SERVICE, NAMESPACE)
    return paths.cert, paths.key, paths.ca_cert


def test_a_client_certificate_of_the_ca_is_verified(
    tmp_path: Path, serving: tuple[Path, Path, Path]
) -> None:
    cert, key, ca = serving
    client_ca_file, client = client_ca(tmp_path / "api", "kube-apiserver")
    reloader = CertReloader(cert, key, client_ca_file)
    peer, error = handshake(reloader, ca, client)
    assert error is None and peer and ("commonName", "kube-apiserver") in peer["subject"][0]  # type: ignore[index]
    # no certificate: the handshake passes, and the server sees none (HTTP decides)
    peer, error = handshake(reloader, ca, None)
    assert error is None and peer is None


def test_a_client_certificate_of_another_ca_is_refused(
    tmp_path: Path, serving: tuple[Path, Path, Path]
) -> None:
    cert, key, ca = serving
    client_ca_file, _ = client_ca(tmp_path / "api", "kube-apiserver")
    _, intruder = client_ca(tmp_path / "other", "kube-apiserver")
    _, error = handshake(CertReloader(cert, key, client_ca_file), ca, intruder)
    assert isinstance(error, ssl.SSLError) and "certificate verify failed" in str(error)


def test_only_the_client_ca_is_trusted_not_the_system_store(
    tmp_path: Path, serving: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key, ca = serving
    client_ca_file, _ = client_ca(tmp_path / "api", "kube-apiserver")
    public_ca, public_client = client_ca(tmp_path / "public", "kube-apiserver")
    monkeypatch.setenv("SSL_CERT_FILE", str(public_ca))  # OpenSSL's default store: this CA
    _, error = handshake(CertReloader(cert, key, client_ca_file), ca, public_client)
    assert isinstance(error, ssl.SSLError) and "certificate verify failed" in str(error)


def test_the_client_ca_is_reloaded_when_its_file_changes(
    tmp_path: Path, serving: tuple[Path, Path, Path]
) -> None:
    cert, key, ca = serving
    client_ca_file, old_client = client_ca(tmp_path / "api", "kube-apiserver")
    reloader = CertReloader(cert, key, client_ca_file)
    new_ca_file, new_client = client_ca(tmp_path / "rotated", "kube-apiserver")
    os.replace(new_ca_file, client_ca_file)
    assert handshake(reloader, ca, new_client)[1] is None
    assert isinstance(handshake(reloader, ca, old_client)[1], ssl.SSLError)
    # a client CA file that does not load keeps the last good one
    client_ca_file.write_text("garbage\n")
    assert handshake(reloader, ca, new_client)[1] is None


def test_a_client_ca_that_does_not_load_is_an_error_naming_it(
    tmp_path: Path, serving: tuple[Path, Path, Path]
) -> None:
    cert, key, _ = serving
    bad = tmp_path / "bad.crt"
    bad.write_text("garbage\n")
    with pytest.raises(ClientCAError, match=r"cannot load client CA .*bad\.crt"):
        CertReloader(cert, key, bad)
    with pytest.raises(ClientCAError, match="No such file"):
        CertReloader(cert, key, tmp_path / "missing.crt")


def test_status_says_whether_the_last_load_succeeded_and_when(
    tmp_path: Path, serving: tuple[Path, Path, Path]
) -> None:
    """The ``certificates`` source of the reload gauges and /readyz: a certificate that does
    not load is reported (the last good one serving on) at the next look, and a good one
    again once it is mended."""
    cert, key, _ = serving
    reloader = CertReloader(cert, key)
    ok, started = reloader.status
    assert ok and started > 0
    good = cert.read_bytes()
    cert.write_text("garbage\n")
    ok, failed_at = reloader.poll()
    assert not ok and failed_at >= started
    first = reloader.context()
    assert reloader.poll() == (False, failed_at)  # the same broken file: not retried
    assert reloader.context() is first  # the last good context serves on
    cert.write_bytes(good + b"\n")  # a different stamp than before, and loadable
    ok, mended_at = reloader.poll()
    assert ok and mended_at >= failed_at
