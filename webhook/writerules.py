"""The rules write locations are judged by: none at the root object, its metadata or its spec;
none that moves when the workload's metadata values change (probed on copies of each sample,
:mod:`webhook.writes`); none that depends on the values the workload's author writes, beyond
comparisons with the definition's constants (read from the text and probed on copies of each
sample, :mod:`webhook.writeshape`); and regular expressions only where they cannot backtrack
without bound (:mod:`webhook.regexsafe`). A mixin of the checker."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from webhook import regexsafe, writes, writeshape
from webhook.checkbase import NOT_EVALUATED, CheckerBase, mode, timed_out
from webhook.definitions import JqField, jq_fields
from webhook.fields import Mode
from webhook.jqexpr import Outcome, Path_, plain, pointer


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
                misdirected = writes.misdirected_steps(plain(f.expr), self.gvk)
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
        for f in mine:
            for p, _ in outs[(f.expr, mode(f))].items:
                problem = writes.misdirected(p, self.gvk)
                if problem:
                    self.err(f.path, f"{problem} (sample {label})", "misdirected")
                    break
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
