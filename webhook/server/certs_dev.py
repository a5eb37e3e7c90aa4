"""Certificates for development: :func:`ensure_dev_certs` gives ``karta-webhook serve``
without TLS flags a working pair for ``localhost``/``127.0.0.1``, reusing what an earlier run
left behind when it is still good (made and written by :mod:`webhook.server.certs`).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
from collections.abc import Iterable, Sequence
from pathlib import Path

from cryptography.exceptions import InvalidSignature

from webhook.server import certs_x509
from webhook.server.certs import CertError, CertPaths, issue, try_cert

__all__ = ["RENEW_MARGIN", "ensure_dev_certs"]

#: Certificates that expire within this margin are not reused by :func:`ensure_dev_certs`.
RENEW_MARGIN = _dt.timedelta(days=1)


def ensure_dev_certs(out_dir: Path, hosts: Sequence[str] = ("localhost", "127.0.0.1")) -> CertPaths:
    """A CA and serving certificate for development (``karta-webhook serve`` without TLS flags).

    Files already in ``out_dir`` are reused when the serving certificate names exactly
    ``hosts`` (DNS names, IP addresses as IP SANs), is signed by ``ca.crt``, matches ``tls.key``
    and is valid for at least another day; anything else (missing, expired, garbage, other
    hosts) is replaced by a new pair valid for a year.
    """
    if not hosts:
        raise CertError("at least one host name or IP address is needed for a dev certificate")
    dns_names: list[str] = []
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for host in hosts:
        try:
            ips.append(ipaddress.ip_address(host))
        except ValueError:
            dns_names.append(host)
    paths = CertPaths.in_dir(Path(out_dir))
    if _reusable(paths, dns_names, ips):
        return paths
    return issue(
        Path(out_dir),
        common_name=hosts[0],
        dns_names=dns_names,
        ips=ips,
        days=365,
        ca_name="karta-webhook dev CA",
    )


def _reusable(
    paths: CertPaths,
    dns_names: Iterable[str],
    ips: Iterable[ipaddress.IPv4Address | ipaddress.IPv6Address],
) -> bool:
    """Whether the files in ``paths`` are a complete, matching, not nearly expired set."""
    ca = try_cert(paths.ca_cert)
    leaf = try_cert(paths.cert)
    key = certs_x509.load_ec_key(paths.key)
    if ca is None or leaf is None or key is None or not certs_x509.is_ca(ca):
        return False
    if not certs_x509.same_public_key(leaf, key):
        return False
    try:
        leaf.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    now = certs_x509.now()
    for cert in (ca, leaf):
        if cert.not_valid_before_utc > now or cert.not_valid_after_utc < now + RENEW_MARGIN:
            return False
    have = set(map(str, certs_x509.sans(leaf)))
    return have == {*dns_names, *map(str, ips)}
