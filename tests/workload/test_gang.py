"""The gangs a definition gives a workload (``webhook.workload.gang``), on catalog samples:
the groups, their ``minCount`` from the replica paths, the group of each pod the operator
would make, and the names."""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml
from helpers import ENGINE, REGISTRY, ROOT, sample

from webhook.base.gvk import GVK
from webhook.karta.loading import load_definition
from webhook.karta.model import Karta
from webhook.workload.gang import Group, group_name, groups, pod_group
from webhook.workload.locator import resolve

UID = "0b6f2c1e-2f7a-4d59-9a43-6c1d7e0f9a11"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _karta(stem: str, gang: dict[str, Any] | None = None) -> Karta:
    with open(ROOT / "catalog" / f"{stem}.yaml") as f:
        doc = yaml.safe_load(f)
    if gang is not None:
        doc["spec"]["optimizationInstructions"] = {"gangScheduling": gang}
    return load_definition(doc, stem)


def _pod(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": []}}


def test_a_jobset_is_one_gang_of_its_leader_and_workers() -> None:
    karta = REGISTRY.lookup(GVK("jobset.x-k8s.io", "v1alpha2", "JobSet"))
    assert karta is not None
    obj = sample("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml")
    w = resolve(karta, obj, ENGINE)
    [g] = groups(karta, w, UID)
    assert (g.key, g.min_count, g.components) == ("jobset", 3, None)
    assert g.name == group_name("trainer", UID, "jobset")
    for job in ("leader", "workers"):
        pod = _pod({"jobset.sigs.k8s.io/replicatedjob-name": job})
        assert pod_group(karta, w, obj, pod, UID, ENGINE) == g


def test_minCount_follows_the_replica_paths() -> None:
    karta = REGISTRY.lookup(GVK("jobset.x-k8s.io", "v1alpha2", "JobSet"))
    assert karta is not None
    obj = copy.deepcopy(sample("jobset.x-k8s.io-jobset-v1alpha2", "leader-workers.yaml"))
    obj["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"] = 5
    [g] = groups(karta, resolve(karta, obj, ENGINE), UID)
    assert g.min_count == 6


def test_a_raycluster_gang_of_head_and_workers_waits_for_the_minimum_where_elastic() -> None:
    karta = _karta(
        "ray.io-raycluster-v1",
        {
            "podGroup": {
                "name": "ray",
                "subGroups": [{"componentName": "head"}, {"componentName": "worker"}],
            }
        },
    )
    obj = copy.deepcopy(sample("ray.io-raycluster-v1", "gpu-workers.yaml"))
    w = resolve(karta, obj, ENGINE)
    [g] = groups(karta, w, UID)
    mins = sum(
        (i.min_replicas if i.min_replicas is not None else i.replicas)
        for c in w.components
        if c.name == "worker"
        for i in c.instances
    )
    assert g.min_count == 1 + mins
    assert g.components == frozenset({"head", "worker"})
    head = _pod({"ray.io/node-type": "head"})
    worker = _pod({"ray.io/node-type": "worker", "ray.io/group": "a100"})
    assert pod_group(karta, w, obj, head, UID, ENGINE) == g
    assert pod_group(karta, w, obj, worker, UID, ENGINE) == g
    for spec in obj["spec"]["workerGroupSpecs"]:
        spec["minReplicas"] = 3
    [g3] = groups(karta, resolve(karta, obj, ENGINE), UID)
    hosts = [s.get("numOfHosts", 1) for s in obj["spec"]["workerGroupSpecs"]]
    assert g3.min_count == 1 + sum(3 * h for h in hosts)  # minReplicas x numOfHosts


def test_subGroups_leave_other_components_out() -> None:
    karta = _karta(
        "ray.io-raycluster-v1",
        {"podGroup": {"name": "w", "subGroups": [{"componentName": "worker"}]}},
    )
    obj = sample("ray.io-raycluster-v1", "gpu-workers.yaml")
    w = resolve(karta, obj, ENGINE)
    assert pod_group(karta, w, obj, _pod({"ray.io/node-type": "head"}), UID, ENGINE) is None


def test_replicated_groups_one_per_instance_of_their_member() -> None:
    karta = _karta(
        "ray.io-raycluster-v1",
        {
            "podGroups": [
                {
                    "name": "hosts",
                    "members": [
                        {
                            "componentName": "worker",
                            "groupByKeyPaths": ['.metadata.labels["ray.io/group"]'],
                            "filters": ['.metadata.labels["ray.io/node-type"] == "worker"'],
                        }
                    ],
                }
            ]
        },
    )
    obj = copy.deepcopy(sample("ray.io-raycluster-v1", "gpu-workers.yaml"))
    for spec in obj["spec"]["workerGroupSpecs"]:
        spec["minReplicas"] = 2
    w = resolve(karta, obj, ENGINE)
    got = groups(karta, w, UID)
    names = [s["groupName"] for s in obj["spec"]["workerGroupSpecs"]]
    assert [g.key for g in got] == sorted(f"hosts-{n}" for n in names)
    hosts = {s["groupName"]: s.get("numOfHosts", 1) for s in obj["spec"]["workerGroupSpecs"]}
    assert {g.instance: g.min_count for g in got} == {n: 2 * h for n, h in hosts.items()}
    pod = _pod({"ray.io/node-type": "worker", "ray.io/group": names[0]})
    assert pod_group(karta, w, obj, pod, UID, ENGINE) == next(
        g for g in got if g.instance == names[0]
    )
    # a filter that is not true, or a key path without a value: no group
    assert pod_group(karta, w, obj, _pod({"ray.io/group": names[0]}), UID, ENGINE) is None
    assert pod_group(karta, w, obj, _pod({"ray.io/node-type": "worker"}), UID, ENGINE) is None


def test_a_kind_without_gang_instructions_has_a_gang_only_when_the_rule_asks() -> None:
    karta = REGISTRY.lookup(GVK("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"))
    assert karta is not None
    obj = sample("leaderworkerset.x-k8s.io-leaderworkerset-v1", "vllm-multinode.yaml")
    w = resolve(karta, obj, ENGINE)
    assert groups(karta, w, UID) == ()
    [g] = groups(karta, w, UID, "native-workload")
    assert g.key == "workload" and g.min_count == 2 * 4  # replicas x size
    pod = _pod({"leaderworkerset.sigs.k8s.io/worker-index": "1"})
    assert pod_group(karta, w, obj, pod, UID, ENGINE, "native-workload") == g
    assert pod_group(karta, w, obj, pod, UID, ENGINE) is None


def test_group_names_are_dns_labels_and_tell_workloads_and_keys_apart() -> None:
    names = {
        group_name("trainer", UID, "jobset"),
        group_name("trainer", "another-uid", "jobset"),
        group_name("trainer", UID, "Jobset"),
        group_name("x" * 300, UID, "k" * 300),
        group_name("a.b", UID, "c_d"),
        group_name("", UID, "--"),
    }
    assert len(names) == 6
    for n in names:
        assert len(n) <= 63 and DNS_LABEL.fullmatch(n), n
    assert group_name("trainer", UID, "jobset") == group_name("trainer", UID, "jobset")
    assert isinstance(Group("k", "n", 1), Group)
