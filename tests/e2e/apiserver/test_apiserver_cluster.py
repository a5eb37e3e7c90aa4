"""The cluster paths against a real API server, with only the rights ``manifests/base``
grants: ``serve --kubeconfig`` (not ``--no-kube``) runs as the ServiceAccount
``karta-system/karta-webhook`` bound to the ClusterRole and Role of ``manifests/base/rbac.yaml``,
with a token from the TokenRequest API. Two servers run, as two replicas would; one leads
through the Lease.

What is checked: the leader writes caBundle and rules into the webhook configurations; a Karta
for a kind outside the catalog, applied with kubectl, makes the next create of that kind
mutated, and deleting it stops that; Validated/CRDExists/Ready conditions in
``kubectl get kartas``; a CRD installed after its Karta flips CRDExists; the leadership moves
within the lease duration when the leader stops; ``kubectl auth can-i --list`` for the
ServiceAccount holds nothing docs/install.md does not justify.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kapi
import pytest
import yaml
from helpers import TRAINER_KARTA_YAML
from hooks import Webhook, configurations, karta, register, start_webhook, unregister, wait_until

BASE = kapi.ROOT / "manifests" / "base"
SA = "system:serviceaccount:karta-system:karta-webhook"
LEASE_SECONDS = 15  # webhook.cluster.lease.LeaseElector's default
TRAINER_CRD = (
    kapi.ROOT / "tests" / "crds" / "outside-catalog" / "training.example.com_trainers.yaml"
)
POLICY = """\
rules:
- name: kai
  schedulerName: kai-scheduler
  labels: {kai.scheduler/queue: research}
"""
TRAINER_KARTA = TRAINER_KARTA_YAML


@dataclass
class Cluster:
    plane: kapi.ControlPlane
    servers: dict[str, Webhook]
    kubeconfig: Path
    ca_b64: str


def _sa_kubeconfig(plane: kapi.ControlPlane, d: Path) -> Path:
    token = plane.kubectl(
        "create", "token", "karta-webhook", "-n", "karta-system", "--duration=2h"
    ).stdout.strip()
    path = d / "sa-kubeconfig"
    path.write_text(kapi.kubeconfig_text(plane.url, plane.ca, token, "karta-webhook"))
    return path


@pytest.fixture(scope="module")
def cluster(
    plane: kapi.ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
    workload_crds: dict[str, str],
) -> Iterator[Cluster]:
    """Two servers in cluster mode (``a`` and ``b``, one Lease), started once the workload
    kinds' CRDs are in, so the servers read their schemas at start rather than one watch event
    a CRD (the CRDs' install time itself was YAML parsing: see ``kapi.load_all``)."""
    d = tmp_path_factory.mktemp("cluster")
    for f in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml"):
        plane.kubectl("apply", "--server-side", "-f", str(BASE / f))
    kubeconfig = _sa_kubeconfig(plane, d)
    servers: dict[str, Webhook] = {}
    try:
        args = [f"--kubeconfig={kubeconfig}"]
        env = {"POD_NAMESPACE": "karta-system"}
        servers["a"] = start_webhook(d / "a", POLICY, args, env={**env, "POD_NAME": "serve-a"})
        servers["b"] = start_webhook(
            d / "b", POLICY, args, env={**env, "POD_NAME": "serve-b"}, certs_from=d / "a" / "certs"
        )
        # Registered as kubectl would apply the printed manifests, without a caBundle: the
        # leader publishes its CA.
        docs = configurations(servers["a"])
        for doc in docs:
            for hook in doc["webhooks"]:
                hook["clientConfig"].pop("caBundle", None)
        register(plane, docs)
        ca_b64 = base64.b64encode(servers["a"].ca.read_bytes()).decode()
        yield Cluster(plane, servers, kubeconfig, ca_b64)
    finally:
        unregister(plane)
        for s in servers.values():
            s.stop()


def _configs(plane: kapi.ControlPlane) -> list[dict[str, Any]]:
    return [
        plane.get_json(kind, "karta-webhook")
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
    ]


def _lease(plane: kapi.ControlPlane) -> dict[str, Any]:
    return dict(plane.get_json("lease", "karta-webhook-leader", "-n", "karta-system"))


def _audit_writers(plane: kapi.ControlPlane, resource: str) -> list[dict[str, Any]]:
    out = []
    for line in (plane.dir / "audit.log").read_text().splitlines():
        e = json.loads(line)
        if (e.get("objectRef") or {}).get("resource") == resource and e.get(
            "stage"
        ) == "ResponseComplete":
            out.append(e)
    return out


def test_the_leader_writes_ca_bundle_into_both_configurations(cluster: Cluster) -> None:
    plane = cluster.plane

    def published() -> bool:
        hooks = [h for c in _configs(plane) for h in c["webhooks"]]
        return all(h["clientConfig"].get("caBundle") == cluster.ca_b64 for h in hooks)

    wait_until("caBundle published by the leader", published, seconds=60)
    updates = [
        e
        for e in _audit_writers(plane, "mutatingwebhookconfigurations")
        if e["verb"] in ("update", "patch") and e["user"]["username"] == SA
    ]
    assert updates and all(e["responseStatus"]["code"] == 200 for e in updates)
    holder = _lease(plane)["spec"]["holderIdentity"]
    assert holder.startswith(("serve-a_", "serve-b_")), holder


def _trainer(name: str, namespace: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "training.example.com/v1",
        "kind": "Trainer",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"groups": [{"name": "main", "replicas": 1, "template": template}]},
    }


