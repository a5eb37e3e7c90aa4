"""What a policy's rules see of a request beyond its kind and namespace name: the labels of
the namespace and of the workload (``match.namespaceSelector``, ``match.objectSelector``) and
the values of their metadata (``$(namespace.labels['k'])``, ``$(namespace.annotations['k'])``,
``$(workload.labels['k'])``, ``$(workload.annotations['k'])``). On UPDATE an ``objectSelector``
matches when the old or the new object's labels do (the API server's rule for webhooks);
values are read from the new object.

:func:`narrow` decides them for one request, before planning: the rules whose selectors do not
match are left out, and a value read from the metadata is written into the rule's template
(a bound rule, made once per distinct value and kept), so the planners see an ordinary policy
and the fast lane stays fast. A policy without selectors or such values is not touched.

Outcomes the API server's own selectors define are kept (``MutatingWebhookConfiguration``
``namespaceSelector``/``objectSelector``): a workload without a namespace (cluster-scoped)
matches every ``namespaceSelector``; the namespace's labels include
``kubernetes.io/metadata.name``, which the API server sets on every namespace. A namespace
that is not known (not yet seen by the watch; offline, no Namespace document and no
``--namespaces``) cannot be decided: where the API server would fail the call, the rule is
not applicable (a warning, and the policy's ``failureMode`` decides: ``open`` admits without
that rule, ``closed`` denies). A value whose key is missing (or longer than
:data:`~webhook.base.limits.VARIABLE_BYTES`, the most a variable is counted at when the policy's
bounds are checked) makes that setting not applicable in the same way; it is never written
as an empty value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from webhook.base.gvk import GVK
from webhook.base.limits import VARIABLE_BYTES
from webhook.mutation.plan import NOT_APPLICABLE
from webhook.mutation.policy import Policy, Rule, Setting, context_variable

#: the label the API server sets on every namespace (its name)
NAME_LABEL = "kubernetes.io/metadata.name"
#: bound rules kept per rule, and narrowed policies per policy, before the store is emptied
_KEEP = 4096


@dataclass(frozen=True)
class NamespaceMeta:
    """What the rules read of a namespace."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


