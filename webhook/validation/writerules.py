"""The rules write locations are judged by: none at the root object, its metadata or its spec;
none that moves when the workload's metadata values change (probed on copies of each sample,
:mod:`webhook.validation.targets`); none that depends on the values the workload's author writes, beyond
comparisons with the definition's constants (read from the text and probed on copies of each
sample, :mod:`webhook.validation.writeshape`); and regular expressions only where they cannot backtrack
without bound (:mod:`webhook.jq.regexsafe`). A mixin of the checker."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.base.pointers import Path_, pointer
from webhook.jq import regexsafe
from webhook.jq.engine import Outcome, plain
from webhook.karta.fields import FRAGMENTED, INJECTABLES, Mode, Role
from webhook.karta.model import JqField, jq_fields
from webhook.validation import targets as writes
from webhook.validation import writeshape
from webhook.validation.state import NOT_EVALUATED, CheckerBase, mode, timed_out

#: The last segment each location field is expected to end with; another one absent from
#: every sample is likely a typo (``.spec.driver.lables``) that the webhook would create.
_LAST_SEGMENT: dict[Role, str] = {
    **{i.fragment: i.key for i in INJECTABLES if i.fragment is not None},
    Role.METADATA: "metadata",
}


@dataclass(slots=True)
class _LastSegment:
    """What the samples said of a write field's last segment."""

    name: str
    present: bool = False
    siblings: set[str] = field(default_factory=set)


