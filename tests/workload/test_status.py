"""Status conditions on Kartas: what they say (webhook.admission.conditions) and how the leader writes
them (webhook.cluster.kartastatus) against the fake API server: merge patches of the status
subresource with the resourceVersion, only when something changed, only while leading, and
only once the CRDs are known."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fakeapi import (
    KARTAS,
    Clock,
    FakeAPI,
    install_crds,
    karta,
    stored,
    trainer_crd,
)
from helpers import ENGINE

from webhook.admission import conditions
from webhook.admission.state import State
from webhook.base.gvk import GVK
from webhook.cluster import kartasync
from webhook.cluster.crdsync import CRDSync, read_cluster_crd
from webhook.cluster.kartastatus import StatusWriter
from webhook.cluster.kartasync import ClusterSync
from webhook.cluster.lease import LeaseElector
from webhook.schema.crds import SchemaIndex

OTHER = GVK("example.com", "v1", "Other")
T0 = datetime(2026, 5, 2, 10, 0, 0, tzinfo=UTC)
T1 = datetime(2026, 5, 2, 11, 30, 0, tzinfo=UTC)


def index(*crds: dict[str, Any]) -> SchemaIndex:
    return SchemaIndex(e for c in crds for e in read_cluster_crd(c["metadata"]["name"], c))


def by_type(conds: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in conds}


# --------------------------------------------------------------------------- the conditions


def test_conditions_of_a_karta_in_use() -> None:
    want = conditions.wanted(karta("t"), None, index(trainer_crd()))
    assert [(c.type, c.status, c.reason) for c in want] == [
        ("Validated", True, "ValidationSucceeded"),
        ("CRDExists", True, "CRDFound"),
        ("Ready", True, "Ready"),
    ]
    assert "CustomResourceDefinition trainerz.example.com" in want[1].message


def test_conditions_say_why_not() -> None:
    errors = [f"spec.x{i}: bad" for i in range(5)]
    v, c, r = conditions.wanted(karta("t", kind=OTHER), errors, index(trainer_crd()))
    assert (v.status, v.reason) == (False, "ValidationFailed")
    assert v.message == "spec.x0: bad; spec.x1: bad; spec.x2: bad (and 2 more)"
    assert (c.status, c.reason) == (False, "CRDNotFound")
    assert c.message == "no CustomResourceDefinition in the cluster serves example.com/v1 Other"
    assert (r.status, r.reason, r.message) == (
        False,
        "NotReady",
        "not in use: Validated and CRDExists are False",
    )
    # the CRD is there, at other versions
    _, c, r = conditions.wanted(karta("t"), None, index(trainer_crd(("v2", "v3"))))
    assert c.message == (
        "the CustomResourceDefinition of example.com Trainer serves v2, v3, not v1"
    )
    assert r.message == "not in use: CRDExists is False"
    # a built-in kind needs no CRD
    _, c, _ = conditions.wanted(karta("j", kind=GVK("batch", "v1", "Job")), None, index())
    assert (c.status, c.message) == (True, "batch/v1 Job is a built-in kind")
    # no root kind at all
    broken = karta("b")
    del broken["spec"]["structureDefinition"]["rootComponent"]["kind"]
    _, c, _ = conditions.wanted(broken, ["kind: required"], index())
    assert c.message == "spec.structureDefinition.rootComponent.kind is not set"


def test_long_messages_are_bounded() -> None:
    v = conditions.validated(["x" * 10_000])
    assert len(v.message) == 2048 and v.message.endswith("...")


def test_merged_keeps_transition_times_and_other_conditions() -> None:
    want = conditions.wanted(karta("t"), None, index(trainer_crd()))
    first = conditions.merged([], want, 3, "2026-05-02T10:00:00Z")
    assert first is not None
    assert [c["type"] for c in first] == ["Validated", "CRDExists", "Ready"]
    assert all(c["observedGeneration"] == 3 for c in first)
    assert all(c["lastTransitionTime"] == "2026-05-02T10:00:00Z" for c in first)
    assert conditions.merged(first, want, 3, "2026-05-02T11:00:00Z") is None  # nothing to do

    foreign = {
        "type": "PodGrouperReady",
        "status": "True",
        "reason": "Indexed",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    now_bad = conditions.wanted(karta("t"), ["spec.x: bad"], index(trainer_crd()))
    second = conditions.merged([foreign, *first], now_bad, 4, "2026-05-02T11:00:00Z")
    assert second is not None and second[0] == foreign
    got = by_type(second)
    assert got["Validated"]["status"] == "False"
    assert got["Validated"]["lastTransitionTime"] == "2026-05-02T11:00:00Z"  # it changed
    assert got["CRDExists"]["lastTransitionTime"] == "2026-05-02T10:00:00Z"  # it did not
    assert got["CRDExists"]["observedGeneration"] == 4


# --------------------------------------------------------------------------- the writer


class Cluster:
    """Kartas and CRDs in the fake API server, seen through the two syncs, and the writer."""

    def __init__(self, fake: FakeAPI, *, elector: LeaseElector | None = None) -> None:
        self.fake = fake
        self.api = fake.api()
        self.state = State(bundled=False, watch_cluster=True)
        self.now = T0
        self.writer = StatusWriter(self.state, self.api, elector=elector, now=lambda: self.now)
        self.state.listeners.append(self.writer.on_snapshot)
        self.kartas = ClusterSync(self.state, self.api, ENGINE)
        self.crds = CRDSync(self.state, self.api)

    def sync(self) -> None:
        self.kartas.relist()
        self.crds.relist()

    def conditions(self, name: str) -> dict[str, dict[str, Any]]:
        return by_type(self.fake.kartas[name].get("status", {}).get("conditions", []))


def add(fake: FakeAPI, obj: dict[str, Any], generation: int = 1) -> None:
    fake.kartas[obj["metadata"]["name"]] = stored(obj, fake.next_rv(), generation)


@pytest.fixture
def cluster(fake: FakeAPI) -> Cluster:
    install_crds(fake, trainer_crd())
    add(fake, karta("good"), generation=2)
    add(fake, karta("evil", ".spec.template | env.HOME", kind=GVK("example.com", "v1", "Evil")))
    newer = karta("second")
    newer["metadata"]["creationTimestamp"] = "2026-05-03T00:00:00Z"
    add(fake, newer)
    add(fake, karta("job", kind=GVK("batch", "v1", "Job")))
    return Cluster(fake)


def test_writes_every_kartas_conditions_once(cluster: Cluster) -> None:
    fake = cluster.fake
    cluster.sync()
    assert cluster.writer.reconcile() == 4
    patches = {p: (ct, body) for p, ct, body in fake.patches}
    assert set(patches) == {f"{KARTAS}/{n}/status" for n in ("good", "evil", "second", "job")}
    ct, body = patches[f"{KARTAS}/good/status"]
    assert ct == "application/merge-patch+json"
    assert set(body) == {"metadata", "status"}
    assert body["metadata"] == {"resourceVersion": "101"}  # written against what was read
    assert body["status"]["observedGeneration"] == 2

    good = cluster.conditions("good")
    assert {t: (c["status"], c["reason"]) for t, c in good.items()} == {
        "Validated": ("True", "ValidationSucceeded"),
        "CRDExists": ("True", "CRDFound"),
        "Ready": ("True", "Ready"),
    }
    assert good["Ready"]["lastTransitionTime"] == "2026-05-02T10:00:00Z"
    assert good["Ready"]["observedGeneration"] == 2
    evil = cluster.conditions("evil")
    assert evil["Validated"]["reason"] == "ValidationFailed"
    assert "env" in evil["Validated"]["message"]
    assert evil["CRDExists"]["reason"] == "CRDNotFound"
    assert evil["Ready"]["message"] == "not in use: Validated and CRDExists are False"
    second = cluster.conditions("second")
    assert second["Validated"]["message"] == (
        'a Karta for group "example.com" version "v1" kind "Trainer" already exists ("good"); '
        "only one Karta per group/version/kind is allowed"
    )
    assert second["CRDExists"]["status"] == "True"
    assert cluster.conditions("job")["Ready"]["status"] == "True"

    # The watch brings the written objects back: nothing more to write.
    cluster.sync()
    assert cluster.writer.reconcile() == 0
    assert len(fake.patches) == 4


def test_status_writes_do_not_check_kartas_again(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.sync()
    cluster.writer.reconcile()
    calls: list[str] = []
    real = kartasync.load_cluster_karta

    def counting(obj: Any, engine: Any, vet: Any = None) -> Any:
        calls.append(obj["metadata"]["name"])
        return real(obj, engine, vet)

    monkeypatch.setattr(kartasync, "load_cluster_karta", counting)
    cluster.sync()  # every resourceVersion moved (status), no generation did
    assert calls == []
    spec_changed = karta("good", ".spec.other")
    add(cluster.fake, spec_changed, generation=3)
    cluster.sync()
    assert calls == ["good"]


def test_a_crd_installed_later_flips_crd_exists(cluster: Cluster) -> None:
    fake = cluster.fake
    add(fake, karta("other", kind=OTHER))
    cluster.sync()
    cluster.writer.reconcile()
    before = cluster.conditions("other")
    assert before["CRDExists"]["status"] == "False"

    other_crd = trainer_crd(plural="others", rv="50")
    other_crd["spec"]["names"].update(kind="Other", listKind="OtherList", singular="other")
    install_crds(fake, trainer_crd(), other_crd)
    cluster.now = T1
    cluster.sync()
    assert cluster.writer.reconcile() == 1
    after = cluster.conditions("other")
    assert (after["CRDExists"]["status"], after["Ready"]["status"]) == ("True", "True")
    assert after["CRDExists"]["lastTransitionTime"] == "2026-05-02T11:30:00Z"
    assert after["Validated"]["lastTransitionTime"] == before["Validated"]["lastTransitionTime"]


def test_nothing_is_written_before_the_crds_are_known(cluster: Cluster) -> None:
    cluster.kartas.relist()
    assert cluster.state.snapshot.crds is None
    assert cluster.writer.reconcile() == 0
    assert cluster.fake.patches == []
    cluster.crds.relist()
    assert cluster.writer.reconcile() == 4


def test_only_the_leader_writes(fake: FakeAPI) -> None:
    install_crds(fake, trainer_crd())
    add(fake, karta("good"))
    fake.objects[
        "/apis/coordination.k8s.io/v1/namespaces/karta-system/leases/karta-webhook-leader"
    ] = {
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
            "renewTime": "2026-05-02T10:00:00.000000Z",
        },
    }
    clock = Clock()
    elector = LeaseElector(fake.api(), "karta-system", holder="me_1", clock=clock)
    c = Cluster(fake, elector=elector)
    c.writer.renews = True  # no keeper here: the writer runs the election itself
    c.sync()
    c.writer.step()  # another holder's lease is fresh
    assert not elector.is_leader() and fake.patches == []
    clock.t += 16  # unchanged for longer than its 15 s: taken over
    c.writer.step()
    assert elector.is_leader()
    assert [p for p, _, _ in fake.patches] == [f"{KARTAS}/good/status"]


def test_a_conflict_waits_for_the_watch(cluster: Cluster) -> None:
    fake = cluster.fake
    cluster.sync()
    fake.kartas["good"]["metadata"]["resourceVersion"] = fake.next_rv()  # changed meanwhile
    assert cluster.writer.reconcile() == 3  # the others; no exception
    assert "status" not in fake.kartas["good"]
    cluster.sync()
    assert cluster.writer.reconcile() == 1
    assert cluster.conditions("good")["Ready"]["status"] == "True"


def test_deleted_meanwhile_is_not_an_error(cluster: Cluster) -> None:
    cluster.sync()
    del cluster.fake.kartas["good"]
    assert cluster.writer.reconcile() == 3


def test_the_writer_thread_follows_the_snapshot(cluster: Cluster) -> None:
    from fakeapi import wait_for

    cluster.writer.retry_seconds = 0.05
    cluster.writer.start()
    try:
        cluster.sync()
        assert wait_for(lambda: len(cluster.fake.patches) == 4)
    finally:
        cluster.writer.stop(timeout=2)