def _trainer_scheduler(plane: kapi.ControlPlane, ns: str, name: str) -> str | None:
    status, body = plane.request(
        "POST", f"/apis/training.example.com/v1/namespaces/{ns}/trainers", _trainer(name, ns)
    )
    assert status == 201, body
    spec = body["spec"]["groups"][0]["template"]["spec"]
    return spec.get("schedulerName")


def _conditions(plane: kapi.ControlPlane, name: str) -> dict[str, str]:
    got = plane.kubectl("get", "karta", name, "-o", "json", check=False)
    if got.returncode != 0:
        return {}
    status = json.loads(got.stdout).get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def _rule_resources(plane: kapi.ControlPlane) -> set[str]:
    mwc = _configs(plane)[0]
    hook = next(h for h in mwc["webhooks"] if h["name"].startswith("workloads."))
    return {r for rule in hook["rules"] for r in rule["resources"]}


def test_a_karta_for_a_new_kind_makes_its_next_create_mutated(cluster: Cluster, ns: str) -> None:
    plane = cluster.plane
    plane.kubectl("apply", "-f", str(TRAINER_CRD))
    plane.wait_established("trainers.training.example.com")
    assert _trainer_scheduler(plane, ns, "before") is None  # no definition yet: untouched
    # Through the validating webhook. The ClusterRole lists the catalog's kinds only, so live
    # Trainers are not read, and kubectl prints how to grant it.
    out = plane.kubectl("apply", "-f", "-", input=TRAINER_KARTA)
    assert "karta.run.ai/example-trainer created" in out.stdout
    assert (
        "Warning: karta-webhook: live objects of training.example.com/v1 Trainer not read: forbidden"
        in out.stderr
    )
    stored = plane.get_json("karta", "example-trainer")
    assert stored["metadata"]["labels"]["run.ai/karta-kind"] == "Trainer"  # our mutating hook
    wait_until(
        "the leader adds trainers to the rules", lambda: "trainers" in _rule_resources(plane)
    )
    names = iter(range(1000))
    wait_until(
        "a new Trainer is mutated",
        lambda: _trainer_scheduler(plane, ns, f"t{next(names)}") == "kai-scheduler",
    )
    wait_until(
        "Validated, CRDExists and Ready are True",
        lambda: (
            _conditions(plane, "example-trainer")
            == {"Validated": "True", "CRDExists": "True", "Ready": "True"}
        ),
    )
    table = plane.kubectl("get", "kartas").stdout
    row = next(line for line in table.splitlines() if line.startswith("example-trainer"))
    assert row.split()[1:4] == ["Trainer", "trainer", "True"], table


