"""The gang controller (webhook.cluster.gangs) against a small in-memory API: a PodGroup per
group of each labelled pod's workload, owned by it, minCount following scale; nothing written
where the API is not served, or while no rule has gang."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers import ENGINE, sample
from kubernetes.client.exceptions import ApiException

from webhook.admission.state import State
from webhook.cluster import gangs
from webhook.cluster.gangs import MANAGED_LABEL, GangController, min_count
from webhook.workload.gang import GANG_LABEL, group_name

JS_UID = "aaaaaaaa-0000-0000-0000-000000000001"
JOB_UID = "aaaaaaaa-0000-0000-0000-000000000002"


class API:
    """GET /apis/scheduling.k8s.io/v1beta1, LIST pods and podgroups, POST and PATCH podgroups."""

    def __init__(self, served: bool = True) -> None:
        self.served = served
        self.pods: list[dict[str, Any]] = []
        self.podgroups: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []

    def __call__(
        self, api: Any, method: str, path: str, body: Any = None, query: Any = None, **kw: Any
    ) -> Any:
        if path == "/apis/scheduling.k8s.io/v1beta1":
            if not self.served:
                raise ApiException(status=404, reason="Not Found")
            return {"resources": [{"name": "podgroups"}, {"name": "workloads"}]}
        if path == "/api/v1/pods":
            assert dict(query)["labelSelector"] == f"{GANG_LABEL} in (native,native-workload)"
            return {"metadata": {}, "items": copy.deepcopy(self.pods)}
        if path == "/apis/scheduling.k8s.io/v1beta1/podgroups":
            assert dict(query)["labelSelector"] == f"{MANAGED_LABEL}=karta-webhook"
            return {"items": copy.deepcopy(list(self.podgroups.values()))}
        ns, name = path.split("/namespaces/")[1].split("/podgroups")[0], path.rsplit("/", 1)[-1]
        self.writes.append((method, path))
        if method == "POST":
            self.podgroups[(ns, body["metadata"]["name"])] = copy.deepcopy(body)
            return body
        if method == "PATCH":
            pg = self.podgroups[(ns, name)]
            pg["spec"]["schedulingPolicy"] = body["spec"]["schedulingPolicy"]
            return pg
        raise AssertionError((method, path))


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Any:
    fake = API()
    monkeypatch.setattr(gangs, "request", fake)
    return fake


def _policy(tmp_path: Path, gang: bool = True) -> State:
    p = tmp_path / "policy.yaml"
    rule = "{name: g, gang: native}" if gang else "{name: l, labels: {a: b}}"
    p.write_text(f"rules: [{rule}]\n")
    return State(policy_path=p)


def _objects() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    js = copy.deepcopy(sample("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml"))
    js["metadata"]["uid"] = JS_UID
    ref = {
        "apiVersion": js["apiVersion"],
        "kind": "JobSet",
        "name": "trainer",
        "uid": JS_UID,
        "controller": True,
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "trainer-leader-0",
            "namespace": "research",
            "uid": JOB_UID,
            "ownerReferences": [ref],
        },
    }
    jref = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "trainer-leader-0",
        "uid": JOB_UID,
        "controller": True,
    }
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p0", "namespace": "research", "labels": {GANG_LABEL: "native"}, "ownerReferences": [jref]},
        "spec": {"priorityClassName": "train", "containers": []},
    }  # fmt: skip
    return js, job, pod


class Owners:
    def __init__(self, *objs: Mapping[str, Any]) -> None:
        self.by_uid = {o["metadata"]["uid"]: o for o in objs}

    def __call__(self, namespace: str, ref: Mapping[str, Any], deadline: float) -> Any:
        return self.by_uid.get(ref["uid"])


def test_a_podgroup_per_group_owned_by_the_workload_following_its_scale(
    world: API, tmp_path: Path
) -> None:
    js, job, pod = _objects()
    world.pods = [pod]
    owners = Owners(js, job)
    c = GangController(_policy(tmp_path), None, ENGINE, owners, elector=None)
    c.step()
    name = group_name("trainer", JS_UID, "jobset")
    pg = world.podgroups[("research", name)]
    assert min_count(pg) == 3
    assert pg["spec"]["priorityClassName"] == "train"
    assert pg["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "trainer",
            "uid": JS_UID,
        }
    ]
    assert pg["metadata"]["labels"] == {MANAGED_LABEL: "karta-webhook"}
    writes = len(world.writes)
    c.step()
    assert len(world.writes) == writes  # in line: nothing written again
    js["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"] = 4
    c.step()
    assert min_count(world.podgroups[("research", name)]) == 5
    assert world.writes[-1][0] == "PATCH"
    assert json.dumps(pg)  # plain JSON, as sent


def test_nothing_is_written_where_the_api_is_not_served_or_no_rule_has_gang(
    world: API, tmp_path: Path
) -> None:
    js, job, pod = _objects()
    world.pods = [pod]
    world.served = False
    told: list[bool] = []
    c = GangController(
        _policy(tmp_path), None, ENGINE, Owners(js, job), elector=None, report=told.append
    )
    changed: list[None] = []
    c.listeners.append(lambda: changed.append(None))
    assert c.api_status() is None  # not looked yet: no GangScheduling condition
    c.step()
    assert not world.writes and c.unserved and "runtime-config" in c.unserved
    assert told == [False]  # the metric karta_webhook_gang_api_served
    status = c.api_status()
    assert status is not None and status[0] is False
    assert "runtime-config" in status[1] and "no PodGroup is made" in status[1]
    assert len(changed) == 1  # the policies' writers told once, not at every look
    c._looked = -1e9
    c.step()
    assert len(changed) == 1
    world.served = True
    c._looked = -1e9
    c.step()
    assert c.api_status() == (True, "scheduling.k8s.io/v1beta1 serves podgroups")
    assert len(changed) == 2
    world.writes.clear()
    world.served = False
    world.served = True
    off = GangController(_policy(tmp_path, gang=False), None, ENGINE, Owners(js, job), elector=None)
    off.step()
    assert not world.writes
