"""The Accepted condition of a policy object (issue 36 item 1): True when in force; False with
every error at its field path when it cannot be used; False when it is left out of the policy
in force past a bound together with the others (issue 39). Its writer keeps what it patched
and what failed by the policy's key, ``<namespace>/<name>`` for a KartaNamespacePolicy."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlparse

import pytest
from fakeapi import FakeAPI, status

from webhook.admission.state import State
from webhook.cluster.policysync import (
    GANG,
    PolicyStatus,
    Seen,
    accepted,
    gang_condition,
    shadows_in,
)
from webhook.mutation.policyfile import PolicyError
from webhook.mutation.policyobject import (
    GROUP,
    NAMESPACED_PLURAL,
    VERSION,
    parse_namespace_policy_object,
    parse_policy_object,
)

OBJ = {
    "apiVersion": "policies.karta-webhook.run.ai/v1alpha1",
    "kind": "KartaPolicy",
    "metadata": {"name": "p", "generation": 1},
    "spec": {"rules": [{"name": "q", "labels": {"a": "b"}}]},
}


def test_accepted_in_force_invalid_and_over_bounds() -> None:
    good = Seen(OBJ, parse_policy_object(OBJ))
    c = accepted(good)
    assert (c.status, c.reason, c.message) == (True, "Accepted", "in force: 1 rules")
    bad = {**OBJ, "spec": {"rules": [{"name": "q", "labels": {"a b": "x"}}]}}
    try:
        parse_policy_object(bad)
    except PolicyError as e:
        seen = Seen(bad, None, tuple(str(x) for x in e.errors))
    c = accepted(seen)
    assert c.status is False and c.reason == "Invalid"
    assert c.message.startswith("spec.rules[0] (q).labels['a b']: invalid key")
    c = accepted(good, ("rules[0] (q).labels: 300 labels ..., at most 256 in a policy",))
    assert c.status is False and c.reason == "OverBounds" and "at most 256" in c.message


# -- PolicyStatus's bookkeeping for KartaNamespacePolicies: one key, <namespace>/<name>

TEAMS = f"/apis/{GROUP}/{VERSION}/namespaces"
REFUSED = f'{NAMESPACED_PLURAL}.{GROUP} "p" is invalid: status.conditions[0].reason: Invalid'


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, Any]]:
    return [
        r.fields  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "fields", {}).get("event") == name
    ]


def team_policy(namespace: str, rv: str) -> Seen:
    obj = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "KartaNamespacePolicy",
        "metadata": {"name": "p", "namespace": namespace, "generation": 1, "resourceVersion": rv},
        "spec": {"rules": [{"name": "q", "labels": {"a": "b"}}]},
    }
    return Seen(obj, parse_namespace_policy_object(obj))


def serve_team_patches(
    fake: FakeAPI, monkeypatch: pytest.MonkeyPatch, refuse: set[str], prefix: str = TEAMS
) -> list[tuple[str, Any]]:
    """The fake API server answers a KartaNamespacePolicy's status PATCH: 422 for a namespace
    in ``refuse``, else 200 (the object is not changed: the watch has not brought it back
    yet). Returns the (path, body) of every such PATCH."""
    patched: list[tuple[str, Any]] = []
    real = fake.handle

    def handle(h: Any, method: str) -> None:
        path = urlparse(h.path).path
        if method != "PATCH" or not path.startswith(prefix + "/"):
            return real(h, method)
        body = h._body()
        patched.append((path, body))
        if len(path.split("/")) > 5 and path.split("/")[5] in refuse:
            return h._send(422, status(422, "Invalid", REFUSED))  # type: ignore[no-any-return]
        return h._send(200, body)  # type: ignore[no-any-return]

    monkeypatch.setattr(fake, "handle", handle)
    return patched


def test_a_team_policy_patched_from_its_version_is_not_patched_again(
    fake: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    patched = serve_team_patches(fake, monkeypatch, refuse=set())
    writer = PolicyStatus(fake.api(), namespaced=True, elector=None)
    writer.on_change({"team-a/p": team_policy("team-a", "7")})
    assert writer.reconcile() == 1
    for _ in range(3):  # our patch has not come back through the watch yet
        assert writer.reconcile() == 0
    assert len(patched) == 1, [p for p, _ in patched]
    path, body = patched[0]
    assert path == f"{TEAMS}/team-a/{NAMESPACED_PLURAL}/p/status"
    assert body["metadata"] == {"resourceVersion": "7"}
    assert [c["type"] for c in body["status"]["conditions"]] == ["Accepted"]


def test_same_named_team_policies_each_log_their_refused_write(
    fake: FakeAPI, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    refuse = {"team-a", "team-b"}
    patched = serve_team_patches(fake, monkeypatch, refuse)
    writer = PolicyStatus(fake.api(), namespaced=True, elector=None)
    writer.on_change(
        {"team-a/p": team_policy("team-a", "7"), "team-b/p": team_policy("team-b", "9")}
    )
    with caplog.at_level(logging.INFO, logger="karta_webhook.kube"):
        for _ in range(3):
            assert writer.reconcile() == 0
        refuse.clear()
        assert writer.reconcile() == 2
    error = f"HTTP 422: Unprocessable Entity: {REFUSED}"
    assert events(caplog, "policy.status-failed") == [
        {"event": "policy.status-failed", "name": "team-a/p", "error": error},
        {"event": "policy.status-failed", "name": "team-b/p", "error": error},
    ]
    assert writer.failed == {}
    assert len(patched) == 3 * 2 + 2


def test_a_team_policy_whose_key_a_cluster_policy_takes_says_which_rule_wins(
    fake: FakeAPI, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Issue 49 item 4: Shadowed=True naming the winning rule while a cluster policy sets the
    team's key in its namespace (the team's rule loses there), back to False when it goes."""
    patched = serve_team_patches(fake, monkeypatch, refuse=set())
    state = State(bundled=False)
    queues = {**OBJ, "metadata": {"name": "queues"}}
    queues["spec"] = {"rules": [{"name": "label-a", "match": {"namespaces": ["team-*"]},
                                 "labels": {"a": "cluster"}}]}  # fmt: skip
    writer = PolicyStatus(fake.api(), namespaced=True, elector=None, shadows=shadows_in(state))
    state.listeners.append(writer.policies_changed)

    def shadowed_condition(rv: str) -> dict[str, Any]:
        writer.on_change({"team-a/p": team_policy("team-a", rv)})
        assert writer.reconcile() == 1
        conds = {c["type"]: c for c in patched[-1][1]["status"]["conditions"]}
        assert conds["Accepted"]["status"] == "True"
        return conds["Shadowed"]

    got = shadowed_condition("1")
    assert (got["status"], got["reason"]) == ("False", "NotShadowed")
    state.set_policies([parse_policy_object(queues)])
    got = shadowed_condition("2")
    assert (got["status"], got["reason"]) == ("True", "ClusterPolicyWins")
    assert "rule 'queues/label-a'" in got["message"] and "labels['a']" in got["message"]
    state.set_policies([])  # the cluster policy goes: the team's rule is in force again
    got = shadowed_condition("3")
    assert got["status"] == "False"


