"""Kubernetes' syntax rules for the names and values the webhook writes.

A label key, a label value or a scheduler name that the API server would reject must never
reach a patch: the whole admission would fail. Policies are checked against these rules when
they load, rendered values again before they are written.
"""

from __future__ import annotations

import re

from webhook.base.limits import MAX_ANNOTATION_VALUE_BYTES

# Matched with fullmatch: the whole string, as Go's regexp anchors ^...$ do. Python's `$` also
# matches before a final newline, which let "trainer\n" pass as a label value the API server
# then refused (and with it the whole create).
_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: The longest label value (and name part of a key), and the longest DNS subdomain (a key's
#: prefix, a schedulerName, a priorityClassName), in characters, as the API server counts them
LABEL_VALUE_MAX, DNS_SUBDOMAIN_MAX = 63, 253


def qualified_name_errors(key: str) -> list[str]:
    """Kubernetes' rules for label and annotation keys: ``[prefix/]name``, prefix a DNS
    subdomain of at most 253 characters, name at most 63 alphanumerics, ``-``, ``_``, ``.``,
    beginning and ending with an alphanumeric."""
    prefix, slash, name = key.rpartition("/")
    errs = []
    if slash and not prefix:
        errs.append("prefix part must not be empty")
    if prefix and (len(prefix) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        errs.append("prefix part must be a lowercase DNS subdomain of at most 253 characters")
    if not name:
        errs.append("name part must not be empty")
    elif len(name) > LABEL_VALUE_MAX or not _NAME.fullmatch(name) or "/" in name:
        errs.append(
            "name part must be at most 63 characters, alphanumerics, '-', '_' or '.', "
            "beginning and ending with an alphanumeric"
        )
    return errs


def label_value_errors(value: str) -> list[str]:
    if len(value) > LABEL_VALUE_MAX or not _NAME.fullmatch(value):
        return [
            "a label value must be empty or at most 63 characters, alphanumerics, '-', '_' or '.', "
            "beginning and ending with an alphanumeric"
        ]
    return []


def dns_subdomain_errors(value: str, what: str) -> list[str]:
    if not value or len(value) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN.fullmatch(value):
        return [f"{what} must be a lowercase DNS subdomain (RFC 1123) of at most 253 characters"]
    return []


def scheduler_name_errors(value: str) -> list[str]:
    return dns_subdomain_errors(value, "schedulerName")


def priority_class_name_errors(value: str) -> list[str]:
    """A pod's ``priorityClassName``: the API server checks it as a DNS subdomain."""
    return dns_subdomain_errors(value, "priorityClassName")


def annotation_value_errors(value: str) -> list[str]:
    """An annotation value is free text, at most
    :data:`~webhook.base.limits.MAX_ANNOTATION_VALUE_BYTES` bytes of it (a policy's share of the
    API server's 256 KiB of annotations per object; docs/policy-bounds.md)."""
    size = len(value.encode())
    if size > MAX_ANNOTATION_VALUE_BYTES:
        return [f"an annotation value of {size:,} bytes, at most {MAX_ANNOTATION_VALUE_BYTES:,}"]
    return []
