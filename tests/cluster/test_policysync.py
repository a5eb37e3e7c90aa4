"""The Accepted condition of a policy object (issue 36 item 1): True when in force; False with
every error at its field path when it cannot be used; False when it is left out of the policy
in force past a bound together with the others (issue 39)."""

from __future__ import annotations

from webhook.cluster.policysync import Seen, accepted
from webhook.mutation.policyfile import PolicyError
from webhook.mutation.policyobject import parse_policy_object

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
