"""Starting the cluster side in a worker (webhook.kube): the sync and the keeper run, or the
server runs on the catalog alone."""

from __future__ import annotations

import pytest
from fakeapi import MWC, TRAINER, FakeAPI, install_configs, karta, wait_for
from helpers import ENGINE

from webhook.kube import start
from webhook.registry import State


def test_start_runs_sync_and_keeper_threads(fake: FakeAPI) -> None:
    install_configs(fake)
    fake.kartas["trainer"] = karta("trainer")
    state = State(bundled=False, watch_cluster=True)
    cluster = start(state, ENGINE, api=fake.api(), namespace="karta-system")
    try:
        assert wait_for(lambda: state.ready and state.snapshot.registry.lookup(TRAINER) is not None)
        assert wait_for(lambda: fake.seen("PUT", MWC) >= 1)
        assert [o["metadata"]["name"] for o in cluster.objects()] == ["trainer"]
    finally:
        cluster.stop()


def test_start_offline_runs_on_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    state = State(watch_cluster=True)
    assert start(state, ENGINE) is None
    assert state.ready and len(state.snapshot.registry) > 0


def test_serve_flags() -> None:
    from webhook.cli import build_parser

    args = build_parser().parse_args(["serve", "--kubeconfig", "kc", "--no-kube"])
    assert args.kubeconfig == "kc" and args.no_kube
