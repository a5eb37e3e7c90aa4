"""The admission handlers (webhook.admission.handlers) called directly, as the server and the CLI do."""

from __future__ import annotations

import copy
from typing import Any

from fakeapi import karta
from helpers import (
    ENGINE,
    JOBSET_KARTA,
    JOBSET_SAMPLE,
    REGISTRY,
    SAMPLES,
    broken_karta,
    load,
    policy,
    sample,
)

from webhook.admission import handlers
from webhook.admission.handlers import mutate_object
from webhook.admission.review import Request
from webhook.admission.rulebook import conflicting_karta
from webhook.base.gvk import GVK
from webhook.karta.samples import SampleIndex
from webhook.mutation.policyfile import parse_policy


def _review(obj: dict[str, Any], operation: str) -> Any:
    return Request(
        uid="u",
        operation=operation,
        kind=GVK.of(obj),
        resource={},
        sub_resource="",
        name=obj["metadata"]["name"],
        namespace=obj["metadata"].get("namespace", ""),
        object=obj,
        old_object=obj if operation == "UPDATE" else None,
        dry_run=False,
    )


def test_an_object_being_deleted_is_left_alone() -> None:
    """An UPDATE that removes the last finalizer of a JobSet being deleted gets no patch."""
    obj = sample(*JOBSET_SAMPLE)
    both = parse_policy(
        {"operations": ["CREATE", "UPDATE"], "rules": [{"name": "r", "labels": {"a": "1"}}]}
    )
    assert handlers.mutate(_review(obj, "UPDATE"), REGISTRY, both, ENGINE).response.patch
    obj["metadata"]["deletionTimestamp"] = "2026-12-04T10:00:00Z"
    obj["metadata"]["finalizers"] = []
    r = handlers.mutate(_review(obj, "UPDATE"), REGISTRY, both, ENGINE)
    assert r.response.allowed and r.response.patch is None and r.outcome == "skipped"


def test_kind_without_definition_is_left_alone() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Unknown", "metadata": {"name": "u"}}
    assert mutate_object(REGISTRY, policy(labels={"a": "b"}), obj, ENGINE) is None


def test_update_is_mutated_only_when_the_policy_asks() -> None:
    obj = sample(*JOBSET_SAMPLE)
    create_only = policy(labels={"a": "1"})
    assert (
        handlers.mutate(_review(obj, "UPDATE"), REGISTRY, create_only, ENGINE).response.patch
        is None
    )
    assert handlers.mutate(_review(obj, "CREATE"), REGISTRY, create_only, ENGINE).response.patch
    both = parse_policy(
        {"operations": ["CREATE", "UPDATE"], "rules": [{"name": "r", "labels": {"a": "1"}}]}
    )
    assert handlers.mutate(_review(obj, "UPDATE"), REGISTRY, both, ENGINE).response.patch


# --------------------------------------------------------------------------- validate


def _karta_review(obj: Any, operation: str = "CREATE", old: Any = None) -> Request:
    return Request(
        uid="u",
        operation=operation,
        kind=GVK("run.ai", "v1alpha1", "Karta"),
        resource={},
        sub_resource="",
        name=obj["metadata"]["name"] if isinstance(obj, dict) else "",
        namespace="",
        object=obj,
        old_object=old,
        dry_run=False,
    )


SAMPLE_INDEX = SampleIndex.load([SAMPLES])


def test_validate_denies_a_broken_karta_with_every_field() -> None:
    r = handlers.validate(_karta_review(broken_karta()), SAMPLE_INDEX, (), ENGINE)
    assert r.outcome == "denied" and r.report is not None and not r.report.ok
    resp = r.response
    assert resp.allowed is False and resp.code == 422 and resp.reason == "Invalid"
    assert resp.message is not None and resp.message.startswith('Karta "broken" is invalid: ')
    assert "childComponents[1].ownerRef" in resp.message
    assert "childComponents[0].specDefinition.podTemplateSpecPath" in resp.message


def test_validate_allows_a_sound_karta_checked_against_its_samples() -> None:
    r = handlers.validate(_karta_review(load(JOBSET_KARTA)), SAMPLE_INDEX, (), ENGINE)
    assert r.outcome == "allowed" and r.response.allowed
    assert r.report is not None and r.report.samples >= 1


def test_validate_leaves_unchanged_specs_deletions_and_other_kinds_alone() -> None:
    broken = broken_karta()
    relabelled = copy.deepcopy(broken)
    relabelled["metadata"]["labels"] = {"a": "b"}
    assert (
        handlers.validate(
            _karta_review(relabelled, "UPDATE", broken), SAMPLE_INDEX, (), ENGINE
        ).outcome
        == "skipped"
    )
    leaving = copy.deepcopy(broken)
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    changed = copy.deepcopy(leaving)
    changed["spec"]["structureDefinition"]["childComponents"].pop()
    assert (
        handlers.validate(
            _karta_review(changed, "UPDATE", leaving), SAMPLE_INDEX, (), ENGINE
        ).outcome
        == "skipped"
    )
    pod = sample("core-pod-v1", "minimal.yaml")
    req = Request("u", "CREATE", GVK("", "v1", "Pod"), {}, "", "p", "n", pod, None, False)
    assert handlers.validate(req, SAMPLE_INDEX, (), ENGINE).outcome == "skipped"


def test_validate_denies_a_second_karta_for_a_kind_and_requires_samples_on_request() -> None:
    mine = load(JOBSET_KARTA)
    other = copy.deepcopy(mine)
    other["metadata"]["name"] = "someone-else"
    r = handlers.validate(_karta_review(mine), SAMPLE_INDEX, [other], ENGINE)
    assert r.outcome == "denied" and "already exists" in (r.response.message or "")
    empty = SampleIndex(sources=["nowhere"])
    r = handlers.validate(_karta_review(mine), empty, (), ENGINE, require_samples=True)
    assert r.outcome == "denied"
    assert "no sample of jobset.x-k8s.io/v1alpha2 JobSet found under nowhere" in (
        r.response.message or ""
    )


# --------------------------------------------------------------------------- one Karta per kind


def test_conflicting_karta() -> None:
    ray = karta("ray", kind=GVK("ray.io", "v1", "RayCluster"))
    mine = karta("my-ray", kind=GVK("ray.io", "v1", "RayCluster"))
    assert conflicting_karta(mine, [ray]) == (
        'a Karta for group "ray.io" version "v1" kind "RayCluster" already exists ("ray"); '
        "only one Karta per group/version/kind is allowed"
    )
    assert conflicting_karta(ray, [ray]) is None  # updating itself
    assert conflicting_karta(karta("v2", kind=GVK("ray.io", "v2", "RayCluster")), [ray]) is None
    assert conflicting_karta(karta("x", kind=GVK("ray.io", "v1", "RayJob")), [ray]) is None
    assert conflicting_karta({"kind": "Karta", "metadata": {"name": "y"}}, [ray]) is None
    core = karta("pods", kind=GVK("", "v1", "Pod"))
    assert 'group "" version "v1" kind "Pod"' in conflicting_karta(
        karta("p2", kind=GVK("", "v1", "Pod")), [core]
    )