class Namespaces(Protocol):
    """Namespaces by name: a dict (offline) or the cluster's namespace watch."""

    def get(self, name: str, /) -> NamespaceMeta | None: ...


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def namespace_meta(obj: Mapping[str, Any]) -> tuple[str, NamespaceMeta] | None:
    """A Namespace object's (or its metadata-only form's) name and what the rules read of it;
    None when it has no name."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    labels = _strings(meta.get("labels"))
    labels.setdefault(NAME_LABEL, name)
    return name, NamespaceMeta(labels, _strings(meta.get("annotations")))


def namespaces_of(docs: list[Any]) -> dict[str, NamespaceMeta]:
    """The Namespace objects among ``docs`` (``v1`` ``Namespace``), by name."""
    out: dict[str, NamespaceMeta] = {}
    for doc in docs:
        if (
            isinstance(doc, dict)
            and doc.get("kind") == "Namespace"
            and doc.get("apiVersion") == "v1"
        ):
            got = namespace_meta(doc)
            if got is not None:
                out[got[0]] = got[1]
    return out


@dataclass(slots=True)
class Narrowed:
    """A policy decided for one request: the rules that apply, with the metadata's values in
    them, and what could not be decided (``failures``, reason ``not_applicable``, with a
    warning each)."""

    policy: Policy
    warnings: list[str]
    failures: list[tuple[str, str]]


def narrow(
    policy: Policy,
    obj: Mapping[str, Any],
    gvk: GVK | None,
    namespace: str,
    namespaces: Namespaces | None,
    old: Mapping[str, Any] | None = None,
) -> Narrowed:
    """``policy`` for ``obj`` (of ``gvk``, in ``namespace``; ``""``: cluster-scoped), with the
    namespaces known (None: none), as the module docstring says. ``old``: on UPDATE, the
    object before it (an ``objectSelector`` matches when the old or the new object does)."""
    flags, any_flag, store, decided = _store(policy)
    if not any_flag:
        return Narrowed(policy, [], [])
    # The namespace is read once: every rule of the request sees one snapshot of it.
    ns = namespaces.get(namespace) if namespaces is not None and namespace else None
    if decided is None:
        return _narrow(policy, flags, store, obj, gvk, namespace, ns, old)
    # No rule reads the workload's own labels or annotations: the answer is the same for
    # every workload of one kind in one namespace as the watch has it (the namespace's
    # metadata object is replaced when it changes), so it is kept.
    key = (gvk, namespace, id(ns))
    hit = decided.get(key)
    if hit is not None and hit[0] is ns:
        return hit[1]
    got = _narrow(policy, flags, store, obj, gvk, namespace, ns)
    if len(decided) >= _KEEP:
        decided.clear()
    decided[key] = (ns, got)
    return got


def _narrow(
    policy: Policy,
    flags: tuple[bool, ...],
    store: dict[tuple[int, ...], Policy],
    obj: Mapping[str, Any],
    gvk: GVK | None,
    namespace: str,
    ns: NamespaceMeta | None,
    old: Mapping[str, Any] | None = None,
) -> Narrowed:
    warnings: list[str] = []
    failures: list[tuple[str, str]] = []
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    old_meta = old.get("metadata") if isinstance(old, Mapping) else None
    old_labels = _strings(old_meta.get("labels")) if isinstance(old_meta, Mapping) else None
    chosen: list[Rule] = []
    for rule, flag in zip(policy.rules, flags, strict=True):
        if not flag:
            chosen.append(rule)
            continue
        m = rule.match
        if gvk is not None and not m.workload(gvk, namespace):
            continue  # the planners would pass it by: no failure for a rule that does not match
        if (
            m.object_selector is not None
            and not m.object_selector.matches(_strings(meta.get("labels")))
            # as the API server matches a webhook's objectSelector on UPDATE: the old or the
            # new object (removing the label that selects it does not take a workload out)
            and (old_labels is None or not m.object_selector.matches(old_labels))
        ):
            continue
        if m.namespace_selector is not None and namespace:
            if ns is None:
                said = (
                    f"rule {rule.name!r}: namespace {namespace!r} is not known, so its "
                    "namespaceSelector cannot be decided"
                )
                warnings.append(f"{said}; not applicable, skipped")
                failures.append((NOT_APPLICABLE, said))
                continue
            if not m.namespace_selector.matches(ns.labels):
                continue
        bound = _bind(rule, meta, namespace, ns, warnings, failures)
        if bound is not None:
            chosen.append(bound)
    # One policy object per set of rules, kept, so that what the planners derive from its
    # rules and runs is derived once, not on every request.
    key = tuple(map(id, chosen))
    got = store.get(key)
    if got is None:
        if len(store) >= _KEEP:
            store.clear()
        got = Policy(tuple(chosen), policy.source, policy.operations, policy.failure_mode)
        store[key] = got
    return Narrowed(got, warnings, failures)


def contextual(policy: Policy) -> bool:
    """Whether a rule of ``policy`` has a label selector or a value read from metadata: what
    :func:`narrow` decides (kept per policy: a request pays one lookup)."""
    return _store(policy)[1]


def _contextual(rule: Rule) -> bool:
    return rule.match.selective or bool(_names(rule))


_Decided = dict[tuple[GVK | None, str, int], tuple["NamespaceMeta | None", Narrowed]]
_Store = tuple[tuple[bool, ...], bool, dict[tuple[int, ...], Policy], _Decided | None]
#: by policy (the policies in force and those :func:`webhook.mutation.policyindex.applicable`
#: made of them, each kept there), which of its rules are contextual, and the policies
#: narrowed from it by their rules
_STORES: dict[int, tuple[Policy, _Store]] = {}


def _store(policy: Policy) -> _Store:
    hit = _STORES.get(id(policy))
    if hit is not None and hit[0] is policy:
        return hit[1]
    flags = tuple(_contextual(r) for r in policy.rules)
    # Decisions are kept per kind and namespace when no rule reads the workload's own metadata.
    by_workload = any(
        r.match.object_selector is not None or any(v.startswith("workload.") for v in _names(r))
        for r, f in zip(policy.rules, flags, strict=True)
        if f
    )
    made: _Store = (flags, any(flags), {}, None if by_workload else {})
    if len(_STORES) >= _KEEP:
        _STORES.clear()
    _STORES[id(policy)] = (policy, made)
    return made


# --------------------------------------------------------------------------- values


def _names(rule: Rule) -> tuple[str, ...]:
    """The metadata variables ``rule``'s values name, each once, in order."""
    out: dict[str, None] = {}
    for _, settings in rule.settings:
        for s in settings:
            for _, var in s.pieces:
                if var is not None and context_variable(var) is not None:
                    out[var] = None
    return tuple(out)


