"""Policies as cluster objects: ``KartaPolicy`` (``policies.karta-webhook.run.ai/v1alpha1``,
cluster-scoped), whose ``spec`` is a policy document (:mod:`webhook.mutation.policyfile`),
checked by the same code with every error at its field path under ``spec``
(``spec.rules[0] (kai).labels['bad key']: invalid key ...``).

The policy in force is the policy file's rules first, then each ``KartaPolicy``'s in the order
of their names (:func:`combine`). Rules apply in order and, without ``overwrite``, the first to
set a field wins, so the file (the install's own policy) is the base an object adds to, and
an object overrides it only with ``overwrite: true``. An object's rules are named
``<policy>/<rule>`` in warnings, failures and ``mutate -o explain``. The operations in force
are every policy's together; ``failureMode`` is ``closed`` when any policy in force says so.

A file given to ``mutate --policy`` or ``serve --policy`` may hold ``KartaPolicy`` objects
instead of one policy document (:func:`load_policies`), so a policy object can be tried
offline before it is applied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from webhook.base.documents import read_documents
from webhook.base.errors import FieldError
from webhook.base.gvk import GVK
from webhook.base.names import dns_subdomain_errors
from webhook.mutation.gangrule import gang_conflicts
from webhook.mutation.policy import EMPTY, OPERATIONS, Policy, Tally
from webhook.mutation.policyfile import PolicyError, load_policy, parse_policy

GROUP = "policies.karta-webhook.run.ai"
VERSION = "v1alpha1"
KIND = "KartaPolicy"
PLURAL = "kartapolicies"
#: the namespaced variant, for teams (see :func:`parse_namespace_policy_object`)
NAMESPACED_KIND = "KartaNamespacePolicy"
NAMESPACED_PLURAL = "kartanamespacepolicies"
#: what a namespaced policy may set, and what its rules' ``match`` may hold (its namespace is
#: its own, always)
NAMESPACED_FIELDS = ("labels", "annotations")
_NAMESPACED_RULE = {"name", "match", "overwrite", *NAMESPACED_FIELDS}
_NAMESPACED_MATCH = {"kinds", "components", "instances", "objectSelector"}
API_VERSION = f"{GROUP}/{VERSION}"


def is_policy_kind(gvk: GVK | None) -> bool:
    return gvk is not None and gvk.group == GROUP and gvk.kind in (KIND, NAMESPACED_KIND)


def is_policy_object(doc: Any) -> bool:
    return (
        isinstance(doc, Mapping)
        and doc.get("kind") in (KIND, NAMESPACED_KIND)
        and (str(doc.get("apiVersion") or "").split("/")[0] == GROUP)
    )


def object_namespace(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    return ns if isinstance(ns, str) else ""


def parse_namespace_policy_object(obj: Any, source: str | None = None) -> Policy:
    """A ``KartaNamespacePolicy``: a team's policy, in force for the workloads of its own
    namespace only. It may set only labels and annotations (:data:`NAMESPACED_FIELDS`), never
    with ``overwrite`` (a key already set, by the workload or a cluster policy, stays), and its
    rules' ``match`` names no namespace (it is its own); ``operations`` and ``failureMode`` are
    the cluster policies'. Anything else is an error at its field path; the rest is checked as
    a KartaPolicy's. The policy's ``source`` is ``<namespace>/<name>``."""
    name = object_name(obj) if isinstance(obj, Mapping) else ""
    namespace = object_namespace(obj) if isinstance(obj, Mapping) else ""
    source = source or f'{NAMESPACED_KIND} "{namespace}/{name}"'
    errors: list[FieldError] = []
    if not isinstance(obj, Mapping):
        raise PolicyError(source, [FieldError("", f"a {NAMESPACED_KIND} must be a map")])
    if not namespace:
        errors.append(FieldError("metadata.namespace", "required: the namespace it is for"))
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        errors.extend(_namespaced_limits(spec))
    as_cluster = {**obj, "kind": KIND}
    try:
        policy = parse_policy_object(as_cluster, source)
    except PolicyError as e:
        errors.extend(e.errors)
        raise PolicyError(source, errors) from None
    if errors:
        raise PolicyError(source, errors)
    rules = tuple(
        dataclasses.replace(r, match=dataclasses.replace(r.match, namespaces=(namespace,)))
        for r in policy.rules
    )
    return dataclasses.replace(policy, rules=rules, source=f"{namespace}/{name}")


def _namespaced_limits(spec: Mapping[str, Any]) -> list[FieldError]:
    """What a namespaced policy may not hold, each at its field path."""
    errors = []
    for key in ("operations", "failureMode"):
        if key in spec:
            errors.append(
                FieldError(f"spec.{key}", "a namespaced policy takes the cluster policies'")
            )
    rules = spec.get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        if not isinstance(rule, Mapping):
            continue
        at = f"spec.rules[{i}] ({rule.get('name') or f'#{i}'})"
        for key in rule:
            if key not in _NAMESPACED_RULE:
                errors.append(
                    FieldError(
                        f"{at}.{key}",
                        f"a namespaced policy may set only {' and '.join(NAMESPACED_FIELDS)}",
                    )
                )
        if rule.get("overwrite") is True:
            errors.append(
                FieldError(
                    f"{at}.overwrite",
                    "a namespaced policy never overwrites: what is set (by the workload or a "
                    "cluster policy) stays",
                )
            )
        match = rule.get("match")
        for key in match if isinstance(match, Mapping) else ():
            if key not in _NAMESPACED_MATCH:
                errors.append(
                    FieldError(
                        f"{at}.match.{key}",
                        "a namespaced policy matches only the workloads of its own namespace",
                    )
                )
    return errors


def cluster_conflicts(team: Policy, cluster: Policy, namespace: str) -> list[FieldError]:
    """The keys a namespaced policy (``team``, of ``namespace``) sets that a cluster policy
    rule may set in that namespace: refused at apply, each at its field path (a cluster
    rule's selectors are not decided here: any rule whose kinds and namespaces could match
    counts)."""
    errors = []
    for i, rule in enumerate(team.rules):
        name = rule.name.rpartition("/")[2]
        for field in NAMESPACED_FIELDS:
            for key, _ in rule.sets.get(field, ()):
                for theirs in cluster.rules:
                    m = theirs.match
                    if m.namespaces and not any(fnmatchcase(namespace, p) for p in m.namespaces):
                        continue
                    if any(k == key for k, _ in theirs.sets.get(field, ())):
                        errors.append(
                            FieldError(
                                f"spec.rules[{i}] ({name}).{field}[{key!r}]",
                                f"set by the cluster's policy (rule {theirs.name!r}): a "
                                "namespaced policy cannot change it",
                            )
                        )
                        break
    return errors


def object_ref(doc: Any) -> str:
    """How an error names a policy object: ``KartaPolicy/NAME``,
    ``KartaNamespacePolicy/NAMESPACE/NAME`` (``?`` for a name it lacks)."""
    if not isinstance(doc, Mapping):
        return KIND
    kind = NAMESPACED_KIND if doc.get("kind") == NAMESPACED_KIND else KIND
    name = object_name(doc) or "?"
    return (
        f"{kind}/{object_namespace(doc) or '?'}/{name}"
        if kind == NAMESPACED_KIND
        else f"{kind}/{name}"
    )


def _ref(p: Policy, teams: list[Policy]) -> str:
    """The ``KartaPolicy/NAME`` of a policy :func:`load_policies` read (``source``: its name)."""
    return f"{NAMESPACED_KIND if any(p is t for t in teams) else KIND}/{p.source}"


def object_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def parse_policy_object(obj: Any, source: str | None = None) -> Policy:
    """A ``KartaPolicy`` object's policy; :class:`PolicyError` with every problem, each at its
    field path from the object's root (``spec.rules[0] (kai).match.namespaceSelector``)."""
    name = object_name(obj) if isinstance(obj, Mapping) else ""
    source = source or f'{KIND} "{name}"'
    errors: list[FieldError] = []
    if not isinstance(obj, Mapping):
        raise PolicyError(source, [FieldError("", f"a {KIND} must be a map")])
    if obj.get("apiVersion") != API_VERSION:
        errors.append(FieldError("apiVersion", f"must be {API_VERSION}"))
    if obj.get("kind") != KIND:
        errors.append(FieldError("kind", f"must be {KIND}"))
    if not name:
        errors.append(FieldError("metadata.name", "required"))
    else:
        errors.extend(FieldError("metadata.name", e) for e in dns_subdomain_errors(name, "name"))
    spec = obj.get("spec")
    if spec is None:
        errors.append(FieldError("spec", "required: the policy (rules, operations, failureMode)"))
        raise PolicyError(source, errors)
    try:
        policy = parse_policy(dict(spec) if isinstance(spec, Mapping) else spec, source)
    except PolicyError as e:
        errors.extend(
            FieldError(f"spec.{err.path}" if err.path else "spec", err.message) for err in e.errors
        )
        raise PolicyError(source, errors) from None
    if errors:
        raise PolicyError(source, errors)
    return dataclasses.replace(policy, source=name)


