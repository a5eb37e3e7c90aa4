"""What the API server does when the webhook fails: down with ``failurePolicy: Ignore``, a
policy that cannot be applied under ``failureMode: closed``, a definition slower than the
webhook's ``timeoutSeconds``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kapi
import pytest
import yaml
from helpers import TRAINER_KARTA_YAML
from hooks import configurations, register, start_webhook, unregister, wait_until

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    },
}
KAI = """\
failureMode: {mode}
rules:
- name: kai
  schedulerName: kai-scheduler
  labels: {{kai.scheduler/queue: research}}
"""


def _deployment(name: str, namespace: str) -> dict[str, Any]:
    d = json.loads(json.dumps(DEPLOYMENT))
    d["metadata"] = {"name": name, "namespace": namespace}
    return dict(d)


def _scheduler(stored: dict[str, Any]) -> str:
    return str(stored["spec"]["template"]["spec"]["schedulerName"])


def test_webhook_down_with_failure_policy_ignore_admits_unmutated(
    plane: kapi.ControlPlane, tmp_path: Path, ns: str
) -> None:
    hook = start_webhook(tmp_path / "serve", KAI.format(mode="open"), ["--no-kube"])
    try:
        register(plane, configurations(hook, failure_policy="Ignore"))
        wait_until(
            "the webhook stamps a dry-run Deployment",
            lambda: _dry_run(plane, ns, "probe") == "kai-scheduler",
        )
        hook.stop()  # the webhook is down; its registration stays
        plane.apply([_deployment("while-down", ns)])
        stored = plane.get_json("deployment", "while-down", "-n", ns)
        assert _scheduler(stored) == "default-scheduler"
        assert "kai.scheduler/queue" not in stored["spec"]["template"]["metadata"]["labels"]
    finally:
        unregister(plane)
        hook.stop()


def test_webhook_down_with_failure_policy_fail_refuses(
    plane: kapi.ControlPlane, tmp_path: Path, ns: str
) -> None:
    hook = start_webhook(tmp_path / "serve", KAI.format(mode="open"), ["--no-kube"])
    try:
        register(plane, configurations(hook, failure_policy="Fail"))
        wait_until("registered", lambda: _dry_run(plane, ns, "probe") == "kai-scheduler")
        hook.stop()
        out = plane.kubectl(
            "apply", "-f", "-", input=yaml.safe_dump(_deployment("refused", ns)), check=False
        )
        assert out.returncode != 0
        assert 'failed calling webhook "workloads.karta-webhook.run.ai"' in out.stderr
    finally:
        unregister(plane)
        hook.stop()


def _dry_run(plane: kapi.ControlPlane, ns: str, name: str) -> str | None:
    status, body = plane.request(
        "POST",
        f"/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All",
        _deployment(name, ns),
    )
    return _scheduler(body) if status == 201 else None


UNWRITABLE_KARTA = TRAINER_KARTA_YAML


def _trainer(name: str, namespace: str, template: Any) -> dict[str, Any]:
    return {
        "apiVersion": "training.example.com/v1",
        "kind": "Trainer",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"groups": [{"name": "main", "replicas": 1, "template": template}]},
    }


@pytest.fixture
def trainer_crd(plane: kapi.ControlPlane) -> str:
    crd = kapi.ROOT / "tests" / "crds" / "outside-catalog" / "training.example.com_trainers.yaml"
    plane.kubectl("apply", "-f", str(crd))
    plane.wait_established("trainers.training.example.com")
    return "trainers.training.example.com"


def test_failure_mode_closed_denies_what_it_cannot_stamp(
    plane: kapi.ControlPlane, tmp_path: Path, ns: str, trainer_crd: str
) -> None:
    """A template whose metadata is not an object cannot take the labels: under
    ``failureMode: closed`` the create is denied, and kubectl prints why."""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "trainer.yaml").write_text(UNWRITABLE_KARTA)
    hook = start_webhook(
        tmp_path / "serve", KAI.format(mode="closed"), ["--no-kube", f"--catalog={catalog}"]
    )
    try:
        register(plane, _with_rule(configurations(hook), "training.example.com", "trainers"))
        good = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        wait_until(
            "the webhook stamps a dry-run Trainer",
            lambda: _trainer_scheduler(plane, ns, good) == "kai-scheduler",
        )
        bad = {"metadata": "not-an-object", **good}
        out = plane.kubectl(
            "create", "-f", "-", input=yaml.safe_dump(_trainer("bad", ns, bad)), check=False
        )
        assert out.returncode != 0
        assert 'admission webhook "workloads.karta-webhook.run.ai" denied the request' in (
            out.stderr
        )
        assert "Trainer" in out.stderr and "bad" in out.stderr, out.stderr
        assert "Forbidden" in out.stderr  # the status code we send, 403
        # Fully qualified: another test installs a second kind named Trainer.
        got = plane.kubectl("get", "trainers.training.example.com", "bad", "-n", ns, check=False)
        assert got.returncode != 0 and "NotFound" in got.stderr, got.stderr
    finally:
        unregister(plane)
        hook.stop()


def _with_rule(docs: list[dict[str, Any]], group: str, resource: str) -> list[dict[str, Any]]:
    """The generated configuration plus a rule for a kind outside the catalog (the server's
    keeper adds it in cluster mode; offline, ``manifests`` knows the bundled catalog only)."""
    for hook in docs[0]["webhooks"]:
        if hook["name"].startswith("workloads."):
            hook["rules"].append(
                {
                    "apiGroups": [group],
                    "apiVersions": ["v1"],
                    "resources": [resource],
                    "operations": ["CREATE"],
                    "scope": "Namespaced",
                }
            )
    return docs


def _trainer_scheduler(plane: kapi.ControlPlane, ns: str, template: Any) -> str | None:
    status, body = plane.request(
        "POST",
        f"/apis/training.example.com/v1/namespaces/{ns}/trainers?dryRun=All",
        _trainer("probe", ns, template),
    )
    if status != 201:
        return None
    return str(body["spec"]["groups"][0]["template"]["spec"].get("schedulerName"))


SLOW_KARTA = UNWRITABLE_KARTA.replace(
    "podTemplateSpecPath: .spec.groups[].template",
    "podTemplateSpecPath: 'def spin: spin; .spec.groups[] | select(spin) | .template'",
)


def test_a_definition_whose_write_path_never_ends_never_reaches_admission(
    plane: kapi.ControlPlane, tmp_path: Path, ns: str, trainer_crd: str
) -> None:
    """A write path that never ends (``def spin: spin``) is refused when the ``--catalog``
    folder loads, by the checks ``/validate`` applies (one rulebook for every source): the
    server names it and serves the rest, and a Trainer is admitted at once, untouched and
    without a warning. (What a write path that fails at run time gets, ``failureMode``'s
    promise, is held in tests/admission/test_hostile_inputs.py; the deadline cuts it at 2 s.)"""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "trainer.yaml").write_text(SLOW_KARTA)
    hook = start_webhook(
        tmp_path / "serve", KAI.format(mode="closed"), ["--no-kube", f"--catalog={catalog}"]
    )
    good = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    try:
        register(plane, _with_rule(configurations(hook), "training.example.com", "trainers"))

        def called() -> bool:
            plane.kubectl(
                "create", "--dry-run=server", "-f", "-", check=False,
                input=yaml.safe_dump(_trainer("probe", ns, good)),
            )  # fmt: skip
            return '"kind":"Trainer"' in hook.log_text()

        wait_until("the webhook is called for Trainers", called, seconds=60)
        log = hook.log_text()
        assert "trainer.yaml" in log and "podTemplateSpecPath" in log, log[-2000:]
        out = plane.kubectl(
            "create", "-f", "-", input=yaml.safe_dump(_trainer("slow", ns, good)), check=False
        )
        assert out.returncode == 0 and "Warning:" not in out.stderr, out.stderr
        stored = plane.kubectl(
            "get", "trainers.training.example.com", "slow", "-n", ns, "-o", "json", check=False
        )  # fully qualified: another test installs a second kind named Trainer
        tmpl = json.loads(stored.stdout)["spec"]["groups"][0]["template"]
        assert "schedulerName" not in tmpl["spec"]
    finally:
        unregister(plane)
        hook.stop()
