"""The structural rules of a Karta definition: what can be judged without running any jq.

Upstream's rules (reference §2.1) with upstream's wording, each at its field, plus a few it
lacks (suspend values that are not JSON, pod-group subgroups naming no component). All problems
are reported at once; :func:`check_structure` never raises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from webhook.base.errors import FieldError, join_path
from webhook.base.names import label_value_errors, qualified_name_errors
from webhook.karta.fields import Role
from webhook.karta.format import unknown_fields
from webhook.karta.model import Component, Karta
from webhook.karta.statusmodel import STATUS_ORDER

#: upstream's library at the version the KAI scheduler pins (hack/karta-oracle builds it): a
#: definition that uses a field its CRD lacks is refused there, so validate warns
UPSTREAM_PINNED = "github.com/run-ai/karta v0.1.1-0.20260708043952-998140308a96"


@dataclass
class Findings:
    """Errors (the definition is refused) and warnings (it is not, but something is off)."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def err(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)


def check_structure(k: Karta) -> Findings:
    out = Findings()
    out.errors.extend(unknown_fields(k.raw))
    names_ok = _names(k, out)
    _root(k.root, out)
    if names_ok:  # with ambiguous names, ownership cannot be judged (upstream stops too)
        _ownership(k, out)
    for comp in k.components:
        _component(comp, comp is k.root, out)
    _pod_groups(k, out)
    return out


def _names(k: Karta, out: Findings) -> bool:
    seen: set[str] = set()
    ok = True
    for comp in k.components:
        path = join_path(comp.field_path, "name")
        if not comp.name:
            out.err(path, "component name is empty")
            ok = False
        elif comp.name in seen:
            out.err(path, f"component name {comp.name} is not unique")
            ok = False
        seen.add(comp.name)
    return ok


#: The kinds of the core API group (``group: ""``), where an empty group is the full kind; for
#: any other kind an empty group is a group left out.
CORE_KINDS = frozenset(
    {
        "Binding", "ComponentStatus", "ConfigMap", "Endpoints", "Event", "LimitRange",
        "Namespace", "Node", "PersistentVolume", "PersistentVolumeClaim", "Pod", "PodTemplate",
        "ReplicationController", "ResourceQuota", "Secret", "Service", "ServiceAccount",
    }
)  # fmt: skip


def _root(root: Component, out: Findings) -> None:
    rp = root.field_path
    kind = root.kind
    if (
        kind is None
        or not kind.version
        or not kind.kind
        or (not kind.group and kind.kind not in CORE_KINDS)
    ):
        out.err(join_path(rp, "kind"), "root component must have full kind (group, version, kind)")
    if root.owner_ref:
        out.err(join_path(rp, "ownerRef"), "root component cannot have owner ref")
    if root.status is None:
        out.err(join_path(rp, "statusDefinition"), "root component must have status definition")


def _ownership(k: Karta, out: Findings) -> None:
    names = {c.name for c in k.components}
    owner_ok = True
    for comp in k.children:
        op = join_path(comp.field_path, "ownerRef")
        if not comp.owner_ref:
            out.err(op, f"child component '{comp.name}' has no owner ref")
            owner_ok = False
        elif comp.owner_ref not in names:
            out.err(
                op,
                f"child component '{comp.name}' has owner ref to non-existing "
                f"component '{comp.owner_ref}'",
            )
            owner_ok = False
    if owner_ok:
        _cycles(k, out)


def _cycles(k: Karta, out: Findings) -> None:
    owner = {c.name: c.owner_ref for c in k.children}
    reported: set[str] = set()
    for comp in k.children:
        seen: list[str] = []
        cur: str | None = comp.name
        while cur is not None and cur in owner and cur not in seen:
            seen.append(cur)
            cur = owner[cur]
        if cur is not None and cur in seen:
            cycle = seen[seen.index(cur) :]
            if reported.isdisjoint(cycle):
                reported.update(cycle)
                first = next(c for c in k.children if c.name in cycle)
                out.err(
                    join_path(first.field_path, "ownerRef"),
                    f"ownership cycle detected involving component {first.name} "
                    f"({' -> '.join([*cycle, cur])})",
                )


