"""Starting the cluster side in a worker (webhook.cluster.wiring): the sync and the keeper run, or the
server runs on the catalog alone."""

from __future__ import annotations

import pytest
from fakeapi import (
    KARTAS,
    MWC,
    TRAINER,
    FakeAPI,
    install_configs,
    install_crds,
    karta,
    trainer_crd,
    wait_for,
)
from helpers import ENGINE

from webhook.admission.state import State
from webhook.cluster.wiring import start


def test_start_runs_sync_and_keeper_threads(fake: FakeAPI) -> None:
    install_configs(fake)
    install_crds(fake, trainer_crd())
    fake.kartas["trainer"] = karta("trainer")
    state = State(bundled=False, watch_cluster=True)
    cluster = start(state, ENGINE, api=fake.api(), namespace="karta-system")
    assert cluster is not None
    try:
        assert wait_for(lambda: state.ready and state.snapshot.registry.lookup(TRAINER) is not None)
        assert wait_for(lambda: fake.seen("PUT", MWC) >= 1)
        assert [o["metadata"]["name"] for o in cluster.objects()] == ["trainer"]
        # the CRDs reach the snapshot, the leader writes the Karta's status, /validate can
        # read live objects
        assert wait_for(lambda: state.snapshot.crds is not None and TRAINER in state.snapshot.crds)
        # the fake counts a request as it arrives and applies it after: wait for both
        assert wait_for(
            lambda: (
                fake.seen("PATCH", f"{KARTAS}/trainer/status") == 1
                and "status" in fake.kartas["trainer"]
            )
        )
        conds = {c["type"]: c["status"] for c in fake.kartas["trainer"]["status"]["conditions"]}
        assert conds == {"Validated": "True", "CRDExists": "True", "Ready": "True"}
        assert state.live_samples is not None
    finally:
        cluster.stop()
    assert not any(
        t.is_alive()
        for t in (cluster.sync._thread, cluster.crds._thread, cluster.status._thread)  # type: ignore[union-attr]
        if t is not None
    )


def test_start_without_live_samples_or_status(fake: FakeAPI) -> None:
    install_crds(fake)
    state = State(bundled=False, watch_cluster=True)
    cluster = start(
        state, ENGINE, api=fake.api(), keep_webhooks=False, write_status=False, live_samples=0
    )
    assert cluster is not None
    try:
        assert cluster.keeper is None and cluster.status is None
        assert state.live_samples is None
        assert wait_for(lambda: state.snapshot.crds is not None)
    finally:
        cluster.stop()


def test_start_offline_runs_on_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    state = State(watch_cluster=True)
    assert start(state, ENGINE) is None
    assert state.ready and len(state.snapshot.registry) > 0


def test_serve_flags() -> None:
    from webhook.cli.main import build_parser

    args = build_parser().parse_args(["serve", "--kubeconfig", "kc", "--no-kube"])
    assert args.kubeconfig == "kc" and args.no_kube
    assert args.live_samples == 20
    assert build_parser().parse_args(["serve", "--live-samples", "0"]).live_samples == 0


@pytest.mark.parametrize("n", ["-1", "51"])
def test_serve_refuses_live_samples_out_of_range(
    n: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from webhook.cli.main import main

    assert main(["serve", "--live-samples", n, "--no-kube"]) == 2
    assert "--live-samples must be between 0 and 50" in capsys.readouterr().err
