"""The X.509 pieces :mod:`webhook.server.certs` is made of, with ``cryptography``: the clock
certificates are dated by, a CA certificate, key usage, serial numbers, a key's PEM; and what
is read back from files: an EC key, whether a certificate is a CA, whether it belongs to a
key, its subject alternative names. No files are written here.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import secrets
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import NameOID

#: Backdating of ``notBefore`` so a node whose clock is a little behind accepts a fresh cert.
CLOCK_SKEW = _dt.timedelta(minutes=5)


def make_ca(
    key: ec.EllipticCurvePrivateKey, name: str, now: _dt.datetime, days: int
) -> x509.Certificate:
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "karta-webhook"),
            x509.NameAttribute(NameOID.COMMON_NAME, name),
        ]
    )
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(serial())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def key_usage(*, ca: bool) -> x509.KeyUsage:
    """ECDSA keys only sign: a serving key signs the TLS handshake, a CA key also signs
    certificates and CRLs."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def serial() -> int:
    # 159 random bits: positive and within the 20 octets RFC 5280 allows.
    return secrets.randbits(159) | 1


def now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_ec_key(path: Path) -> ec.EllipticCurvePrivateKey | None:
    """The EC private key in ``path``, or None if it is missing, garbage or of another type."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    return key if isinstance(key, ec.EllipticCurvePrivateKey) else None


def same_public_key(cert: x509.Certificate, key: PrivateKeyTypes) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def is_ca(cert: x509.Certificate) -> bool:
    try:
        bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
        ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        return False
    return bc.ca and ku.key_cert_sign


def sans(cert: x509.Certificate) -> list[str | ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    out: list[str | ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    out += ext.get_values_for_type(x509.DNSName)
    out += [
        ip
        for ip in ext.get_values_for_type(x509.IPAddress)
        if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address)
    ]
    return out
