"""The cluster side of the server, wired: the Karta and CRD syncs, the namespace watch, the
webhook keeper, the status writer and the live-object reader.

:func:`start` runs in each gunicorn worker (threads do not survive a fork): a
:class:`~webhook.cluster.kartasync.ClusterSync` and a :class:`~webhook.cluster.crdsync.CRDSync` feeding the
worker's state, a :class:`~webhook.cluster.policysync.PolicySync` of the KartaPolicy objects
(the policy in force beside the file's), a :class:`~webhook.cluster.namespaces.NamespaceWatch` that the state's
``namespaces`` reads (the policy's namespace selectors and values), a
:class:`~webhook.cluster.keeper.WebhookConfigKeeper` and a
:class:`~webhook.cluster.kartastatus.StatusWriter` sharing one :class:`~webhook.cluster.lease.LeaseElector`
(the keeper renews it; both write only while this process leads), and a
:class:`~webhook.cluster.livesamples.LiveSampler` that ``/validate`` finds on the state.

:func:`namespace_problem` is the start-up check ``serve`` makes once, before it forks: the
Lease lives in ``$POD_NAMESPACE`` (else the service account's namespace, else
``karta-system``), and without that namespace no process ever leads.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from webhook.admission.state import State
from webhook.base.limits import LIVE_SAMPLES
from webhook.cluster.api import Daemon, api_client_from_config, pod_namespace
from webhook.cluster.crdsync import CRDSync
from webhook.cluster.gangs import GangController
from webhook.cluster.kartastatus import StatusWriter
from webhook.cluster.kartasync import ClusterSync
from webhook.cluster.keeper import WebhookConfigKeeper
from webhook.cluster.lease import LeaseElector, NamespaceMissing, namespace_missing
from webhook.cluster.livesamples import LiveSampler, no_retry_client
from webhook.cluster.namespaces import NamespaceWatch
from webhook.cluster.owners import OwnerReader
from webhook.cluster.policysync import (
    NamespacePolicySync,
    PolicyStatus,
    PolicySync,
    shadows_in,
)
from webhook.jq.engine import Engine


def namespace_problem(
    kubeconfig: str | None = None,
    *,
    api: client.ApiClient | None = None,
    namespace: str | None = None,
) -> str | None:
    """Why the cluster side cannot lead, said before anything starts: the Lease's namespace
    does not exist (see :class:`~webhook.cluster.lease.NamespaceMissing`). None when it exists,
    when there is no cluster configuration, or when the cluster does not say (unreachable,
    forbidden): the jobs then report what they meet as they run."""
    try:
        api = api or api_client_from_config(kubeconfig)
    except Exception:
        return None  # the cluster side's own start reports an unusable configuration
    if api is None:
        return None
    ns = namespace or pod_namespace()
    return str(NamespaceMissing(ns)) if namespace_missing(api, ns) else None


class Cluster:
    """What :func:`start` started: stop it all with :meth:`stop`."""

    def __init__(
        self,
        sync: ClusterSync,
        keeper: WebhookConfigKeeper | None,
        crds: CRDSync | None = None,
        status: StatusWriter | None = None,
        namespaces: NamespaceWatch | None = None,
        policies: PolicySync | None = None,
        policy_status: PolicyStatus | None = None,
        namespaced: tuple[NamespacePolicySync, PolicyStatus | None] | None = None,
        gangs: GangController | None = None,
    ) -> None:
        self.sync = sync
        self.keeper = keeper
        self.crds = crds
        self.status = status
        self.namespaces = namespaces
        self.policies = policies
        self.policy_status = policy_status
        self.namespaced = namespaced
        self.gangs = gangs

    def objects(self) -> list[dict[str, Any]]:
        return self.sync.objects()

    def stop(self) -> None:
        jobs: list[Daemon | None] = [
            self.sync, self.crds, self.namespaces, self.policies, self.policy_status,
            self.status, self.gangs, self.keeper,
        ]  # fmt: skip
        if self.namespaced is not None:
            jobs.extend(self.namespaced)
        for job in jobs:
            if job is not None:
                job.stop()


def start(
    state: State,
    engine: Engine,
    kubeconfig: str | None = None,
    *,
    api: client.ApiClient | None = None,
    ca_file: str | Path | None = None,
    namespace: str | None = None,
    keep_webhooks: bool = True,
    write_status: bool = True,
    live_samples: int = LIVE_SAMPLES,
    resync_seconds: float = 600.0,
    on_gang_api: Callable[[bool], None] | None = None,
) -> Cluster | None:
    """Start the cluster side in daemon threads (see the module docstring); None when there is
    no cluster configuration, in which case the server runs on the catalog alone and ``state``
    is marked synced.

    Call it per gunicorn worker, after fork (threads do not survive a fork). ``state`` should be
    created with ``watch_cluster=True``; ``engine`` checks the Kartas it reads; ``ca_file`` is
    the CA to publish as ``caBundle`` (e.g. the mounted ``ca.crt``), None to leave caBundle to
    someone else (cert-manager). ``keep_webhooks`` and ``write_status`` turn the two leader jobs
    on or off; ``live_samples`` is how many live objects of a Karta's root kind ``/validate``
    reads (0: none); ``on_gang_api`` is told whether the cluster serves the native gang's
    PodGroups each time the leader's gang controller looks (the server's metric).
    """
    api = api or api_client_from_config(kubeconfig)
    if api is None:
        if not state.ready:
            state.set_cluster([])
        return None
    if live_samples > 0:
        state.live_samples = LiveSampler(no_retry_client(api), live_samples)
    sync = ClusterSync(state, api, engine, resync_seconds=resync_seconds)
    crds = CRDSync(state, api)
    namespaces = NamespaceWatch(api, resync_seconds=resync_seconds)
    state.namespaces = namespaces
    owners = OwnerReader(api)
    state.owners = owners
    elector = (
        LeaseElector(api, namespace or pod_namespace()) if keep_webhooks or write_status else None
    )
    keeper = None
    if keep_webhooks:
        keeper = WebhookConfigKeeper(state, api, elector=elector, ca_file=ca_file)
        state.listeners.append(keeper.on_snapshot)
    status = None
    if write_status:
        status = StatusWriter(state, api, elector=elector, renews=keeper is None)
        state.listeners.append(status.on_snapshot)
    # The native gang's PodGroups, by the leader (idle while no rule has gang).
    gangs = (
        GangController(state, api, engine, owners, elector=elector, report=on_gang_api)
        if elector
        else None
    )
    # The policies' Accepted condition is written by the leader, as the Kartas' are (the
    # keeper or the Karta status writer renews the Lease).
    # With the gang controller's discovery: a gang rule's GangScheduling condition.
    gang_api = gangs.api_status if gangs is not None else None
    policy_status = PolicyStatus(api, elector=elector, gang_api=gang_api) if write_status else None
    policies = PolicySync(state, api, policy_status, resync_seconds=resync_seconds)
    team_status = (
        PolicyStatus(api, elector=elector, namespaced=True, shadows=shadows_in(state))
        if write_status
        else None
    )
    if gangs is not None and policy_status is not None:  # (a namespaced policy has no gang)
        gangs.listeners.append(policy_status.gang_api_changed)
    if team_status is not None:  # a cluster policy that comes or goes changes Shadowed
        state.listeners.append(team_status.policies_changed)
    teams = NamespacePolicySync(state, api, team_status, resync_seconds=resync_seconds)
    # Ready once every source of policy is read (the Kartas: ``cluster_synced``), not before:
    # a workload admitted between would miss the policy objects' rules.
    state.awaiting.update(
        {
            "policies": policies.listed,
            "namespace-policies": teams.listed,
            "namespaces": namespaces.listed,
        }
    )
    for job in (
        keeper,
        status,
        gangs,
        policy_status,
        team_status,
        crds,
        namespaces,
        policies,
        teams,
        sync,
    ):
        if job is not None:
            job.start()
    return Cluster(
        sync, keeper, crds, status, namespaces, policies, policy_status, (teams, team_status),
        gangs,
    )  # fmt: skip