class WriteRules(CheckerBase):
    def plain_writes(self, fields: list[JqField]) -> None:
        """From the text alone: plain write paths that end at the root, its metadata or its
        spec; write paths that let the workload's values steer them; regular expressions that
        can backtrack without bound (in any field)."""
        for f in fields:
            for problem in regexsafe.problems(f.expr):
                self.err(f.path, f"unsafe regular expression: {problem}")
            if not f.field.write:
                continue
            for problem in writeshape.problems(f.expr):
                self.err(f.path, problem)
                # refused already: not probed on the samples
                self._seen.update({(f.path, "value-dependent"), (f.path, "metadata-dependent")})
            if self.used(f):
                steps = plain(f.expr)
                misdirected = writes.misdirected_steps(steps, self.gvk) or writes.protected_steps(
                    steps
                )
                if misdirected:
                    self.err(f.path, misdirected, "misdirected")

    def write_rules(
        self,
        fields: list[JqField],
        outs: Mapping[tuple[str, str], Outcome],
        label: str,
        obj: Mapping[str, Any],
    ) -> None:
        """On one sample: no write location at the root, its metadata or its spec; and the
        same write locations when the workload's metadata values change."""
        mine = [f for f in fields if f.field.write and self.used(f) and outs[(f.expr, mode(f))].ok]
        root = self.k.root.name
        for f in mine:
            for p, _ in outs[(f.expr, mode(f))].items:
                problem = writes.misdirected(p, self.gvk) or writes.protected(p)
                own, note = writes.own_metadata(
                    p,
                    self.gvk,
                    fragment=f.role.value if f.field.pattern == FRAGMENTED else None,
                    is_root=f.component == root,
                )
                if note and note not in self.notes:
                    self.notes.append(note)
                if problem or own:
                    self.err(f.path, f"{problem or own} (sample {label})", "misdirected")
                    break
            self.last_segment(f, outs[(f.expr, mode(f))], obj)
        self.metadata_beside_pod_spec(mine, outs, label)
        probed = [f for f in mine if (f.path, "metadata-dependent") not in self._seen]
        if probed:  # (a field found to depend on one sample is not probed again)
            self.metadata_probes(probed, outs, label, obj)
        probed = [
            f
            for f in mine
            if (f.path, "metadata-dependent") not in self._seen
            and (f.path, "value-dependent") not in self._seen
        ]
        if probed:
            self.value_probes(probed, outs, label, obj)

    def metadata_beside_pod_spec(
        self, fields: list[JqField], outs: Mapping[tuple[str, str], Outcome], label: str
    ) -> None:
        """A ``metadataPath`` location is its pod's own metadata: beside the ``podSpecPath``
        location it pairs with (same parent), or that same node (a kind that inlines pod
        labels in the spec). The workload's own metadata is the Pod's alone (refused as
        misdirected otherwise)."""
        for meta in (f for f in fields if f.role == Role.METADATA):
            spec = next(
                (f for f in fields if f.role == Role.POD_SPEC and f.component == meta.component),
                None,
            )
            if spec is None or any(e.path == meta.path for e in self.found.errors):
                continue
            metas = [p for p, _ in outs[(meta.expr, mode(meta))].items]
            specs = [p for p, _ in outs[(spec.expr, mode(spec))].items]
            for m, sp in zip(metas, specs, strict=False):
                if tuple(m) == tuple(sp) or (len(m) == len(sp) and tuple(m[:-1]) == tuple(sp[:-1])):
                    continue
                self.err(
                    meta.path,
                    f"location {pointer(m) or '/'} is not the pod's own metadata: it must be "
                    f"beside its podSpecPath location {pointer(sp) or '/'} (the same parent), or "
                    f"that same node where the kind inlines pod labels in the spec (sample {label})",
                    "metadata-beside",
                )
                break

    def last_segment(self, f: JqField, out: Outcome, obj: Mapping[str, Any]) -> None:
        """Record whether the last segment of ``f``'s locations exists on this sample (fields
        whose expected name is known: fragments and ``metadataPath``)."""
        expected = _LAST_SEGMENT.get(f.role)
        if expected is None:
            return
        for p, _ in out.items:
            if not p or not isinstance(p[-1], str) or p[-1] == expected:
                continue
            seen = self._last_segments.setdefault(f.path, _LastSegment(p[-1]))
            parent = _get(obj, p[:-1])
            if isinstance(parent, Mapping):
                if p[-1] in parent:
                    seen.present = True
                seen.siblings.update(k for k in parent if isinstance(k, str))

    def last_segments(self) -> None:
        """After every sample: a last segment absent from all of them (and not the field's
        expected name) is likely a typo the webhook would create: a warning. With a schema
        that describes the field's parent, the schema check has judged it already (an unknown
        field is an error there, with the closest names): a warning only where the schema
        could not judge it (it keeps unknown fields)."""
        for path, seen in self._last_segments.items():
            if seen.present:
                continue
            if self.schema is not None and not any(
                w.startswith(f"{path}:") for w in self.found.warnings
            ):
                continue  # the schema has judged it (an error if unknown)
            role = next((f.role for f in jq_fields(self.k) if f.path == path), None)
            expected = _LAST_SEGMENT.get(role) if role is not None else None
            names = sorted({*(n for n in (expected,) if n), *seen.siblings})
            close = difflib.get_close_matches(seen.name, names, n=2, cutoff=0.6)
            hint = f"; did you mean {' or '.join(json.dumps(c) for c in close)}?" if close else ""
            message = (
                f"last segment {json.dumps(seen.name)} is absent from every sample; the "
                f"webhook would create it{hint}"
            )
            self.warn(f"{path}: {message}")

    def value_probes(
        self,
        fields: list[JqField],
        outs: Mapping[tuple[str, str], Outcome],
        label: str,
        obj: Mapping[str, Any],
    ) -> None:
        """Evaluate the write paths on copies of the sample whose string and number values
        are changed, except those equal to the expressions' constants (so every comparison
        with a constant keeps its result); refuse locations that move (``length`` of a string
        in a condition, which the text cannot tell from ``length`` of a list)."""
        batch = list(dict.fromkeys((f.expr, mode(f)) for f in fields))
        base = {req: _locations(outs[req]) for req in batch}
        strings, numbers = writeshape.constants(expr for expr, _ in batch)
        for variant in (0, 1):
            probe = writeshape.substituted(obj, strings, numbers, variant)
            moved = self.moved(batch, base, probe)
            if moved is None:
                return
            for f in fields:
                req = (f.expr, mode(f))
                if req not in moved:
                    continue
                after = moved[req]
                now = (
                    f"it fails: {after.error}"
                    if after.error
                    else f"they are {_pointers(_locations(after))}"
                )
                self.err(
                    f.path,
                    f"write locations depend on the values the workload's author writes: on "
                    f"sample {label} they are {_pointers(base[req])}; with its string and "
                    f"number values changed ({'longer' if variant == 0 else 'shorter'}; those "
                    f"equal to the definition's constants kept), {now}. A write location may "
                    "depend only on the object's shape (keys, presence, list lengths) and on "
                    "== / != comparisons of its values with the definition's constants",
                    "value-dependent",
                )
            batch = [req for req in batch if req not in moved]
            fields = [f for f in fields if (f.expr, mode(f)) not in moved]
            if not batch:
                return

    def metadata_probes(
        self,
        fields: list[JqField],
        outs: Mapping[tuple[str, str], Outcome],
        label: str,
        obj: Mapping[str, Any],
    ) -> None:
        """Evaluate the write paths on copies of the sample with other metadata values (the
        expressions' own constants among them); refuse locations that move."""
        batch = list(dict.fromkeys((f.expr, mode(f)) for f in fields))
        base = {req: _locations(outs[req]) for req in batch}
        values, keys = writes.constants(expr for expr, _ in batch)
        for probe in writes.probes(obj, values, keys):
            moved = self.moved(batch, base, probe.obj)
            if moved is None:
                return  # the budget ran out: reported at the fields
            for f in fields:
                req = (f.expr, mode(f))
                if req in moved:
                    self.depends(f, req, base[req], probe, moved[req], obj, keys, label)
            batch = [req for req in batch if req not in moved]
            fields = [f for f in fields if (f.expr, mode(f)) not in moved]
            if not batch:
                return

    def moved(
        self,
        batch: list[tuple[str, Mode]],
        base: Mapping[tuple[str, Mode], frozenset[Path_]],
        obj: Mapping[str, Any],
    ) -> dict[tuple[str, Mode], Outcome] | None:
        """The requests of ``batch`` whose locations on ``obj`` differ from ``base`` (their
        outcome there); None when the budget ran out first."""
        results = self.bounded(batch, obj)
        spent = [r for r in results if r.error and r.error.startswith(NOT_EVALUATED)]
        if spent:
            for expr, _ in batch:
                for f in jq_fields(self.k):
                    if f.expr == expr and f.field.write:
                        self.err(
                            f.path, f"{spent[0].error} (metadata independence not checked)", "run"
                        )
            return None
        return {
            req: out
            for req, out in zip(batch, results, strict=True)
            if out.error or _locations(out) != base[req]
        }

    def depends(
        self,
        f: JqField,
        req: tuple[str, Mode],
        before: frozenset[Path_],
        probe: writes.Probe,
        after: Outcome,
        obj: Mapping[str, Any],
        keys: Sequence[str],
        label: str,
    ) -> None:
        """Refuse ``f``: name the metadata field(s) whose change alone moves its locations."""
        culprits: list[tuple[str, Outcome]] = []
        # A probe that overran is not re-run field by field (each would overrun again).
        for name in () if timed_out(after) else writes.METADATA_FIELDS:
            single = writes.changed(obj, name, probe.value, keys)
            moved = self.moved([req], {req: before}, single.obj)
            if moved is None:
                return
            if req in moved:
                culprits.append((name, moved[req]))
        if culprits:
            which = " and ".join(f".metadata.{name}" for name, _ in culprits)
            name, after = culprits[0]
            change = _change(name, probe.value)
        else:
            which = "the workload's metadata (name, namespace, labels and annotations together)"
            change = f"name, namespace, label and annotation values {json.dumps(probe.value)}"
        now = (
            f"it fails: {after.error}"
            if after.error
            else f"they are {_pointers(_locations(after))}"
        )
        self.err(
            f.path,
            f"write locations depend on {which}: on sample {label} they are "
            f"{_pointers(before)}; with {change}, {now}",
            "metadata-dependent",
        )