def _component(comp: Component, is_root: bool, out: Findings) -> None:
    p = comp.field_path
    if not is_root and comp.status is not None:
        out.warn(f"{join_path(p, 'statusDefinition')}: only the root's status is used")
    if comp.status is not None:
        mp = join_path(join_path(p, "statusDefinition"), "statusMappings")
        for key in comp.status.unknown:
            out.warn(
                f"{join_path(mp, key)}: unknown status category, not evaluated "
                f"(known: {', '.join(STATUS_ORDER)})"
            )
        for key, matchers in comp.status.mappings.items():
            for i, m in enumerate(matchers):
                if m.empty:
                    out.warn(
                        f"{join_path(join_path(mp, key), i)}: a matcher with no clauses "
                        f"matches every object (always {key})"
                    )
    sp = join_path(p, "specDefinition")
    if len(comp.patterns) > 1:
        out.err(
            sp,
            f"component {comp.name} has multiple pod spec definitions "
            f"({', '.join(comp.patterns)}); use one",
        )
    if comp.expr(Role.METADATA) and not comp.expr(Role.POD_SPEC):
        # Upstream documents the pairing but does not enforce it; alone it is never read.
        out.warn(
            f"{join_path(sp, 'metadataPath')}: metadataPath is only allowed with podSpecPath; "
            "it is ignored"
        )
    sel = comp.expr(Role.INSTANCE_SELECTOR)
    if comp.expr(Role.INSTANCE_ID) and not sel:
        out.err(
            join_path(p, "instanceIdPath"),
            f"component {comp.name} has instance id path but no pod component instance selector",
        )
    if sel and not comp.expr(Role.INSTANCE_ID):
        out.err(
            join_path(p, "podSelector.componentInstanceSelector"),
            f"component {comp.name} has pod component instance selector but no instance id path",
        )
    if comp.suspend is not None:
        _suspend_values(comp, out)
    if comp.type_selector:
        _type_selector(comp, out)


def _type_selector(comp: Component, out: Findings) -> None:
    """Upstream's rules for ``componentTypeSelector`` (its CRD's validation rules), and label
    syntax for ``matchLabels``: a key or value no pod can carry would select nothing."""
    tp = join_path(comp.field_path, "podSelector.componentTypeSelector")
    key, labels = comp.expr(Role.TYPE_KEY), comp.type_labels
    if not key and labels is None:
        out.err(tp, "at least one of keyPath or matchLabels must be set")
    if comp.type_value is not None and not key:
        out.err(join_path(tp, "value"), "value requires keyPath")
    if labels is None:
        return
    lp = join_path(tp, "matchLabels")
    out.warn(
        f"{lp}: not in the Karta CRD of upstream's {UPSTREAM_PINNED} (the version KAI "
        "pins): an API server with that CRD refuses it (strict field validation) or drops it, "
        "and that version's library does not read it; it needs upstream's newer format"
    )
    if not labels:
        out.err(lp, "must have at least one label")
    for k, v in labels.items():
        for problem in qualified_name_errors(k):
            out.err(join_path(lp, k), f"label key {k!r}: {problem}")
        for problem in label_value_errors(v):
            out.err(join_path(lp, k), f"label value {v!r}: {problem}")


def _suspend_values(comp: Component, out: Findings) -> None:
    assert comp.suspend is not None
    sp = join_path(comp.field_path, "suspendDefinition")
    for group, actions in comp.suspend.groups():
        gp = join_path(sp, group)
        if not actions:
            out.err(gp, "must have at least one action")
        for i, a in enumerate(actions):
            try:
                json.loads(a.value)
            except ValueError as e:
                out.err(
                    join_path(join_path(gp, i), "value"),
                    f'must be a JSON value (e.g. true, 0, "text"): {e}',
                )


def _pod_groups(k: Karta, out: Findings) -> None:
    names = {c.name for c in k.components}
    for path, name in k.instructions.components():
        if name and name not in names:
            out.err(path, f"pod-group member component '{name}' is not defined")