def _lookup(
    var: str, meta: Mapping[str, Any], namespace: str, ns: NamespaceMeta | None
) -> tuple[str | None, str]:
    """The value of ``var`` for this request, or None with why not."""
    got = context_variable(var)
    assert got is not None
    whose, which, key = got
    noun = "label" if which == "labels" else "annotation"
    if whose == "workload":
        value = _strings(meta.get(which)).get(key)
        if value is None:
            return None, f"the workload has no {noun} {key!r}"
    elif not namespace:
        return None, "the workload has no namespace (it is cluster-scoped)"
    elif ns is None:
        return None, f"namespace {namespace!r} is not known"
    else:
        value = (ns.labels if which == "labels" else ns.annotations).get(key)
        if value is None:
            return None, f"namespace {namespace!r} has no {noun} {key!r}"
    if len(value.encode()) > VARIABLE_BYTES:
        return (
            None,
            f"its {len(value.encode()):,} bytes are more than a value of a variable may be ({VARIABLE_BYTES})",
        )
    return value, ""


def _bind(
    rule: Rule,
    meta: Mapping[str, Any],
    namespace: str,
    ns: NamespaceMeta | None,
    warnings: list[str],
    failures: list[tuple[str, str]],
) -> Rule | None:
    """``rule`` with the metadata's values written into its templates; a setting that names a
    value this request lacks is left out (a failure each). None when nothing is left."""
    names = rule.derive("scope.names", _names, rule)
    if not names:
        return rule
    looked = [_lookup(v, meta, namespace, ns) for v in names]
    values = tuple(v for v, _ in looked)
    if None in values:
        why = dict(zip(names, (w for _, w in looked), strict=True))
        for inj, settings in rule.settings:
            for s in settings:
                for _, var in s.pieces:
                    if var is not None and var in why and why[var]:
                        what = f"{inj.noun} {s.key}" if s.key else inj.noun
                        said = f"rule {rule.name!r}: {what} is not applicable: $({var}): {why[var]}"
                        warnings.append(f"{said}; skipped")
                        failures.append((NOT_APPLICABLE, said))
                        break
    store: dict[tuple[str | None, ...], Rule | None] = rule.derive("scope.bound", dict)
    try:
        return store[values]
    except KeyError:
        if len(store) >= _KEEP:
            store.clear()
        made = store[values] = _bound(rule, dict(zip(names, values, strict=True)))
        return made


def _escaped(text: str) -> str:
    return text.replace("$", "$$")


def _template(s: Setting, values: Mapping[str, str | None]) -> str | None:
    """``s``'s template with the metadata's values in it; None when one is missing."""
    out = ""
    for text, var in s.pieces:
        out += _escaped(text)
        if var is None:
            continue
        if var in values:
            value = values[var]
            if value is None:
                return None
            out += _escaped(value)
        else:
            out += f"$({var})"
    return out


def _bound(rule: Rule, values: Mapping[str, str | None]) -> Rule | None:
    sets: dict[str, tuple[tuple[str | None, str], ...]] = {}
    items: dict[str, tuple[Mapping[str, Any], ...]] = {}
    for inj, settings in rule.settings:
        kept = [(s, t) for s in settings if (t := _template(s, values)) is not None]
        if not kept:
            continue
        if inj.is_list:
            items[inj.key] = tuple(_item(s, t) for s, t in kept)
        else:
            sets[inj.key] = tuple((s.key, t) for s, t in kept)
    if not sets and not items:
        return None
    return Rule(name=rule.name, match=rule.match, sets=sets, overwrite=rule.overwrite, items=items)


def _item(s: Setting, template: str) -> Mapping[str, Any]:
    """A list entry (a toleration) with its value's template bound."""
    out = dict(s.item or ())
    if template:
        out["value"] = template
    return out