def _get(obj: Any, tokens: Sequence[Any]) -> Any:
    """The value at jq path ``tokens`` of ``obj`` (None where it is absent)."""
    cur = obj
    for t in tokens:
        if isinstance(cur, Mapping) and isinstance(t, str):
            cur = cur.get(t)
        elif isinstance(cur, list) and isinstance(t, int) and -len(cur) <= t < len(cur):
            cur = cur[t]
        else:
            return None
    return cur


def _change(name: str, value: str) -> str:
    """How a probe changed one metadata field, in words."""
    if name in ("labels", "annotations"):
        return f"{name} set to {json.dumps(value)}"
    return f".metadata.{name} {json.dumps(value)}"


def _locations(o: Outcome) -> frozenset[Path_]:
    """An outcome's locations as a set (a slice token, an object, as its JSON text)."""
    if not o.ok:
        return frozenset()
    return frozenset(
        tuple(t if isinstance(t, str | int) else json.dumps(t, sort_keys=True) for t in p)
        for p, _ in o.items
    )


def _pointers(locations: frozenset[Path_], limit: int = 3) -> str:
    if not locations:
        return "none"
    shown = sorted(pointer(p) or "/" for p in locations)
    return ", ".join(shown[:limit]) + (", …" if len(shown) > limit else "")
