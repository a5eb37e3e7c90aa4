"""What resolution pairs with the locations a definition found: the workload's identity, each
instance's id (from ``instanceIdPath`` when it fits, else from the locations themselves) and
its replica counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from webhook.base.gvk import GVK
from webhook.base.pointers import Path_
from webhook.base.reader import type_name
from webhook.jq.engine import Outcome
from webhook.karta.fields import Role
from webhook.karta.locations import as_count
from webhook.karta.model import Component, Karta


def identity(karta: Karta, obj: Mapping[str, Any]) -> tuple[GVK, str, str]:
    """The workload's kind (the definition's when the object names none), name (or
    ``generateName``) and namespace."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    gvk = GVK.of(obj) or (karta.gvk or GVK("", "", ""))
    name = str(meta.get("name") or meta.get("generateName") or "")
    return gvk, name, str(meta.get("namespace") or "")


def instance_ids(
    c: Component, locs: list[Path_ | None], out: Outcome | None, warnings: list[str]
) -> list[str]:
    """Ids for the locations a component's definition found (instances or not): from
    ``instanceIdPath`` (``out``, what it gave) when it agrees with them in count; otherwise
    the key or index that tells them apart (never ``keys`` paired with ``.[]``: libjq
    iterates objects in insertion order, so the location is the truth)."""
    n = len(locs)
    if out is not None:
        ids = out.items
        if out.error:
            warnings.append(f"component {c.name!r}: instanceIdPath: {out.error}")
        elif len(ids) != n:
            if n:
                warnings.append(
                    f"component {c.name!r}: instanceIdPath gave {len(ids)} id(s) for {n} location(s); ids taken from the locations"
                )
        elif all(isinstance(i, str) and i for i in ids):
            return list(ids)
        else:
            bad = next(i for i in ids if not (isinstance(i, str) and i))
            what = '""' if bad == "" else type_name(bad)
            warnings.append(
                f"component {c.name!r}: instanceIdPath gave {what}, not a non-empty string; ids taken from the locations"
            )
    if n <= 1:
        return [c.name] * n
    return _ids_from_locations([loc or () for loc in locs])


def _ids_from_locations(locs: list[Path_]) -> list[str]:
    """Ids that tell ``locs`` apart: the key or index of the first step where they differ
    (``.spec.replicatedJobs[]`` → the job's index), or, when that step repeats (nested lists:
    two roles of group 0), every differing step joined with ``-``; positions as a last resort."""
    width = min(len(p) for p in locs)
    differing = [toks for d in range(width) if len(set(toks := [p[d] for p in locs])) > 1]
    for steps in (differing[:1], differing):
        ids = ["-".join(str(t) for t in toks) for toks in zip(*steps, strict=True)]
        if ids and len(set(ids)) == len(ids):
            return ids
    return [str(i) for i in range(len(locs))]


#: the scale fields, in :class:`~webhook.workload.model.Instance`'s order
SCALE = (Role.REPLICAS, Role.MIN_REPLICAS, Role.MAX_REPLICAS)


def scale_values(
    c: Component, role: Role, n: int, out: Outcome | None, warnings: list[str]
) -> list[int | None]:
    """The replica counts (``role``) of ``n`` instances from what the field gave (``out``):
    one per instance, or one for all; None where a count is missing or not one."""
    if out is None or n == 0:
        return [None] * n
    name = role.value
    if out.error:
        warnings.append(f"component {c.name!r}: {name}: {out.error}")
        return [None] * n
    vals = [as_count(v) if v is not None else None for v in out.items]
    bad = [v for v, conv in zip(out.items, vals, strict=True) if v is not None and conv is None]
    if bad:
        warnings.append(
            f"component {c.name!r}: {name} gave {json.dumps(bad[0])}, not a non-negative integer"
        )
    if len(vals) == n:
        return vals
    if len(vals) == 1:
        return vals * n  # one component-wide value
    if vals:
        warnings.append(
            f"component {c.name!r}: {name} gave {len(vals)} value(s) for {n} instance(s)"
        )
    return [None] * n