def combine(file: Policy, objects: Iterable[Policy], namespaced: Iterable[Policy] = ()) -> Policy:
    """The policy in force: ``file``'s rules, then each object's (``source``: its name) in
    name order, then each namespaced policy's (``source``: ``<namespace>/<name>``) in that
    order, as the module docstring says."""
    ordered = sorted(objects, key=lambda p: p.source)
    teams = sorted(namespaced, key=lambda p: p.source)
    if not ordered and not teams:
        return file
    base = combine(file, ordered) if teams else None
    rules = [*file.rules]
    for p in (*ordered, *teams):
        rules.extend(dataclasses.replace(r, name=f"{p.source}/{r.name}") for r in p.rules)
    ordered = [*ordered, *teams]
    every = (file, *ordered) if file is not EMPTY else tuple(ordered)
    operations = tuple(op for op in OPERATIONS if any(op in p.operations for p in every))
    closed = any(p.failure_mode == "closed" for p in every)
    sources = ", ".join(p.source for p in ordered)
    head = f"{file.source} + " if file is not EMPTY else ""
    made = Policy(
        tuple(rules), f"{head}{KIND} {sources}", operations, "closed" if closed else "open"
    )
    _COMBINED.insert(0, (made, base if base is not None else made))
    del _COMBINED[8:]
    return made


