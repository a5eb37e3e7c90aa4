"""Our syntax rules (``webhook.base.names``) against the API server's own validation: for each
label key and label value, the policy check refuses it exactly when the API server refuses a
Pod that carries it (a server-side dry run). A value we let through that the API server
refuses would make the whole create fail, whatever the failure policy."""

from __future__ import annotations

from typing import Any

import kapi
import pytest

from webhook.base.names import label_value_errors, qualified_name_errors, scheduler_name_errors

KEYS = [
    "queue", "kai.scheduler/queue", "a/b/c", "/queue", "queue/", "Kai.Scheduler/queue",
    "kai.scheduler/Queue", "q" * 63, "q" * 64, "p" * 253 + "/q", "p" * 254 + "/q",
    "queue\n", "kai.scheduler\n/queue", "-queue", "queue-", "que_ue", "que.ue", "qu eue",
    "ünïcode", "a..b/q", "a-.b/q", "a.b-/q", "", "1/2",
]  # fmt: skip
VALUES = [
    "research", "", "trainer\n", "\ntrainer", "Research_1.x-y", "-x", "x-", "_x", "x.",
    "v" * 63, "v" * 64, "a b", "a/b", "ünïcode", "a:b", "0", "a\tb",
]  # fmt: skip
SCHEDULERS = [
    "kai-scheduler", "kai.scheduler", "Kai", "kai_scheduler", "kai\n", "-kai", "kai-",
    "a" * 253, "a" * 254, "a." * 10 + "b", "a..b", "kai scheduler",
]  # fmt: skip


def _pod(ns: str, labels: dict[str, str] | None = None, scheduler: str | None = None) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "syntax", "namespace": ns, "labels": labels or {}},
        "spec": spec,
    }


def _api_accepts(plane: kapi.ControlPlane, ns: str, pod: Any) -> bool:
    status, body = plane.request("POST", f"/api/v1/namespaces/{ns}/pods?dryRun=All", pod)
    assert status in (201, 422), (status, body)  # accepted, or refused as Invalid
    return status == 201


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_label_keys(plane: kapi.ControlPlane, ns: str, key: str) -> None:
    ours = not qualified_name_errors(key)
    assert ours == _api_accepts(plane, ns, _pod(ns, {key: "v"})), key


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_label_values(plane: kapi.ControlPlane, ns: str, value: str) -> None:
    ours = not label_value_errors(value)
    assert ours == _api_accepts(plane, ns, _pod(ns, {"k": value})), value


@pytest.mark.parametrize("name", SCHEDULERS, ids=repr)
def test_scheduler_names(plane: kapi.ControlPlane, ns: str, name: str) -> None:
    """The API server (1.37) takes any schedulerName: pod validation does not check it. Ours
    is stricter on purpose (a DNS subdomain, so "kai\n" or "Kai" is caught when the policy
    loads, not as pods no scheduler ever picks up): what we accept, it accepts."""
    assert _api_accepts(plane, ns, _pod(ns, scheduler=name)), name
    if name in ("kai-scheduler", "kai.scheduler", "a" * 253, "a." * 10 + "b"):
        assert not scheduler_name_errors(name)
    else:
        assert scheduler_name_errors(name), name
