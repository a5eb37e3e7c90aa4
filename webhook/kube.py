"""The cluster side of the server, wired: the Karta sync and the webhook keeper.

:func:`start` runs in each gunicorn worker (threads do not survive a fork): a
:class:`~webhook.kartasync.ClusterSync` feeding the worker's state, and a
:class:`~webhook.keeper.WebhookConfigKeeper` with its :class:`~webhook.leader.LeaseElector`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from webhook.jqexpr import Engine
from webhook.kartasync import ClusterSync
from webhook.keeper import WebhookConfigKeeper
from webhook.kubeapi import api_client_from_config, pod_namespace
from webhook.leader import LeaseElector
from webhook.registry import State


class Cluster:
    """What :func:`start` started: stop both with :meth:`stop`."""

    def __init__(self, sync: ClusterSync, keeper: WebhookConfigKeeper | None) -> None:
        self.sync = sync
        self.keeper = keeper

    def objects(self) -> list[dict[str, Any]]:
        return self.sync.objects()

    def stop(self) -> None:
        self.sync.stop()
        if self.keeper is not None:
            self.keeper.stop()


def start(
    state: State,
    engine: Engine,
    kubeconfig: str | None = None,
    *,
    api: client.ApiClient | None = None,
    ca_file: str | Path | None = None,
    namespace: str | None = None,
    keep_webhooks: bool = True,
    resync_seconds: float = 600.0,
) -> Cluster | None:
    """Start the cluster sync (and, unless ``keep_webhooks`` is false, the webhook keeper with
    its leader election) in daemon threads; None when there is no cluster configuration, in
    which case the server runs on the catalog alone and ``state`` is marked synced.

    Call it per gunicorn worker, after fork (threads do not survive a fork). ``state`` should be
    created with ``watch_cluster=True``; ``engine`` checks the Kartas it reads; ``ca_file`` is the CA to publish as ``caBundle``
    (e.g. the mounted ``ca.crt``), None to leave caBundle to someone else (cert-manager).
    """
    api = api or api_client_from_config(kubeconfig)
    if api is None:
        if not state.ready:
            state.set_cluster([])
        return None
    sync = ClusterSync(state, api, engine, resync_seconds=resync_seconds)
    keeper = None
    if keep_webhooks:
        elector = LeaseElector(api, namespace or pod_namespace())
        keeper = WebhookConfigKeeper(state, api, elector=elector, ca_file=ca_file)
        state.listeners.append(keeper.on_snapshot)
        keeper.start()
    sync.start()
    return Cluster(sync, keeper)
