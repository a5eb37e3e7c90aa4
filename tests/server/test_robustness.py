"""Odd objects never break the engine: every sample, with parts swapped for the wrong type.

The mutating webhook sees whatever the API server was sent, and a definition written for one
version of a CRD meets objects of another. Whatever the shape, resolution and planning must
return (warnings, not exceptions), and every patch they make must apply.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest
from helpers import ENGINE

from webhook.admission.registry import load_registry
from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.karta.loading import catalog_dir
from webhook.mutation.plan import plan
from webhook.mutation.policyfile import parse_policy
from webhook.workload.locator import resolve

REGISTRY = load_registry()
POLICY = parse_policy(
    {
        "rules": [
            {
                "name": "all",
                "schedulerName": "kai-scheduler",
                "labels": {"example.com/team": "ml", "instance": "$(instance)"},
                "annotations": {"example.com/owner": "$(workload.name)"},
            }
        ]
    }
)
ODD = [None, "text", 7, True, [], {}, ["x"], {"containers": "nope"}]
SAMPLES = sorted((catalog_dir() / "samples").rglob("*.yaml"))


def _places(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _places(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _places(v, (*path, i))


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(obj)
    cur = out
    for tok in path[:-1]:
        cur = cur[tok]
    cur[path[-1]] = value
    return out


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_wrong_types_anywhere_give_warnings_not_exceptions(sample: Any) -> None:
    [(_, obj)] = read_documents(sample)
    karta = REGISTRY.lookup(GVK.of(obj))
    assert karta is not None
    rng = random.Random(sample.name)
    places = [p for p in _places(obj) if p and p[0] == "spec"]
    for path in rng.sample(places, min(25, len(places))):
        odd = _replace(obj, path, rng.choice(ODD))
        full = resolve(karta, odd, ENGINE)
        assert full.gpus >= 0
        result = plan(resolve(karta, odd, ENGINE, full=False), POLICY, odd)
        patched = jsonpatch.apply_patch(odd, result.ops)
        again = plan(resolve(karta, patched, ENGINE, full=False), POLICY, patched)
        assert again.ops == [], (path, again.ops)