def test_deleting_the_karta_stops_the_mutation(cluster: Cluster, ns: str) -> None:
    plane = cluster.plane
    if _conditions(plane, "example-trainer").get("Ready") != "True":
        pytest.fail("needs the Karta of the test before (run the module whole)")
    plane.kubectl("delete", "karta", "example-trainer")
    wait_until(
        "the leader drops trainers from the rules", lambda: "trainers" not in _rule_resources(plane)
    )
    names = iter(range(1000))
    wait_until(  # every worker of both servers has seen the delete
        "a new Trainer is left alone",
        lambda: all(_trainer_scheduler(plane, ns, f"u{next(names)}") is None for _ in range(6)),
    )


def test_a_crd_installed_after_its_karta_flips_crd_exists(cluster: Cluster) -> None:
    plane = cluster.plane
    group = f"late{uuid.uuid4().hex[:6]}.example.com"
    karta = yaml.safe_load(TRAINER_KARTA)
    karta["metadata"]["name"] = f"late-{group.split('.')[0]}"
    karta["spec"]["structureDefinition"]["rootComponent"]["kind"]["group"] = group
    plane.apply([karta])
    name = karta["metadata"]["name"]
    wait_until(
        "CRDExists is False before the CRD",
        lambda: _conditions(plane, name).get("CRDExists") == "False",
    )
    assert _conditions(plane, name)["Ready"] == "False"
    crd = yaml.safe_load(TRAINER_CRD.read_text())
    crd["metadata"]["name"] = f"trainers.{group}"
    crd["spec"]["group"] = group
    plane.apply([crd])
    plane.wait_established(f"trainers.{group}")
    wait_until(
        "CRDExists and Ready flip to True",
        lambda: (
            _conditions(plane, name).get("CRDExists") == "True"
            and _conditions(plane, name).get("Ready") == "True"
        ),
    )


def test_the_bundled_catalog_as_karta_objects_shows_in_get_kartas(
    cluster: Cluster, workload_crds: dict[str, str]
) -> None:
    """``manifests --catalog`` prints the bundled definitions as Kartas: applied, each passes
    the validating webhook, and the leader writes their conditions, so the verify step of
    docs/install.md shows what the webhook uses."""
    plane = cluster.plane
    docs = [d for d in yaml.safe_load_all(karta("manifests", "--catalog")) if d["kind"] == "Karta"]
    assert len(docs) == len(list((kapi.ROOT / "catalog").glob("*.yaml")))
    out = plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs), timeout=300)
    assert out.stdout.count(" created") == len(docs), out.stdout + out.stderr
    name = "jobset-x-k8s-io-jobset-v1alpha2"
    wait_until(
        "the JobSet Karta is Ready",
        lambda: _conditions(plane, name).get("Ready") == "True",
        seconds=60,
    )
    described = plane.kubectl("describe", "karta", name).stdout
    for needle in ("Validated", "CRDExists", "Ready", "the definition is in use"):
        assert needle in described, described
    rows = plane.kubectl("get", "kartas").stdout
    assert len(rows.splitlines()) >= len(docs) + 1
    # A kind whose CRD is not installed here is not in use, and says why.
    wait_until(
        "the Milvus Karta says its CRD is missing",
        lambda: _conditions(plane, "milvus-io-milvus-v1beta1").get("CRDExists") == "False",
        seconds=60,
    )
    plane.kubectl("delete", "karta", "-l", "app.kubernetes.io/part-of=karta-webhook")


