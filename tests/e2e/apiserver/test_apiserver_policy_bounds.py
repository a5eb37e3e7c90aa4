"""A policy that loads never makes an object the API server refuses (issue 39 item 2): with
the largest values the policy accepts in every field (``tolerationSeconds`` at both ends of
int64, keys of a 253-character prefix and a 63-character name, 63-character label values,
253-character names, annotations up to the bytes a policy may add to a template, counted in
UTF-8 bytes as the API server counts them) a Deployment is stored with all of them; with the
smallest (one-character names, empty values, a key-less toleration), a Job is. One past the
numbers (``tolerationSeconds`` of 2^63 or -2^63-1, 256 KiB of annotations), and the API server
refuses the object: the bounds are its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kapi
import pytest
import yaml
from hooks import Webhook, catalog_sample, create_and_read, dry_run, registered

from webhook.base import limits
from webhook.mutation.policy import Tally
from webhook.mutation.policyfile import parse_policy

#: a DNS subdomain of 253 characters (a key's prefix, a scheduler's or a class's name)
LONG_NAME = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
LONG_KEY = f"{LONG_NAME}/{'n' * 62}"  # 316 characters
LABEL_VALUE = "v" * 63
ANNOTATION = "é" * (limits.MAX_ANNOTATION_VALUE_BYTES // 2)  # 4,096 bytes in 2,048 characters
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
LARGEST_TOLERATIONS = [
    {
        "key": LONG_KEY + "1",
        "operator": "Equal",
        "value": LABEL_VALUE,
        "effect": "NoExecute",
        "tolerationSeconds": INT64_MAX,
    },
    {
        "key": LONG_KEY + "2",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": INT64_MIN,
    },
]
SMALLEST_TOLERATIONS = [{"operator": "Exists"}]


def _annotations() -> dict[str, str]:
    """As many of the largest annotation values as the bound on what a policy adds to a pod
    template lets in beside the rest of the largest rule."""
    out: dict[str, str] = {}
    while True:
        more = {**out, f"{LONG_NAME}/{'a' * 60}{len(out):02d}": ANNOTATION}
        doc = _policy(more)
        try:
            parse_policy(doc)
        except Exception:
            return out
        out = more


def _policy(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "failureMode": "closed",
        "rules": [
            {
                "name": "largest",
                "match": {"kinds": ["Deployment"]},
                "schedulerName": LONG_NAME,
                "priorityClassName": LONG_NAME,
                "labels": {LONG_KEY: LABEL_VALUE},
                "annotations": annotations,
                "nodeSelector": {LONG_KEY: LABEL_VALUE},
                "tolerations": LARGEST_TOLERATIONS,
            },
            {
                "name": "smallest",
                "match": {"kinds": ["Job"]},
                "schedulerName": "a",
                "priorityClassName": "b",
                "labels": {"l": ""},
                "annotations": {"a": ""},
                "nodeSelector": {
                    "k": ""
                },  # not "n": YAML 1.1 reads a plain n as false, as kubectl does
                "tolerations": SMALLEST_TOLERATIONS,
            },
        ],
    }


ANNOTATIONS = _annotations()
POLICY = _policy(ANNOTATIONS)


def test_the_policy_is_at_the_bounds() -> None:
    """The largest rule adds nearly all a policy may add to a template (no room for one more
    annotation), and its values are at the API server's own bounds."""
    tally = Tally()
    largest = parse_policy(POLICY).rules[0]
    assert tally.bytes("largest", largest) == []
    assert tally.added > limits.MAX_POLICY_ADDED_BYTES - limits.MAX_ANNOTATION_VALUE_BYTES - 400
    assert len(LONG_NAME) == 253 and len(LONG_KEY.rpartition("/")[2]) == 62
    assert all(len(k.encode()) + len(v.encode()) <= 4096 + 316 for k, v in ANNOTATIONS.items())


@pytest.fixture(scope="module")
def hook(plane: kapi.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    with registered(
        plane,
        tmp_path_factory.mktemp("serve-bounds"),
        yaml.safe_dump(POLICY),
        "the mutating webhook stamps a dry-run Deployment",
        lambda probe: _scheduler(plane, probe) == LONG_NAME,
    ) as served:
        yield served


def _scheduler(plane: kapi.ControlPlane, namespace: str) -> str | None:
    body = catalog_sample("apps-deployment-v1", "minimal.yaml", namespace)
    out = dry_run(plane, f"/apis/apps/v1/namespaces/{namespace}/deployments", body)
    return out["spec"]["template"]["spec"].get("schedulerName") if out else None


def test_the_largest_values_the_policy_accepts_are_stored(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = catalog_sample("apps-deployment-v1", "minimal.yaml", ns)
    stored = create_and_read(plane, f"/apis/apps/v1/namespaces/{ns}/deployments", body)
    template = stored["spec"]["template"]
    spec, meta = template["spec"], template["metadata"]
    assert spec["schedulerName"] == LONG_NAME
    assert spec["priorityClassName"] == LONG_NAME
    assert spec["nodeSelector"][LONG_KEY] == LABEL_VALUE
    assert meta["labels"][LONG_KEY] == LABEL_VALUE
    assert {k: meta["annotations"][k] for k in ANNOTATIONS} == ANNOTATIONS
    assert [t for t in spec["tolerations"] if t in LARGEST_TOLERATIONS] == LARGEST_TOLERATIONS


def test_the_smallest_values_the_policy_accepts_are_stored(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    body = catalog_sample("batch-job-v1", "finetune.yaml", ns)
    stored = create_and_read(plane, f"/apis/batch/v1/namespaces/{ns}/jobs", body)
    template = stored["spec"]["template"]
    spec, meta = template["spec"], template["metadata"]
    assert (spec["schedulerName"], spec["priorityClassName"]) == ("a", "b")
    assert spec["nodeSelector"]["k"] == ""
    assert meta["labels"]["l"] == "" and meta["annotations"]["a"] == ""
    assert SMALLEST_TOLERATIONS[0] in spec["tolerations"]


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("tolerationSeconds", INT64_MAX + 1),
        ("tolerationSeconds", INT64_MIN - 1),
        ("annotations", limits.API_ANNOTATIONS_BYTES),
    ],
    ids=["2^63", "-2^63-1", "256 KiB of annotations"],
)
def test_one_past_the_numbers_the_api_server_refuses(
    plane: kapi.ControlPlane, ns: str, where: str, value: int
) -> None:
    """The bounds are the API server's own: one past them in the object as sent (the
    module's webhook, when registered, only adds to it), and the API server refuses it."""
    body = catalog_sample("apps-deployment-v1", "minimal.yaml", ns)
    template = body["spec"]["template"]
    if where == "tolerationSeconds":
        template["spec"]["tolerations"] = [
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": value}
        ]
    else:  # one key of one character and a value: one byte over the total
        template.setdefault("metadata", {})["annotations"] = {"a": "x" * value}
    status, out = plane.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body)
    assert status in (400, 422), out
