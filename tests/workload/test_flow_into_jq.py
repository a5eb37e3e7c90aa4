"""One /mutate reaches into ``jq/`` from ``mutation/`` and ``workload/`` only to evaluate the
definition's expressions (issue 38 item 4): JSON locations, reads at a location and JSON
Pointers are ``webhook.base.pointers``'s. Followed on every bundled sample with a
definition, under a policy that writes, with ``sys.setprofile``."""

from __future__ import annotations

import sys
from collections import Counter
from types import FrameType
from typing import Any

import yaml
from helpers import ENGINE, POLICY, REGISTRY, SAMPLES

from webhook.admission.handlers import mutate_with
from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.karta.model import Karta
from webhook.mutation.policyfile import parse_policy

#: What evaluating a definition's expressions is: the engine's evaluation, the walk of plain
#: paths together, and an evaluation's result (the dataclass ``Outcome`` built from them)
EVALUATION = {"Engine.evaluate", "walked", "__create_fn__.<locals>.__init__"}


def _objects() -> list[tuple[Karta, dict[str, Any]]]:
    out = []
    for d in sorted(SAMPLES.iterdir()):
        for f in sorted(d.glob("*.yaml")):
            for _, obj in read_documents(f):
                karta = REGISTRY.lookup(GVK.of(obj)) if isinstance(obj, dict) else None
                if karta is not None and isinstance(obj, dict):
                    out.append((karta, obj))
    return out


def test_a_mutation_calls_into_jq_only_to_evaluate() -> None:
    policy = parse_policy(yaml.safe_load(POLICY))
    objects = _objects()
    assert len(objects) > 60
    for karta, obj in objects:  # the definitions' work done once, as the registry's is
        mutate_with(karta, policy, obj, ENGINE)
    calls: Counter[tuple[str, str]] = Counter()

    def follow(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or not frame.f_globals.get("__name__", "").startswith("webhook.jq"):
            return
        up = frame.f_back
        caller = up.f_globals.get("__name__", "") if up is not None else ""
        if caller.startswith(("webhook.mutation", "webhook.workload")):
            calls[(caller, frame.f_code.co_qualname)] += 1

    sys.setprofile(follow)
    try:
        for karta, obj in objects:
            mutate_with(karta, policy, obj, ENGINE)
    finally:
        sys.setprofile(None)
    assert calls, "the flow was not followed"
    assert {name for _, name in calls} <= EVALUATION, calls
    assert not [c for c, _ in calls if c.startswith("webhook.mutation")], calls