def test_stopping_the_leader_hands_over_within_the_lease_duration(cluster: Cluster) -> None:
    plane = cluster.plane
    holder = _lease(plane)["spec"]["holderIdentity"]
    leader = holder.split("_")[0].removeprefix("serve-")
    other = "b" if leader == "a" else "a"
    # Someone removes the caBundle; the leader does not watch the configurations (it resyncs
    # every 5 minutes), the next leader reconciles as it takes over.
    mwc = _configs(plane)[0]
    for hook in mwc["webhooks"]:
        hook["clientConfig"].pop("caBundle", None)
    plane.kubectl("replace", "-f", "-", input=json.dumps(mwc))
    cluster.servers[leader].stop()  # SIGTERM: a clean stop releases the Lease
    stopped = time.monotonic()
    wait_until(
        "the other server takes the Lease",
        lambda: str(_lease(plane)["spec"].get("holderIdentity", "")).startswith(f"serve-{other}_"),
        seconds=LEASE_SECONDS + 5,
    )
    took = time.monotonic() - stopped
    assert took <= LEASE_SECONDS + 2.5, took  # one retry period (2 s) of slack
    wait_until(
        "the new leader writes caBundle back",
        lambda: all(
            h["clientConfig"].get("caBundle") == cluster.ca_b64
            for h in _configs(plane)[0]["webhooks"]
        ),
        seconds=10,
    )


_CAN_I_ROW = re.compile(r"^(\S*)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$")


def _can_i(
    plane: kapi.ControlPlane, namespace: str, user: str
) -> list[tuple[str, str, str, set[str]]]:
    """``kubectl auth can-i --list`` as ``user``: (resource, non-resource URLs, resource
    names, verbs) per row."""
    out = plane.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", namespace).stdout
    rows = []
    for line in out.splitlines()[1:]:
        m = _CAN_I_ROW.match(line)
        assert m, f"unexpected can-i row: {line!r}"
        rows.append((m[1], m[2], m[3], set(m[4].split())))
    return rows


_DOC_ROW = re.compile(
    r"^\| `([a-z0-9.-]+(?:/status)?)`(?: `\[([a-z-]+)\]`)?(?:, `([a-z0-9.-]+)`)?[^|]* \| ([a-z, ]+) \|"
)


def _justified() -> dict[tuple[str, str], set[str]]:
    """docs/install.md's RBAC table: (resource, resource name) -> verbs."""
    text = (kapi.ROOT / "docs" / "install.md").read_text()
    table = text[text.index("**Every right, row by row.**") :]
    out: dict[tuple[str, str], set[str]] = {}
    for line in table.splitlines():
        m = _DOC_ROW.match(line)
        if m:
            verbs = {v.strip() for v in m[4].split(",")}
            for resource in filter(None, (m[1], m[3])):
                out[(resource, m[2] or "")] = verbs
    return out


def _catalog_resources() -> set[str]:
    from webhook.admission.manifests import default_plural
    from webhook.admission.registry import load_registry

    return {
        f"{default_plural(k)}.{k.group}" if k.group else default_plural(k)
        for k in load_registry().kinds()
    }


def test_the_service_account_can_do_only_what_install_md_justifies(cluster: Cluster) -> None:
    plane = cluster.plane
    plane.kubectl("create", "serviceaccount", "nobody", "-n", "karta-system", check=False)
    everyone = {
        (r, urls, names, frozenset(v))
        for r, urls, names, v in _can_i(
            plane, "karta-system", "system:serviceaccount:karta-system:nobody"
        )
    }
    rows = [
        (r, names, verbs)
        for r, urls, names, verbs in _can_i(plane, "karta-system", SA)
        if (r, urls, names, frozenset(verbs)) not in everyone
    ]
    justified = _justified()
    assert len(justified) >= 8, justified  # the table was read
    catalog = _catalog_resources()
    unjustified = []
    for resource, names, verbs in rows:
        allowed = justified.get((resource, names))
        if allowed is None and resource in catalog:
            allowed = {"get", "list"}  # live samples; the gang's owner walk
        if allowed is None or not verbs <= allowed:
            unjustified.append((resource, names, sorted(verbs)))
    assert not unjustified, f"granted but not in docs/install.md's table: {unjustified}"
    granted = {(r, n) for r, n, _ in rows}
    assert set(justified) <= granted, set(justified) - granted  # and the table is not stale
    assert {r for r, _, _ in rows if r in catalog} == catalog
