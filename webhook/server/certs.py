"""CA and serving certificates for the webhook, made with ``cryptography`` alone.

The API server only talks to an admission webhook over TLS, and it checks the serving
certificate against the ``caBundle`` of the webhook configuration and the Service's DNS name
(``NAME.NS.svc``). Two entry points cover the two ways the server is run:

* :func:`write_certs` makes a CA and a serving certificate for an in-cluster Service; the
  ``karta-webhook certs`` command writes them to a directory, from which a Secret
  ``karta-webhook-tls`` is created and ``ca.crt`` becomes the ``caBundle``.
* :func:`webhook.server.certs_dev.ensure_dev_certs` gives ``karta-webhook serve`` without TLS
  flags a working pair for ``localhost``/``127.0.0.1``, reusing what an earlier run left
  behind when it is still good.

Why the care with files: the server reloads its certificate when the files change, so a watcher
must never see half a file (every write goes to a temporary file in the same directory and is
renamed over the target), and a private key must never exist, even for a moment, with
permissions wider than ``0600`` (it is created with that mode, not chmod-ed afterwards).

The CA key is kept (``ca.key``) so the serving certificate can be re-issued without changing
the CA, i.e. without touching every ``caBundle`` that already trusts it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import ipaddress
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.base.errors import KartaError
from webhook.server import certs_x509

__all__ = [
    "CA_CERT_FILE",
    "CA_KEY_FILE",
    "CERT_FILE",
    "KEY_FILE",
    "CertError",
    "CertPaths",
    "cert_fingerprint",
    "cert_sans",
    "read_ca_bundle",
    "service_dns_names",
    "serving_pair_problem",
    "write_certs",
]

CA_CERT_FILE = "ca.crt"
CA_KEY_FILE = "ca.key"
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

#: The CA outlives the serving certificates it signs, so re-issuing them keeps the caBundle.
CA_DAYS = 3650
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # fullmatch: no final newline
_KEY_MODE = 0o600
_CERT_MODE = 0o644


class CertError(KartaError):
    """A certificate could not be made, read or written; the message says which file and why."""


@dataclass(frozen=True)
class CertPaths:
    """Where a CA and a serving certificate live (all in one directory)."""

    ca_cert: Path
    cert: Path
    key: Path
    ca_key: Path

    @classmethod
    def in_dir(cls, out_dir: Path) -> CertPaths:
        """The standard file names in ``out_dir`` (ca.crt, tls.crt, tls.key, ca.key)."""
        out_dir = Path(out_dir)
        return cls(
            ca_cert=out_dir / CA_CERT_FILE,
            cert=out_dir / CERT_FILE,
            key=out_dir / KEY_FILE,
            ca_key=out_dir / CA_KEY_FILE,
        )


# ---------------------------------------------------------------------------------------------
# public API


def service_dns_names(service: str, namespace: str) -> list[str]:
    """DNS names of a Service: NAME, NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local."""
    _check_dns_label("service", service)
    _check_dns_label("namespace", namespace)
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def write_certs(out_dir: Path, service: str, namespace: str, days: int = 365) -> CertPaths:
    """Write a CA and a serving certificate for Service ``service`` in ``namespace``.

    Files: ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` (keys ``0600``). The serving
    certificate is valid ``days`` days for the four Service DNS names (serverAuth only).

    A CA already in ``out_dir`` (``ca.crt`` + ``ca.key`` that belong together, a CA certificate,
    valid beyond the new serving certificate) is kept and only the serving certificate is
    re-issued, so running this again rotates the serving certificate without invalidating the
    ``caBundle`` in the cluster. Delete ``ca.key`` to start a new CA.
    """
    if days < 1:
        raise CertError(f"certificate validity must be at least 1 day, got {days}")
    # X.509 (RFC 5280) ends at 9999-12-31; a day's margin for the clock moving on
    latest = (_dt.datetime(9999, 12, 31, tzinfo=_dt.UTC) - _dt.datetime.now(_dt.UTC)).days - 1
    if days > latest:
        raise CertError(
            f"certificate validity must be at most {latest} days (to 9999-12-31), got {days}"
        )
    names = service_dns_names(service, namespace)
    return issue(
        Path(out_dir),
        common_name=names[2],
        dns_names=names,
        ips=[],
        days=days,
        ca_name=f"karta-webhook-ca ({namespace}/{service})",
    )


def cert_fingerprint(path: Path) -> str:
    """SHA-256 fingerprint (lowercase hex) of the first certificate in a PEM file."""
    cert = _load_cert(Path(path))
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def cert_sans(path: Path) -> list[str]:
    """The subject alternative names of a PEM certificate, DNS names and IPs as strings."""
    return [str(v) for v in certs_x509.sans(_load_cert(Path(path)))]


# ---------------------------------------------------------------------------------------------
# issuing


def issue(
    out_dir: Path,
    *,
    common_name: str,
    dns_names: list[str],
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address],
    days: int,
    ca_name: str,
) -> CertPaths:
    _prepare_dir(out_dir)
    paths = CertPaths.in_dir(out_dir)
    now = certs_x509.now()
    not_after = now + _dt.timedelta(days=days)

    ca = _load_ca(paths, valid_until=not_after)
    if ca is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = certs_x509.make_ca(ca_key, ca_name, now, max(days, CA_DAYS))
        # The key goes first: a reader that finds ca.crt can rely on ca.key being there.
        _atomic_write(paths.ca_key, certs_x509.key_pem(ca_key), _KEY_MODE)
        _atomic_write(paths.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM), _CERT_MODE)
    else:
        ca_cert, ca_key = ca

    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ip) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(certs_x509.serial())
        .not_valid_before(now - certs_x509.CLOCK_SKEW)
        .not_valid_after(min(not_after, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(certs_x509.key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    # Key before certificate: a server that reloads on a change of tls.crt finds the new key.
    _atomic_write(paths.key, certs_x509.key_pem(key), _KEY_MODE)
    _atomic_write(paths.cert, cert.public_bytes(serialization.Encoding.PEM), _CERT_MODE)
    return paths


# ---------------------------------------------------------------------------------------------
# reading and checking what is on disk

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")


def read_ca_bundle(path: Path) -> bytes:
    """The bytes of ``path`` when it is a CA bundle: one or more PEM certificates and nothing
    else (a ``caBundle`` that holds a private key publishes it in a cluster-wide object; one
    that holds garbage makes every call of the webhook fail its TLS check). Raises
    :class:`CertError` naming the file and what is wrong."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CertError(f"{path}: cannot read: {e.strerror or e}") from e
    blocks = [m.group(1).decode("ascii") for m in _PEM_BLOCK.finditer(data)]
    keys = [b for b in blocks if "PRIVATE KEY" in b]
    if keys:
        raise CertError(
            f"{path}: holds a private key ({keys[0]}); a CA bundle is certificates only"
        )
    others = sorted({b for b in blocks if b != "CERTIFICATE"})
    if others:
        raise CertError(f"{path}: holds {', '.join(others)}; a CA bundle is certificates only")
    if not blocks:
        raise CertError(f"{path}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it")
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as e:
        raise CertError(f"{path}: not a valid PEM certificate bundle: {e}") from e
    if len(certs) != len(blocks):
        raise CertError(f"{path}: {len(blocks)} PEM blocks but {len(certs)} certificates")
    return data


def serving_pair_problem(
    cert_path: Path, key_path: Path, cert_flag: str = "--tls-cert", key_flag: str = "--tls-key"
) -> str | None:
    """What keeps a serving certificate and key from loading, in one line naming the flag and
    file: a file that cannot be read, the two swapped, no PEM certificate or unencrypted key,
    or a key of another certificate; None when they make a pair."""
    try:
        cert_pem = cert_path.read_bytes()
    except OSError as e:
        return f"{cert_flag} {cert_path}: cannot read: {e.strerror or e}"
    try:
        key_pem = key_path.read_bytes()
    except OSError as e:
        return f"{key_flag} {key_path}: cannot read: {e.strerror or e}"
    if b"PRIVATE KEY-----" in cert_pem and b"CERTIFICATE-----" in key_pem:
        return (
            f"{cert_flag} {cert_path} holds a private key and {key_flag} {key_path} "
            "a certificate: swapped?"
        )
    try:
        certs = x509.load_pem_x509_certificates(cert_pem)
    except ValueError:
        return f"{cert_flag} {cert_path}: no PEM certificate in it"
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return f"{key_flag} {key_path}: no unencrypted PEM private key in it"
    if not certs_x509.same_public_key(certs[0], key):
        return f"{key_flag} {key_path} is not the key of {cert_flag} {cert_path}"
    return None


def _load_cert(path: Path) -> x509.Certificate:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CertError(f"cannot read certificate {path}: {e.strerror or e}") from e
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError as e:
        raise CertError(f"{path} does not hold a PEM certificate: {e}") from e


def try_cert(path: Path) -> x509.Certificate | None:
    try:
        return _load_cert(path)
    except CertError:
        return None


def _load_ca(
    paths: CertPaths, valid_until: _dt.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """A usable CA from ``ca.crt``/``ca.key``, or None when one must be made."""
    cert = try_cert(paths.ca_cert)
    key = certs_x509.load_ec_key(paths.ca_key)
    if cert is None or key is None:
        return None
    if not (certs_x509.is_ca(cert) and certs_x509.same_public_key(cert, key)):
        return None
    now = certs_x509.now()
    if cert.not_valid_before_utc > now or cert.not_valid_after_utc < valid_until:
        return None
    return cert, key


# ---------------------------------------------------------------------------------------------
# files


def _check_dns_label(what: str, value: str) -> None:
    if not _DNS_LABEL.fullmatch(value):
        raise CertError(
            f"{what} name {value!r} is not a DNS-1123 label "
            "(lower-case letters, digits and '-', at most 63 characters)"
        )


def _prepare_dir(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CertError(f"cannot create certificate directory {out_dir}: {e.strerror or e}") from e
    if not out_dir.is_dir():
        raise CertError(f"certificate directory {out_dir} is not a directory")
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise CertError(f"certificate directory {out_dir} is not writable")


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` so readers see the old or the new content, never a mix.

    The temporary file is created with ``mode`` (``O_EXCL``; the umask can only narrow it), so a
    private key is never readable by others, not even between creation and rename.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as e:
        raise CertError(f"cannot write {path}: {e.strerror or e}") from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise CertError(f"cannot write {path}: {e.strerror or e}") from e
