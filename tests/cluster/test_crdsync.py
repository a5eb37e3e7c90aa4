"""The CRD list+watch (webhook.cluster.crdsync) against the fake API server: the served versions'
schemas reach the state's snapshot, slimmed; watch events, paging, 410, forbidden lists and
CRDs our reader refuses; and the shared list+watch base (webhook.cluster.listwatch) it runs on."""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterator
from typing import Any

import pytest
from fakeapi import (
    CRDS,
    TRAINER,
    FakeAPI,
    crd_fixture,
    event,
    install_crds,
    trainer_crd,
    wait_for,
)

from webhook.admission.state import State
from webhook.base.gvk import GVK
from webhook.cluster.crdsync import OPEN_SCHEMA, CRDSync, slim_schema
from webhook.schema.crds import read_crds

TFJOB = GVK("kubeflow.org", "v1", "TFJob")


def nodes(schema: Any) -> Iterator[Any]:
    """Every schema node (not data) of a structural schema."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node
        stack.extend((node.get("properties") or {}).values())
        for key in ("items", "additionalProperties", "not"):
            if isinstance(node.get(key), dict):
                stack.append(node[key])
        for key in ("allOf", "anyOf", "oneOf"):
            stack.extend(node.get(key) or [])


# --------------------------------------------------------------------------- slimming


def test_slim_schema_drops_descriptions_and_shares_equal_nodes() -> None:
    crd = trainer_crd()
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    slim = slim_schema(schema)
    assert not any("description" in n for n in nodes(slim))
    assert sum("description" in n for n in nodes(schema)) > 5  # there were some
    spec = slim["properties"]["spec"]["properties"]
    assert spec["description"] == {"type": "string"}  # a field named description stays
    assert spec["template"] is spec["other"]  # equal sub-schemas are stored once
    assert spec["replicas"] == {"type": "integer", "default": 1}

    def without_descriptions(x: Any) -> Any:
        if isinstance(x, dict):
            return {
                k: (
                    {n: without_descriptions(s) for n, s in v.items()}
                    if k == "properties"
                    else without_descriptions(v)
                )
                for k, v in x.items()
                if k != "description"
            }
        return [without_descriptions(v) for v in x] if isinstance(x, list) else x

    assert slim == without_descriptions(schema)


def test_slim_schema_keeps_data_apart() -> None:
    # equal-looking nodes that differ in data types are not merged (True is not 1)
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "default": 1, "enum": [1, 2]},
            "b": {"type": "boolean", "default": True, "enum": [True, False]},
            "c": {"type": "integer", "default": 1, "enum": [1, 2]},
            "d": {"type": "object", "default": {"x": [1]}},
        },
    }
    slim = slim_schema(schema)
    props = slim["properties"]
    assert props["a"] is props["c"] and props["a"] is not props["b"]
    assert props["b"]["default"] is True and props["b"]["enum"] == [True, False]
    assert slim == schema


def test_versions_of_one_crd_share_their_schema() -> None:
    from webhook.cluster.crdsync import read_cluster_crd

    entries = read_cluster_crd("trainerz.example.com", trainer_crd(("v1", "v2")))
    assert [e.version for e in entries] == ["v1", "v2"]
    assert entries[0].schema is entries[1].schema
    assert entries[0].crd == "trainerz.example.com" and entries[0].namespaced


# --------------------------------------------------------------------------- list and watch


def test_relist_publishes_served_versions(fake: FakeAPI) -> None:
    served_and_not = trainer_crd(("v1", "v2"))
    served_and_not["spec"]["versions"][1]["served"] = False
    install_crds(fake, served_and_not, crd_fixture("kubeflow.org_tfjobs.yaml"))
    state = State(bundled=False, watch_cluster=True)
    assert state.snapshot.crds is None  # nothing known yet: nothing claimed
    rv = CRDSync(state, fake.api()).relist()
    assert rv == "100"
    crds = state.snapshot.crds
    assert crds is not None
    assert sorted((e.group, e.version, e.kind) for e in crds) == [
        ("example.com", "v1", "Trainer"),
        ("kubeflow.org", "v1", "TFJob"),
    ]
    assert crds.get(GVK("example.com", "v2", "Trainer")) is None
    assert crds.versions("example.com", "Trainer") == ["v1"]
    tf = crds.get(TFJOB)
    assert tf is not None and tf.crd == "tfjobs.kubeflow.org"
    # the same schema as reading the file with --crd, minus descriptions
    (from_file,) = read_crds([("f", crd_fixture("kubeflow.org_tfjobs.yaml"))])
    assert tf.schema == slim_schema(from_file.schema)


def test_lists_crds_in_small_pages(fake: FakeAPI) -> None:
    crds = [trainer_crd(plural=f"trainer{i}") for i in range(5)]
    for i, c in enumerate(crds):  # five kinds, so that none shadows another
        c["spec"]["names"]["kind"] = f"Trainer{i}"
    install_crds(fake, *crds)
    state = State(bundled=False, watch_cluster=True)
    sync = CRDSync(state, fake.api())
    assert sync.page_size == 50
    sync.page_size = 2
    sync.relist()
    pages = [q for p, q in fake.queries if p == CRDS]
    assert [q.get("limit") for q in pages] == ["2", "2", "2"]
    assert [q.get("continue") for q in pages] == [None, "2", "4"]
    assert state.snapshot.crds is not None and len(state.snapshot.crds) == 5


def test_watch_events_change_the_index(fake: FakeAPI) -> None:
    install_crds(fake)
    state = State(bundled=False, watch_cluster=True)
    sync = CRDSync(state, fake.api())
    rv = sync.relist()
    assert state.snapshot.crds is not None and len(state.snapshot.crds) == 0

    fake.collection_watches.setdefault(CRDS, queue.Queue()).put(
        [event("ADDED", trainer_crd(("v1", "v2"), rv="101"))]
    )
    rv = sync.watch_once(rv, 5)
    assert rv == "101"
    assert state.snapshot.crds.get(TRAINER) is not None
    assert state.snapshot.crds.get(GVK("example.com", "v2", "Trainer")) is not None

    fake.collection_watches[CRDS].put(
        [
            {
                "type": "BOOKMARK",
                "object": {
                    "kind": "CustomResourceDefinition",
                    "metadata": {"resourceVersion": "102"},
                },
            },
            event("MODIFIED", trainer_crd(("v2",), rv="103")),
        ]
    )
    rv = sync.watch_once(rv, 5)
    assert rv == "103"
    assert state.snapshot.crds.get(TRAINER) is None  # v1 no longer served
    assert state.snapshot.crds.versions("example.com", "Trainer") == ["v2"]

    fake.collection_watches[CRDS].put([event("DELETED", trainer_crd(("v2",), rv="104"))])
    sync.watch_once(rv, 5)
    assert len(state.snapshot.crds) == 0


def test_relist_does_not_read_unchanged_crds_again(fake: FakeAPI) -> None:
    install_crds(fake, trainer_crd(rv="5"))
    state = State(bundled=False, watch_cluster=True)
    sync = CRDSync(state, fake.api())
    sync.relist()
    before = state.snapshot.crds.get(TRAINER)
    sync.relist()
    assert state.snapshot.crds.get(TRAINER) is before  # same resourceVersion: kept as it was
    install_crds(fake, trainer_crd(rv="9"))
    sync.relist()
    assert state.snapshot.crds.get(TRAINER) is not before


def test_a_crd_the_reader_refuses_still_serves_its_kind(
    fake: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    crd = trainer_crd()
    deep: dict[str, Any] = {"type": "object"}
    node = deep
    for _ in range(150):  # deeper than webhook.schema.crds accepts (real CRDs: ~30 levels)
        node["properties"] = {"x": {"type": "object"}}
        node = node["properties"]["x"]
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = deep
    install_crds(fake, crd)
    state = State(bundled=False, watch_cluster=True)
    with caplog.at_level(logging.WARNING, logger="karta_webhook.kube"):
        CRDSync(state, fake.api()).relist()
    entry = state.snapshot.crds.get(TRAINER)
    assert entry is not None and entry.schema == OPEN_SCHEMA
    (record,) = [r for r in caplog.records if r.fields["event"] == "crd.unreadable"]  # type: ignore[attr-defined]
    assert record.fields["name"] == "trainerz.example.com"  # type: ignore[attr-defined]
    assert "deeper" in " ".join(record.fields["errors"])  # type: ignore[attr-defined]


def test_410_relists_and_forbidden_backs_off(
    fake: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    install_crds(fake, trainer_crd())
    fake.collection_watches[CRDS] = queue.Queue()
    fake.collection_watches[CRDS].put(410)
    state = State(bundled=False, watch_cluster=True)
    sync = CRDSync(state, fake.api(), backoff_base=0.01)
    sync.start()
    try:
        assert wait_for(lambda: fake.seen("GET", CRDS) >= 2)
        assert state.snapshot.crds is not None and state.snapshot.crds.get(TRAINER) is not None
    finally:
        sync.stop(timeout=2)

    fake.forbidden.add(CRDS)
    state = State(bundled=False, watch_cluster=True)
    sync = CRDSync(state, fake.api(), backoff_base=0.01, backoff_cap=0.05)
    with caplog.at_level(logging.WARNING, logger="karta_webhook.kube"):
        sync.start()
        try:
            assert wait_for(
                lambda: (
                    sum(
                        getattr(r, "fields", {}).get("event") == "crds.error"
                        for r in caplog.records
                    )
                    >= 2
                )
            )
        finally:
            sync.stop(timeout=2)
    assert state.snapshot.crds is None  # never listed: nothing is claimed about CRDs
    error = next(r for r in caplog.records if getattr(r, "fields", {}).get("event") == "crds.error")
    assert error.fields["error"] == "HTTP 403: Forbidden"  # type: ignore[attr-defined]


def test_only_the_schemas_are_kept(fake: FakeAPI) -> None:
    """Nothing of the raw CRD but its schemas stays in memory: not its status, managed fields
    or last-applied annotation (the sync holds no reference to the object it read)."""
    import gc

    def raw(o: object) -> bool:
        return isinstance(o, dict) and (
            "storedVersions" in o or "kubectl.kubernetes.io/last-applied-configuration" in o
        )

    gc.collect()
    before = {id(o) for o in gc.get_objects() if raw(o)}  # what earlier tests keep alive
    install_crds(fake, trainer_crd())
    state = State(bundled=False, watch_cluster=True)
    sync = CRDSync(state, fake.api())
    sync.relist()
    fake.collections.clear()  # the fake's own copies
    gc.collect()
    raw_parts = [o for o in gc.get_objects() if raw(o) and id(o) not in before]
    assert raw_parts == []
    (entry,) = sync.snapshot().values()
    assert entry.resource_version == "5"
    assert [s.version for s in entry.schemas] == ["v1"]