GANG_OBJ = {**OBJ, "spec": {"rules": [{"name": "g", "match": {"kinds": ["Job"]}, "gang": "native"}]}}


def test_gang_scheduling_says_whether_the_cluster_serves_podgroups() -> None:
    """Issue 46 item 5: a policy with a gang rule says, in its status, whether the PodGroup API
    is served (what discovery saw); nothing before the first look; a policy without such a
    rule has no such condition, and one that lost its rule is told so."""
    gang = Seen(GANG_OBJ, parse_policy_object(GANG_OBJ))
    why = "the cluster does not serve scheduling.k8s.io/v1beta1 (...)"
    c = gang_condition(gang, [], (False, why))
    assert c is not None
    assert (c.type, c.status, c.reason, c.message) == (GANG, False, "PodGroupsNotServed", why)
    c = gang_condition(gang, [], (True, "served"))
    assert c is not None and (c.status, c.reason) == (True, "PodGroupsServed")
    assert gang_condition(gang, [], None) is None
    plain = Seen(OBJ, parse_policy_object(OBJ))
    assert gang_condition(plain, [], (False, why)) is None
    c = gang_condition(plain, [{"type": GANG, "status": "False"}], (False, why))
    assert c is not None and (c.status, c.reason) == (False, "NoGangRule")


def test_the_writer_adds_gang_scheduling_and_writes_again_when_discovery_changes(
    fake: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = f"/apis/{GROUP}/{VERSION}/kartapolicies"
    patched = serve_team_patches(fake, monkeypatch, refuse=set(), prefix=prefix)
    api: list[tuple[bool, str] | None] = [None]
    writer = PolicyStatus(fake.api(), elector=None, gang_api=lambda: api[0])

    def seen(rv: str) -> Seen:
        obj = {**GANG_OBJ, "metadata": {"name": "p", "generation": 1, "resourceVersion": rv}}
        return Seen(obj, parse_policy_object(obj))

    writer.on_change({"p": seen("1")})
    assert writer.reconcile() == 1
    assert patched[-1][0] == f"{prefix}/p/status"
    assert [c["type"] for c in patched[-1][1]["status"]["conditions"]] == ["Accepted"]
    api[0] = (False, "not served")
    writer.on_change({"p": seen("2")})
    writer.gang_api_changed()
    assert writer.reconcile() == 1
    conds = {c["type"]: c for c in patched[-1][1]["status"]["conditions"]}
    assert conds["Accepted"]["status"] == "True"
    assert (conds[GANG]["status"], conds[GANG]["reason"], conds[GANG]["message"]) == (
        "False", "PodGroupsNotServed", "not served",
    )  # fmt: skip
