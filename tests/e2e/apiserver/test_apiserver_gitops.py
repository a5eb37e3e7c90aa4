"""``serve --manage-webhooks=false`` against a real API server: the leader runs (Lease, Karta
status) but never writes the webhook configurations, as the API server's audit log and the
configurations' resourceVersions show."""

from __future__ import annotations

import json
import time
from pathlib import Path

import kapi
from hooks import configurations, register, start_webhook, unregister, wait_until
from test_apiserver_cluster import POLICY, TRAINER_CRD, TRAINER_KARTA, _conditions


def _versions(plane: kapi.ControlPlane) -> dict[str, str]:
    return {
        kind: plane.get_json(kind, "karta-webhook")["metadata"]["resourceVersion"]
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
    }


def test_manage_webhooks_false_never_writes_the_configurations(
    plane: kapi.ControlPlane, tmp_path: Path
) -> None:
    plane.kubectl("apply", "-f", str(TRAINER_CRD))
    plane.wait_established("trainers.training.example.com")
    started = time.time()
    hook = start_webhook(
        tmp_path / "serve",
        POLICY,
        [f"--kubeconfig={plane.kubeconfig}", "--manage-webhooks=false"],
        env={"POD_NAMESPACE": "default", "POD_NAME": "gitops"},
    )
    try:
        # Registered as GitOps would: with the CA, and the catalog's rules only.
        register(plane, configurations(hook))
        before = _versions(plane)
        assert "--manage-webhooks=false" in hook.log_text()
        # The leader is at work: a new Karta gets its conditions ...
        name = "gitops-trainer"
        plane.apply(TRAINER_KARTA.replace("example-trainer", name))
        wait_until(
            "the leader writes the new Karta's conditions",
            lambda: _conditions(plane, name).get("Ready") == "True",
            seconds=60,
        )
        lease = plane.get_json("lease", "karta-webhook-leader", "-n", "default")
        assert lease["spec"]["holderIdentity"].startswith("gitops_")
        # ... but the rules stay as GitOps wrote them: no trainers, no write at all.
        time.sleep(3)  # more than a keeper tick
        assert _versions(plane) == before
        mwc = plane.get_json("mutatingwebhookconfiguration", "karta-webhook")
        resources = {r for h in mwc["webhooks"] for rule in h["rules"] for r in rule["resources"]}
        assert "trainers" not in resources
        writes = []
        for line in (plane.dir / "audit.log").read_text().splitlines():
            e = json.loads(line)
            ref = e.get("objectRef") or {}
            if (
                ref.get("resource", "").endswith("webhookconfigurations")
                and e.get("verb") in ("update", "patch")
                and e.get("stage") == "ResponseComplete"
            ):
                writes.append((e["requestReceivedTimestamp"], e["user"]["username"]))
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started))
        assert not [w for w in writes if w[0] >= since], writes
        plane.kubectl("delete", "karta", name)
    finally:
        unregister(plane)
        hook.stop()
