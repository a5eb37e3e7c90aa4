"""Discovery and the webhook-configuration keeper (webhook.cluster.keeper) against the fake API server."""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from fakeapi import (
    LEASES,
    MWC,
    TRAINER,
    VWC,
    Clock,
    FakeAPI,
    discovery_doc,
    install_configs,
    karta,
    static_webhooks,
    trainer_state,
)
from helpers import ENGINE

from webhook.admission.manifests import (
    catalog_rules,
    default_plural,
    webhook_configurations,
    webhook_rules,
)
from webhook.admission.registry import load_registry
from webhook.admission.state import State
from webhook.base.gvk import GVK
from webhook.cluster.kartasync import load_cluster_karta
from webhook.cluster.keeper import Discovery, WebhookConfigKeeper, plural_from_discovery
from webhook.cluster.lease import LeaseElector

# --------------------------------------------------------------------------- discovery, rules


def test_discovery_plurals(fake: FakeAPI) -> None:
    fake.discovery["/api/v1"] = discovery_doc(
        "v1",
        [("pods", "Pod", True), ("pods/status", "Pod", True), ("namespaces", "Namespace", False)],
    )
    fake.discovery["/apis/example.com/v1"] = discovery_doc(
        "example.com/v1",
        [("trainerz/status", "Trainer", True), ("trainerz", "Trainer", True)],
    )
    plural = plural_from_discovery(fake.api())
    assert plural(GVK("", "v1", "Pod")) == "pods"
    assert plural(TRAINER) == "trainerz"  # the CRD's own plural, not a guess; no subresource
    assert plural(GVK("milvus.io", "v1beta1", "Milvus")) == "milvuses"  # not installed: default
    d = Discovery(fake.api())
    assert d.scope(GVK("", "v1", "Namespace")) == "Cluster"
    assert d.scope(TRAINER) == "Namespaced"
    assert d.scope(GVK("milvus.io", "v1beta1", "Milvus")) is None
    assert fake.seen("GET", "/apis/example.com/v1") == 2  # one per Discovery (cached in it)
    rules = webhook_rules(
        [GVK("", "v1", "Namespace"), GVK("", "v1", "Pod"), TRAINER], d.plural, scope=d.scope
    )
    assert [(r["apiGroups"], r["resources"], r["scope"]) for r in rules] == [
        ([""], ["namespaces", "pods"], "*"),  # mixed scopes: "*"
        (["example.com"], ["trainerz"], "Namespaced"),
    ]


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Milvus", "milvuses"),
        ("Policy", "policies"),
        ("Service", "services"),
        ("Gateway", "gateways"),
        ("Box", "boxes"),
        ("Batch", "batches"),
        ("PyTorchJob", "pytorchjobs"),
        ("Endpoints", "endpoints"),
    ],
)
def test_default_plural(kind: str, plural: str) -> None:
    assert default_plural(GVK("g", "v1", kind)) == plural


