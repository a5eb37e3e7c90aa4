"""The rules a definition's expressions are judged by on one sample: write paths find their
targets and those have the right shape, instance ids and replica counts have the right type and
count and pair up with the templates, status expressions run. A mixin of the checker."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from webhook.base.pointers import pointer
from webhook.base.reader import type_name
from webhook.jq.engine import Outcome
from webhook.karta.fields import FRAGMENTED, Role
from webhook.karta.locations import as_count, creatable, instance_depths, parent_object
from webhook.karta.model import JqField
from webhook.validation.state import NOT_EVALUATED, TIMED_OUT, UNKNOWN, CheckerBase, mode

SCALE = (Role.REPLICAS, Role.MIN_REPLICAS, Role.MAX_REPLICAS)


class SampleRules(CheckerBase):
    def one_sample(
        self,
        fields: list[JqField],
        outs: dict[tuple[str, str], Outcome],
        label: str,
        obj: Mapping[str, Any],
        found: dict[str, list[str]],
        missing: dict[str, list[str]],
        evaluated: dict[str, int],
        suspend_hits: dict[str, int],
    ) -> None:
        # How many locations each component's pod-spec path finds here (UNKNOWN when the path
        # failed or was not run); instance ids and replica counts pair up with them. A
        # component without a pod-spec path pairs its counts with its instance ids.
        counts: dict[str, int] = dict.fromkeys(self.unrunnable, UNKNOWN)
        ids: dict[str | None, int] = {}
        for f in fields:
            if f.role == Role.INSTANCE_ID and f.component not in self.written:
                got = outs[(f.expr, mode(f))]
                if got.ok:
                    ids[f.component] = len(got.items)
        for f in fields:
            if f.component is None or not f.field.primary:
                continue
            out = outs[(f.expr, mode(f))]
            if out.error or counts.get(f.component, 0) == UNKNOWN:
                counts[f.component] = UNKNOWN
            else:
                counts[f.component] = max(counts.get(f.component, 0), len(out.items))
        # Where each fragmented component's instances have their own object (the common
        # prefix of their write fragments' locations): missing holders inside it are created.
        written: dict[str | None, list[list[Any]]] = {}
        for f in fields:
            if f.field.write and f.field.pattern == FRAGMENTED:
                got = outs[(f.expr, mode(f))]
                if got.ok:
                    written.setdefault(f.component, []).append([p for p, _ in got.items])
        depths = {comp: instance_depths(locs) for comp, locs in written.items()}
        for f in fields:
            out = outs[(f.expr, mode(f))]
            n = counts.get(f.component, 0) if f.component in self.written else None
            if out.error:
                self.run_error(f, out.error, label, n)
                continue
            if f.field.write:
                evaluated[f.path] += 1
                if out.absent:
                    self.warn(
                        f"{f.path}: iterates over an absent (null) value in sample {label}: "
                        "no location there"
                    )
                root = f.component == self.k.root.name
                within = depths.get(f.component, [])
                hits = [
                    p
                    for i, (p, v) in enumerate(out.items)
                    if _exists(f, obj, p, v, root, within[i] if i < len(within) else 0)
                ]
                (found if hits else missing)[f.path].append(label)
                self.contents(f, out.items, label)
            elif f.role == Role.SUSPEND_ACTION:
                suspend_hits[f.path] = suspend_hits.get(f.path, 0) + len(out.items)
            elif f.role == Role.CONDITIONS:
                for v in out.items:
                    if v is not None and not isinstance(v, list):
                        self.err(
                            f.path,
                            f"must yield the conditions list (or null); gave {_shown(v, label)} "
                            f"on sample {label}",
                            "conditions",
                        )
                        break
            elif f.role == Role.INSTANCE_ID:
                self.instance_ids(f, out, n, label)
            elif f.role in SCALE:
                self.scale(f, out, n, ids.get(f.component), label)

    def run_error(self, f: JqField, error: str, label: str, n: int | None) -> None:
        if error.startswith(TIMED_OUT):
            self.err(f.path, f"{error} on sample {label} (endless or too costly?)", "run")
        elif error.startswith(NOT_EVALUATED):
            self.err(f.path, f"{error} (sample {label})", "run")
        elif f.role == Role.INSTANCE_ID and n == 0:
            # `.spec.m | to_entries[]` fails on an absent map where `.spec.m[]` finds nothing
            self.warn(f"{f.path}: fails on sample {label}, which has no instances: {error}")
        elif f.role in SCALE:
            # Counts feed describe and GPU totals, not the writes: an unknown count is no reason
            # to refuse every mutation of the kind (upstream's JobSet reads an unset field).
            self.warn(f"{f.path}: fails on sample {label}: {error}; the count is unknown there")
        elif error.startswith("Invalid path expression") and f.field.mode == "paths":
            self.err(
                f.path,
                f"must be a path expression (it is written to), but on sample {label}: {error}",
                "run",
            )
        else:
            self.err(f.path, f"fails on sample {label}: {error}", "fails")

    def contents(self, f: JqField, items: list[tuple[Any, Any]], label: str) -> None:
        for p, v in items:
            if v is None:
                continue
            where = f"{pointer(p) or '/'} in sample {label}"
            problem = _shape_problem(f.role, v)
            if problem:
                self.err(f.path, f"{where} is not {problem}: {_shown(v, label)}", "shape")
                return

    def instance_ids(self, f: JqField, out: Outcome, n: int | None, label: str) -> None:
        ids = out.items
        bad = [i for i in ids if not isinstance(i, str) or not i]
        if bad:
            self.err(
                f.path,
                f"must yield non-empty strings; gave {_shown(bad[0], label)} on sample {label}",
                "ids",
            )
            return
        dups = sorted(i for i, k in Counter(ids).items() if k > 1)
        if dups:
            shown = "" if _private(label) else " " + ", ".join(dups)
            self.err(f.path, f"yields duplicate id(s){shown} on sample {label}", "ids")
            return
        if n is not None and n != UNKNOWN and len(ids) != n:
            self.err(
                f.path,
                f"yields {len(ids)} id(s) but the component's pod template path finds "
                f"{n} location(s) on sample {label}; they must pair up one to one",
                "ids",
            )

    def scale(self, f: JqField, out: Outcome, n: int | None, ids: int | None, label: str) -> None:
        for v in out.items:
            if isinstance(v, int) and not isinstance(v, bool) and v < 0:
                # Milvus's -1: the replicas are an HPA's to decide; the count is unknown.
                self.warn(
                    f"{f.path}: gave {v} on sample {label}; a negative count is read as unknown"
                )
            elif v is not None and as_count(v) is None:
                self.err(
                    f.path,
                    f"must yield non-negative integers (or numeric strings); gave {_shown(v, label)} "
                    f"on sample {label}",
                    "scale",
                )
                return
        got = len(out.items)
        if n == UNKNOWN:
            return
        if n is None and ids is not None and got > 1:
            if got != ids:
                self.err(
                    f.path,
                    f"yields {got} value(s) but instanceIdPath yields {ids} id(s) on sample "
                    f"{label}; the component has no pod template path, so they must pair up",
                    "scale",
                )
            else:
                self.warn(
                    f"{f.path}: the component has no pod template path; its {got} values pair "
                    f"with its instance ids (sample {label})"
                )
            return
        if n is not None and got not in (0, 1, n):
            self.err(
                f.path,
                f"yields {got} value(s) but the component has {n} instance(s) on sample "
                f"{label}; give one per instance or one for all",
                "scale",
            )
        elif n is None and got > 1:
            self.err(
                f.path,
                f"yields {got} values on sample {label}, but the component has no pod template "
                "path to pair them with; give one value",
                "scale",
            )


SCALE = (Role.REPLICAS, Role.MIN_REPLICAS, Role.MAX_REPLICAS)


def _exists(
    f: JqField, obj: Any, path: tuple[Any, ...], value: Any, root: bool, within: int
) -> bool:
    """A write location counts as found when it has a value, or (for a field the mutation
    creates) when its parent object exists, or for a fragment can be created inside its
    instance's own object (``within`` steps; the root's is the workload) — by the rules
    resolution writes by (:func:`webhook.workload.slots.fragment_rows`)."""
    if value is not None:
        return True
    if not f.field.created:
        return False
    if parent_object(obj, path) is not None:
        return True
    if f.field.pattern != FRAGMENTED or not (root or within):
        return False
    return creatable(obj, path, 0 if root else within) is not None


def _shape_problem(role: Role, v: Any) -> str | None:
    """What a write location's value should be and is not, or None."""
    if role == Role.POD_TEMPLATE_SPEC:
        spec = v.get("spec") if isinstance(v, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
            return "a pod template (an object with spec.containers)"
    elif role == Role.POD_SPEC:
        if not isinstance(v, dict) or not isinstance(v.get("containers"), list):
            return "a pod spec (an object with containers)"
    elif role in (Role.METADATA, Role.LABELS, Role.ANNOTATIONS):
        if not isinstance(v, dict):
            return "an object"
    elif role == Role.SCHEDULER_NAME and not isinstance(v, str):
        return "a string"
    return None


def _private(label: str) -> bool:
    """A live object read from the cluster: whoever may create a Karta must not read its
    values through our messages (the webhook may list objects they cannot)."""
    return label.startswith("cluster:")


def _shown(v: Any, label: str) -> str:
    """``v`` as a message may quote it: its JSON, cut short, or only its type for a live
    object's value."""
    return type_name(v) if _private(label) else _short(v)


def _short(v: Any, limit: int = 60) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