#: the newest policies :func:`combine` made (a policy is replaced only when one changes), each
#: with its cluster part (the file's and the KartaPolicies' rules, without the namespaced ones)
_COMBINED: list[tuple[Policy, Policy]] = []


def has_objects(policy: Policy) -> bool:
    """Whether ``policy`` holds the rules of policy objects (:func:`combine` made it)."""
    return any(p is policy for p, _ in _COMBINED)


def cluster_part(policy: Policy) -> Policy:
    """The rules of ``policy`` that the file and the KartaPolicies give (what a namespaced
    policy may not change)."""
    return next((base for p, base in _COMBINED if p is policy), policy)


def within_bounds(
    file: Policy, objects: Iterable[Policy]
) -> tuple[tuple[Policy, ...], dict[str, list[FieldError]]]:
    """The objects in force together with ``file`` within the bounds of one policy
    (:mod:`webhook.base.limits`, docs/policy-bounds.md), each within them on its own: in name
    order, an object whose rules would take the rules in force past a bound is left out, and
    by its name the bound it would pass (``rules[0] (r).labels: 300 labels in the rules up to
    this one, at most 256 in a policy``, its rules counted after those in force)."""
    tally = Tally()
    for rule in file.rules:
        tally.add("", rule)
    count = len(file.rules)
    kept: list[Policy] = []
    over: dict[str, list[FieldError]] = {}
    for p in sorted(objects, key=lambda p: p.source):
        errors = Tally.rules(count + len(p.rules))
        trial = tally.copy()
        for i, rule in enumerate(p.rules):
            if errors:
                break
            errors = trial.add(f"rules[{i}] ({rule.name.rpartition('/')[2]})", rule)
        if not errors:
            errors = _gang_conflicts(file, kept, p)
        if errors:
            over[p.source] = errors
            continue
        tally, count = trial, count + len(p.rules)
        kept.append(p)
    return tuple(kept), over


def _gang_conflicts(file: Policy, kept: Iterable[Policy], p: Policy) -> list[FieldError]:
    """What :func:`~webhook.mutation.gangrule.gang_conflicts` finds once ``p``'s rules join
    those in force (``file``'s, then ``kept``'s), when a rule of any has ``gang``."""
    placed = [(f"{file.source} rules[{i}] ({r.name})", r) for i, r in enumerate(file.rules)]
    for q in kept:
        placed += [(f"{q.source} rules[{i}] ({r.name})", r) for i, r in enumerate(q.rules)]
    placed += [(f"rules[{i}] ({r.name.rpartition('/')[2]})", r) for i, r in enumerate(p.rules)]
    if not any(r.gang for _, r in placed):
        return []
    return gang_conflicts(placed)


def load_policies(path: Path | str) -> Policy:
    """A policy file (one policy document), or a file of ``KartaPolicy`` objects (as
    :func:`combine` puts them together, without a file policy)."""
    docs = read_documents(path)
    if not any(is_policy_object(doc) for _, doc in docs):
        return load_policy(path)
    policies: list[Policy] = []
    teams: list[Policy] = []
    errors: list[FieldError] = []
    seen: set[str] = set()
    for source, doc in docs:
        if not is_policy_object(doc):
            raise PolicyError(
                source,
                [FieldError("", f"a file of {KIND} objects holds only {KIND} objects")],
            )
        namespaced = isinstance(doc, Mapping) and doc.get("kind") == NAMESPACED_KIND
        parse = parse_namespace_policy_object if namespaced else parse_policy_object
        try:
            p = parse(doc, source)
        except PolicyError as e:  # every object's problems at once, each naming its document
            ref = object_ref(doc)  # and the object: KartaPolicy/NAME
            errors.extend(
                FieldError(f"{source} {ref} {err.path}".strip(), err.message) for err in e.errors
            )
            continue
        if p.source in seen:
            ref = object_ref(doc)
            raise PolicyError(source, [FieldError(f"{ref} metadata.name", f"{p.source!r} twice")])
        seen.add(p.source)
        (teams if namespaced else policies).append(p)
    if errors:
        raise PolicyError(str(path), errors)
    cluster = combine(EMPTY, policies)
    for p in teams:  # refused at apply: checked here as the validating webhook would
        namespace = p.source.partition("/")[0]
        errors.extend(
            FieldError(f"{NAMESPACED_KIND}/{p.source} {e.path}", e.message)
            for e in cluster_conflicts(p, cluster, namespace)
        )
    if errors:
        raise PolicyError(str(path), errors)
    _, over = within_bounds(EMPTY, [*policies, *teams])
    if over:  # together past a bound of one policy: the file is refused, naming it
        refs = {p.source: _ref(p, teams) for p in (*policies, *teams)}
        raise PolicyError(
            str(path),
            [FieldError(f"{refs[n]} {e.path}", e.message) for n, es in over.items() for e in es],
        )
    return combine(EMPTY, policies, teams)
