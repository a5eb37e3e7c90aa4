"""Zero values and bare Pods through a real API server (issue 35 item 1, issue 39 item 3).

* A JobSet and a Deployment whose templates hold each zero value (``""``, ``null``, ``{}``,
  ``[]``) of each policy field are stored with the policy applied: no zero value is left as it
  was (the JobSet is stored as sent; the Deployment as the API server defaults it).
* ``kubectl run`` of a bare Pod under a policy that gives it a PriorityClass is admitted with
  that class's priority and preemption policy (the Priority plugin filled priority 0 before
  the webhook; the webhook removes it and the plugin computes it again from the class).
* Labelling that Pod afterwards (an UPDATE the policy also mutates) is admitted: the webhook
  writes nothing an existing Pod may not change.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import kapi
import pytest
from hooks import (
    Webhook,
    catalog_sample,
    configurations,
    create_and_read,
    dry_run,
    register,
    registered,
    unregister,
    wait_until,
)

CLASS = "e2e-zero-train"
POLICY = f"""\
operations: [CREATE, UPDATE]
rules:
- name: six
  schedulerName: kai-scheduler
  labels: {{kai.scheduler/queue: research}}
  annotations: {{example.com/owner: "$(workload.name)"}}
  priorityClassName: {CLASS}
  nodeSelector: {{pool: gpu}}
  tolerations:
  - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}
"""
TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
ZEROS: list[tuple[str, str, Any]] = [
    ("spec", "schedulerName", ""),
    ("spec", "priorityClassName", ""),
    ("spec", "nodeSelector", {}),
    ("spec", "nodeSelector", None),
    ("spec", "tolerations", None),
    ("spec", "tolerations", []),
    ("metadata", "labels", None),
    ("metadata", "annotations", None),
    ("metadata", "labels", {"kai.scheduler/queue": ""}),
]


@pytest.fixture(scope="module")
def hook(
    plane: kapi.ControlPlane,
    workload_crds: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    status, out = plane.request(
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": CLASS},
            "value": 1000,
            "preemptionPolicy": "Never",
        },
    )
    assert status in (201, 409), out
    with registered(
        plane,
        tmp_path_factory.mktemp("serve-zero"),
        POLICY,
        "the webhook stamps a dry-run Deployment",
        lambda probe: _stamped(plane, probe),
    ) as served:
        yield served


def _stamped(plane: kapi.ControlPlane, namespace: str) -> bool:
    body = catalog_sample("apps-deployment-v1", "minimal.yaml", namespace, _name())
    out = dry_run(plane, f"/apis/apps/v1/namespaces/{namespace}/deployments", body)
    return out is not None and out["spec"]["template"]["spec"].get("priorityClassName") == CLASS


def _name() -> str:
    return f"z-{uuid.uuid4().hex[:8]}"


def _applied(template: dict[str, Any], name: str) -> None:
    spec, meta = template["spec"], template["metadata"]
    assert spec["schedulerName"] == "kai-scheduler"
    assert spec["priorityClassName"] == CLASS
    assert spec["nodeSelector"]["pool"] == "gpu"
    assert spec["tolerations"].count(TOL) == 1
    assert meta["labels"]["kai.scheduler/queue"] == "research"
    assert meta["annotations"]["example.com/owner"] == name


KINDS = [
    (
        "jobset.x-k8s.io-jobset-v1alpha2",
        "leader-workers.yaml",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
        lambda o: [rj["template"]["spec"]["template"] for rj in o["spec"]["replicatedJobs"]],
    ),
    (
        "apps-deployment-v1",
        "llm-server.yaml",
        "/apis/apps/v1/namespaces/{ns}/deployments",
        lambda o: [o["spec"]["template"]],
    ),
]


@pytest.mark.parametrize(
    ("stem", "name", "collection", "templates"), KINDS, ids=["JobSet", "Deployment"]
)
def test_no_zero_value_is_left_as_it_was(
    plane: kapi.ControlPlane,
    hook: Webhook,
    ns: str,
    stem: str,
    name: str,
    collection: str,
    templates: Any,
) -> None:
    """Every zero value of every field, one object each, all stored with the policy applied.
    A Deployment's template keeps the labels its selector needs (without them the API server
    refuses it whatever the webhook does): its labels get the empty queue value beside them."""
    for part, field, zero in ZEROS:
        body = catalog_sample(stem, name, ns, _name())
        for t in templates(body):
            have = t.setdefault(part, {})
            if stem == "apps-deployment-v1" and field == "labels":
                if zero is None:
                    continue
                have[field] = {**have[field], **zero}
            else:
                have[field] = copy.deepcopy(zero)
        stored = create_and_read(plane, collection.format(ns=ns), body)
        found = templates(stored)
        assert found
        for t in found:
            try:
                _applied(t, stored["metadata"]["name"])
            except (AssertionError, KeyError) as e:
                raise AssertionError(f"{field}={zero!r}: {json.dumps(t)}") from e


def test_a_bare_pod_gets_the_priority_of_the_class_the_policy_gives_it(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    plane.kubectl("run", "bare", "--image=busybox", "--restart=Never", "-n", ns)
    status, pod = plane.request("GET", f"/api/v1/namespaces/{ns}/pods/bare")
    assert status == 200, pod
    spec = pod["spec"]
    assert spec["priorityClassName"] == CLASS
    assert spec["priority"] == 1000
    assert spec["preemptionPolicy"] == "Never"
    assert spec["schedulerName"] == "kai-scheduler"
    # An UPDATE of the Pod (a label, as a controller adds one) is admitted: nothing the API
    # server refuses to change on an existing Pod is written.
    plane.kubectl("label", "pod", "bare", "-n", ns, "team=a")
    status, pod = plane.request("GET", f"/api/v1/namespaces/{ns}/pods/bare")
    assert status == 200 and pod["metadata"]["labels"]["team"] == "a"


def test_an_existing_pod_from_before_the_policy_can_still_be_updated(
    plane: kapi.ControlPlane, hook: Webhook, ns: str
) -> None:
    """A Pod the webhook never saw (created with the webhook excluded, as one that predates
    the policy) is labelled through it: only labels, annotations and added tolerations are
    written; its scheduler, class and nodeSelector cannot change and are left alone."""
    unregister(plane)
    try:
        wait_until("the webhook is no longer called", lambda: _unmutated(plane, ns))
        status, out = plane.request("POST", f"/api/v1/namespaces/{ns}/pods", _pod(ns, "old"))
        assert status == 201, out
    finally:
        register(plane, configurations(hook, policy=hook.policy, failure_policy="Fail"))
        wait_until("the webhook stamps a dry-run Deployment", lambda: _stamped(plane, ns))
    plane.kubectl("label", "pod", "old", "-n", ns, "team=b")
    status, pod = plane.request("GET", f"/api/v1/namespaces/{ns}/pods/old")
    assert status == 200, pod
    assert pod["metadata"]["labels"]["team"] == "b"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "research"
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert TOL in pod["spec"]["tolerations"]


def _unmutated(plane: kapi.ControlPlane, namespace: str) -> bool:
    out = dry_run(plane, f"/api/v1/namespaces/{namespace}/pods", _pod(namespace))
    return out is not None and out["spec"].get("schedulerName") != "kai-scheduler"


def _pod(namespace: str, name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name or f"p-{uuid.uuid4().hex[:8]}", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