def test_rules_shape() -> None:
    kinds = [
        GVK("ray.io", "v1", "RayJob"),
        GVK("apps", "v1", "StatefulSet"),
        GVK("ray.io", "v1", "RayCluster"),
        GVK("apps", "v1", "Deployment"),
        GVK("run.ai", "v1alpha1", "Karta"),
    ]
    rules = webhook_rules(kinds, default_plural, operations=("CREATE", "UPDATE"))
    assert rules == [
        {
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "resources": ["deployments", "statefulsets"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "*",
        },
        {
            "apiGroups": ["ray.io"],
            "apiVersions": ["v1"],
            "resources": ["rayclusters", "rayjobs"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "*",
        },
    ]


def test_catalog_rules_equal_manifests_and_static(fake: FakeAPI) -> None:
    kinds = load_registry().kinds()
    static = static_webhooks()
    assert webhook_configurations(kinds) == static
    static_rules = static[0]["webhooks"][0]["rules"]
    assert catalog_rules(kinds) == static_rules
    # the keeper, with discovery from a cluster where every catalog kind is installed
    by_gv: dict[str, list[tuple[str, str, bool]]] = {}
    for g in kinds:
        path = f"/apis/{g.group}/{g.version}" if g.group else f"/api/{g.version}"
        by_gv.setdefault(path, []).append((default_plural(g), g.kind, True))
    for path, resources in by_gv.items():
        fake.discovery[path] = discovery_doc(path, resources)
    keeper = WebhookConfigKeeper(State(), fake.api(), elector=None)
    assert keeper.wanted_rules() == static_rules


def test_keeper_writes_only_while_leading(fake: FakeAPI, tmp_path: Path) -> None:
    install_configs(fake)
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    clock = Clock()
    fake.objects[f"{LEASES}/karta-webhook-leader"] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "karta-webhook-leader",
            "namespace": "karta-system",
            "resourceVersion": "3",
        },
        "spec": {
            "holderIdentity": "other-pod_1",
            "leaseDurationSeconds": 15,
            "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }
    api = fake.api()
    elector = LeaseElector(api, "karta-system", holder="me_1", clock=clock)
    state = trainer_state()
    keeper = WebhookConfigKeeper(state, api, elector=elector, ca_file=ca, resync_seconds=0)

    keeper.step()  # another holder's lease is fresh: no write
    clock.t += 10
    keeper.step()
    assert not elector.is_leader()
    assert fake.seen("PUT", MWC) == fake.seen("PUT", VWC) == 0
    assert fake.objects[f"{LEASES}/karta-webhook-leader"]["spec"]["holderIdentity"] == "other-pod_1"

    clock.t += 6  # unchanged for longer than its 15 s: expired, take it over
    keeper.step()
    assert elector.is_leader()
    lease = fake.objects[f"{LEASES}/karta-webhook-leader"]["spec"]
    assert lease["holderIdentity"] == "me_1" and lease["leaseTransitions"] == 1
    assert lease["renewTime"].endswith("Z") and "." in lease["renewTime"]
    assert fake.seen("PUT", MWC) == 1 and fake.seen("PUT", VWC) == 1
    mwc = fake.objects[MWC]
    want_ca = base64.b64encode(ca.read_bytes()).decode()
    assert mwc["webhooks"][0]["rules"] == [
        {
            "apiGroups": ["example.com"],
            "apiVersions": ["v1"],
            "resources": ["trainerz"],
            "operations": ["CREATE"],
            "scope": "Namespaced",
        }
    ]
    assert mwc["webhooks"][1]["rules"] == static_webhooks()[0]["webhooks"][1]["rules"]
    assert all(h["clientConfig"]["caBundle"] == want_ca for h in mwc["webhooks"])
    assert fake.objects[VWC]["webhooks"][0]["clientConfig"]["caBundle"] == want_ca

    keeper.step()  # in line: renew only, no write
    assert fake.seen("PUT", MWC) == 1

    # a new kind in the registry: the listener marks it, the next step writes
    state.listeners.append(keeper.on_snapshot)
    gpu, _ = load_cluster_karta(karta("gpu", kind=GVK("example.com", "v1", "GPUThing")), ENGINE)
    trainer_karta = state.snapshot.registry.lookup(TRAINER)
    state.set_cluster([trainer_karta, gpu])
    keeper.step()
    assert fake.objects[MWC]["webhooks"][0]["rules"][0]["resources"] == ["gputhings", "trainerz"]

    # someone else takes the lease (it was renewed by them): we stop writing
    lease = fake.objects[f"{LEASES}/karta-webhook-leader"]
    lease["spec"]["holderIdentity"] = "other-pod_1"
    lease["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    puts = fake.seen("PUT", MWC)
    state.set_cluster([trainer_karta])
    keeper.step()
    assert not elector.is_leader()
    assert fake.seen("PUT", MWC) == puts


def test_keeper_looks_again_at_the_next_tick_for_a_configuration_not_there_yet(
    fake: FakeAPI,
) -> None:
    """The server can start before `kubectl apply` of the manifests reaches the webhook
    configurations: the leader looks again at its next tick, not at the next resync (found
    against the real API server, where that meant 5 minutes without a caBundle)."""
    keeper = WebhookConfigKeeper(trainer_state(), fake.api(), elector=None)
    keeper.step()  # first reconcile: both configurations missing
    assert fake.seen("GET", MWC) == 1 and fake.seen("PUT", MWC) == 0
    install_configs(fake)
    keeper.step()
    assert fake.seen("PUT", MWC) == 1
    assert fake.objects[MWC]["webhooks"][0]["rules"][0]["resources"] == ["trainerz"]
    keeper.step()  # in line now: nothing is read again until something changes
    assert fake.seen("GET", MWC) == 2


def test_keeper_retries_on_conflict(fake: FakeAPI) -> None:
    install_configs(fake)
    api = fake.api()
    keeper = WebhookConfigKeeper(trainer_state(), api, elector=None)
    original = fake.handle
    conflicts = [1]

    def racing(h: Any, method: str) -> None:
        if method == "PUT" and conflicts and urlparse(h.path).path == MWC:
            conflicts.pop()
            fake.objects[MWC]["metadata"]["resourceVersion"] = "99"  # someone wrote meanwhile
        original(h, method)

    fake.handle = racing  # type: ignore[method-assign]
    assert keeper.reconcile()
    assert fake.seen("PUT", MWC) == 2
    assert fake.objects[MWC]["webhooks"][0]["rules"][0]["resources"] == ["trainerz"]


def test_keeper_follows_policy_operations_and_leaves_injected_ca_alone(
    fake: FakeAPI, tmp_path: Path
) -> None:
    install_configs(fake)
    fake.objects[MWC]["metadata"]["annotations"] = {
        "cert-manager.io/inject-ca-from": "karta-system/karta-webhook-serving"
    }
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules: [{name: s, schedulerName: kai-scheduler}]\n")
    state = State(bundled=False, policy_path=policy)
    state.set_cluster([load_cluster_karta(karta("trainer"), ENGINE)[0]])
    keeper = WebhookConfigKeeper(state, fake.api(), elector=None, ca_file=ca)
    state.listeners.append(keeper.on_snapshot)
    assert keeper.reconcile()
    mwc = fake.objects[MWC]
    assert mwc["webhooks"][0]["rules"][0]["operations"] == ["CREATE"]
    assert all("caBundle" not in h.get("clientConfig", {}) for h in mwc["webhooks"])

    policy.write_text(
        "operations: [CREATE, UPDATE]\nrules: [{name: s, schedulerName: kai-scheduler}]\n"
    )
    os.utime(policy, ns=(1, 1))  # a new mtime, long ago: settled, so reloaded now
    state.reload_files()
    assert keeper.reconcile()
    assert fake.objects[MWC]["webhooks"][0]["rules"][0]["operations"] == ["CREATE", "UPDATE"]


def test_keeper_registers_the_gang_pod_webhook_only_while_a_rule_has_gang(
    fake: FakeAPI, tmp_path: Path
) -> None:
    from webhook.admission.manifests import GANG_WEBHOOK

    install_configs(fake)
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules: [{name: s, schedulerName: kai-scheduler}]\n")
    state = State(bundled=False, policy_path=policy)
    state.set_cluster([load_cluster_karta(karta("trainer"), ENGINE)[0]])
    keeper = WebhookConfigKeeper(state, fake.api(), elector=None)
    state.listeners.append(keeper.on_snapshot)
    keeper.reconcile()

    def names() -> list[str]:
        return [h["name"] for h in fake.objects[MWC]["webhooks"]]

    assert GANG_WEBHOOK not in names()  # feature off: no pod ever reaches the webhook
    policy.write_text("rules: [{name: g, gang: native}]\n")
    os.utime(policy, ns=(1, 1))
    state.reload_files()
    assert keeper.reconcile()
    assert GANG_WEBHOOK in names()
    [hook] = [h for h in fake.objects[MWC]["webhooks"] if h["name"] == GANG_WEBHOOK]
    workloads = fake.objects[MWC]["webhooks"][0]
    assert hook["clientConfig"]["service"]["path"] == "/gang"
    assert hook["namespaceSelector"] == workloads["namespaceSelector"]
    assert not keeper.reconcile()  # in line: nothing written again
    policy.write_text("rules: [{name: l, labels: {a: b}}]\n")
    os.utime(policy, ns=(2, 2))
    state.reload_files()
    assert keeper.reconcile()
    assert GANG_WEBHOOK not in names()
