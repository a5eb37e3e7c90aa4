"""The injection policy: which labels, annotations and ``schedulerName`` go where.

A policy is a YAML document::

    operations: [CREATE]             # optional; add UPDATE to mutate on updates too
    rules:
    - name: kai                      # required, unique
      match:                         # optional; fields ANDed, list entries ORed; absent = all
        kinds: [JobSet, kubeflow.org/PyTorchJob]   # Kind or group/Kind ("" group: /Pod)
        namespaces: [research, "team-*"]            # shell-style globs
        components: [replicatedjob]                 # component names of the definition
        instances: ["worker*"]                      # globs on instance ids
      schedulerName: kai-scheduler
      labels: {kai.scheduler/queue: research}
      annotations: {example.com/owner: "$(workload.name)"}
      overwrite: false               # default false

Everything that can be checked before a request arrives is checked when the policy loads, so a
typo is an error at startup (exit 2 in the CLI) rather than a silent no-op in production.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from webhook.definitions import GVK, read_documents
from webhook.errors import FieldError, InputError

VARIABLES = ("workload.name", "workload.namespace", "workload.kind", "component", "instance")
_VAR = re.compile(r"\$\$|\$\(([^)]*)\)")
_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_RULE_FIELDS = {"name", "match", "schedulerName", "labels", "annotations", "overwrite"}
_MATCH_FIELDS = {"kinds", "namespaces", "components", "instances"}
OPERATIONS = ("CREATE", "UPDATE")


class PolicyError(InputError):
    """A policy that cannot be used; lists every problem with its place."""

    def __init__(self, source: str, errors: list[FieldError]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: invalid policy:\n" + "\n".join(f"  {e}" for e in errors))


# --------------------------------------------------------------------------- syntax checks


def qualified_name_errors(key: str) -> list[str]:
    """Kubernetes' rules for label and annotation keys: ``[prefix/]name``, prefix a DNS
    subdomain of at most 253 characters, name at most 63 alphanumerics, ``-``, ``_``, ``.``,
    beginning and ending with an alphanumeric."""
    prefix, slash, name = key.rpartition("/")
    errs = []
    if slash and not prefix:
        errs.append("prefix part must not be empty")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        errs.append("prefix part must be a lowercase DNS subdomain of at most 253 characters")
    if not name:
        errs.append("name part must not be empty")
    elif len(name) > 63 or not _NAME.match(name) or "/" in name:
        errs.append(
            "name part must be at most 63 characters, alphanumerics, '-', '_' or '.', "
            "beginning and ending with an alphanumeric"
        )
    return errs


def label_value_errors(value: str) -> list[str]:
    if len(value) > 63 or not _NAME.match(value):
        return [
            "a label value must be empty or at most 63 characters, alphanumerics, '-', '_' or '.', "
            "beginning and ending with an alphanumeric"
        ]
    return []


def scheduler_name_errors(value: str) -> list[str]:
    if not value or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        return [
            "schedulerName must be a lowercase DNS subdomain (RFC 1123) of at most 253 characters"
        ]
    return []


def variables_in(template: str) -> list[str]:
    return [m.group(1) for m in _VAR.finditer(template) if m.group(0) != "$$"]


def render(template: str, values: Mapping[str, str]) -> str:
    """Substitute ``$(variable)``; ``$$`` is a literal ``$`` (as in Kubernetes env expansion)."""

    def sub(m: re.Match[str]) -> str:
        return "$" if m.group(0) == "$$" else values[m.group(1)]

    return _VAR.sub(sub, template)


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Match:
    kinds: tuple[tuple[str | None, str], ...] = ()  # (group or None for any group, Kind)
    namespaces: tuple[str, ...] = ()
    components: tuple[str, ...] = ()
    instances: tuple[str, ...] = ()

    def workload(self, gvk: GVK, namespace: str) -> bool:
        if self.kinds and not any(
            k == gvk.kind and (g is None or g == gvk.group) for g, k in self.kinds
        ):
            return False
        return not self.namespaces or any(fnmatchcase(namespace, p) for p in self.namespaces)

    def instance(self, component: str, instance: str) -> bool:
        if self.components and component not in self.components:
            return False
        return not self.instances or any(fnmatchcase(instance, p) for p in self.instances)


@dataclass(frozen=True)
class Rule:
    name: str
    match: Match
    scheduler_name: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    overwrite: bool = False


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    source: str = "<none>"
    #: admission operations whose workloads are mutated; UPDATE also stamps pod templates
    #: edited after creation (the server keeps the webhook's rules in line with this)
    operations: tuple[str, ...] = ("CREATE",)

    @property
    def empty(self) -> bool:
        return not self.rules


EMPTY = Policy()


def _strings(value: Any, where: str, errors: list[FieldError]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors.append(FieldError(where, "must be a list of strings"))
        return ()
    return tuple(value)


def _check_template(template: str, where: str, errors: list[FieldError]) -> bool:
    unknown = [v for v in variables_in(template) if v not in VARIABLES]
    for v in unknown:
        errors.append(
            FieldError(
                where, f"unknown variable $({v}); known: {', '.join(f'$({n})' for n in VARIABLES)}"
            )
        )
    return not unknown


def _map(
    value: Any, where: str, errors: list[FieldError], *, labels: bool
) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        errors.append(FieldError(where, "must be a map of key: value"))
        return ()
    out = []
    for key, val in value.items():
        kwhere = f"{where}[{key!r}]" if isinstance(key, str) else where
        if not isinstance(key, str):
            errors.append(FieldError(where, f"key {key!r} must be a string"))
            continue
        for e in qualified_name_errors(key):
            errors.append(FieldError(kwhere, f"invalid key {key!r}: {e}"))
        if isinstance(val, bool | int | float):
            # YAML reads `on`, `42` as non-strings; Kubernetes wants strings, so say so.
            errors.append(FieldError(kwhere, f"value {val!r} must be a string (quote it in YAML)"))
            continue
        if not isinstance(val, str):
            errors.append(FieldError(kwhere, "value must be a string"))
            continue
        if _check_template(val, kwhere, errors) and labels:
            sample = render(val, dict.fromkeys(VARIABLES, "x"))
            for e in label_value_errors(sample):
                errors.append(FieldError(kwhere, f"invalid value {val!r}: {e}"))
        out.append((key, val))
    return tuple(out)


def _kinds(
    values: tuple[str, ...], where: str, errors: list[FieldError]
) -> tuple[tuple[str | None, str], ...]:
    out: list[tuple[str | None, str]] = []
    for v in values:
        group, slash, kind = v.rpartition("/")
        if not kind or "/" in group:
            errors.append(FieldError(where, f"{v!r} is not Kind or group/Kind"))
            continue
        out.append((group if slash else None, kind))
    return tuple(out)


def parse_policy(doc: Any, source: str = "<policy>") -> Policy:
    """Parse and check a policy document; raise :class:`PolicyError` with every problem."""
    errors: list[FieldError] = []
    if doc is None:
        return Policy((), source)
    if not isinstance(doc, dict):
        raise PolicyError(source, [FieldError("", "a policy must be a map with a 'rules' list")])
    for key in doc:
        if key not in ("rules", "operations"):
            errors.append(
                FieldError(str(key), "unknown field (a policy has 'rules' and 'operations')")
            )
    operations = _strings(doc.get("operations", ["CREATE"]), "operations", errors)
    for op in operations:
        if op not in OPERATIONS:
            errors.append(FieldError("operations", f"{op!r} is not one of {', '.join(OPERATIONS)}"))
    if "operations" in doc and not operations:
        errors.append(FieldError("operations", "must list CREATE and/or UPDATE"))
    raw_rules = doc.get("rules") or []
    if not isinstance(raw_rules, list):
        raise PolicyError(source, [FieldError("rules", "must be a list")])
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_rules):
        base = f"rules[{i}]"
        if not isinstance(raw, dict):
            errors.append(FieldError(base, "a rule must be a map"))
            continue
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            errors.append(FieldError(f"{base}.name", "required: a non-empty string"))
            name = f"#{i}"
        elif name in seen:
            errors.append(FieldError(f"{base}.name", f"duplicate rule name {name!r}"))
        seen.add(name)
        base = f"rules[{i}] ({name})"
        for key in raw:
            if key not in _RULE_FIELDS:
                errors.append(
                    FieldError(
                        f"{base}.{key}",
                        f"unknown field; a rule has {', '.join(sorted(_RULE_FIELDS))}",
                    )
                )
        m = raw.get("match") or {}
        if not isinstance(m, dict):
            errors.append(FieldError(f"{base}.match", "must be a map"))
            m = {}
        for key in m:
            if key not in _MATCH_FIELDS:
                errors.append(
                    FieldError(
                        f"{base}.match.{key}",
                        f"unknown field; match has {', '.join(sorted(_MATCH_FIELDS))}",
                    )
                )
        match = Match(
            kinds=_kinds(
                _strings(m.get("kinds"), f"{base}.match.kinds", errors),
                f"{base}.match.kinds",
                errors,
            ),
            namespaces=_strings(m.get("namespaces"), f"{base}.match.namespaces", errors),
            components=_strings(m.get("components"), f"{base}.match.components", errors),
            instances=_strings(m.get("instances"), f"{base}.match.instances", errors),
        )
        scheduler = raw.get("schedulerName")
        if scheduler is not None:
            if not isinstance(scheduler, str):
                errors.append(FieldError(f"{base}.schedulerName", "must be a string"))
                scheduler = None
            elif _check_template(scheduler, f"{base}.schedulerName", errors):
                for e in scheduler_name_errors(render(scheduler, dict.fromkeys(VARIABLES, "x"))):
                    errors.append(FieldError(f"{base}.schedulerName", e))
        overwrite = raw.get("overwrite", False)
        if not isinstance(overwrite, bool):
            errors.append(FieldError(f"{base}.overwrite", "must be true or false"))
            overwrite = False
        rule = Rule(
            name=name,
            match=match,
            scheduler_name=scheduler,
            labels=_map(raw.get("labels"), f"{base}.labels", errors, labels=True),
            annotations=_map(raw.get("annotations"), f"{base}.annotations", errors, labels=False),
            overwrite=overwrite,
        )
        if not (rule.scheduler_name or rule.labels or rule.annotations):
            errors.append(
                FieldError(base, "sets nothing: give schedulerName, labels or annotations")
            )
        rules.append(rule)
    if errors:
        raise PolicyError(source, errors)
    ordered = tuple(op for op in OPERATIONS if op in operations)
    return Policy(tuple(rules), source, ordered)


def load_policy(path: Path | str) -> Policy:
    """Read a policy file (``-`` for standard input)."""
    docs = read_documents(path)
    if len(docs) > 1:
        raise PolicyError(str(path), [FieldError("", "a policy file holds one YAML document")])
    source, doc = docs[0] if docs else (str(path), None)
    return parse_policy(doc, source)
