"""Label selectors in a rule's ``match`` (``namespaceSelector``, ``objectSelector``): Kubernetes'
``LabelSelector`` semantics, and every problem an error at its field path when the policy loads."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.base.errors import FieldError
from webhook.mutation.policyfile import PolicyError, parse_policy
from webhook.mutation.selectors import parse_selector


def _selector(value: Any) -> Any:
    errors: list[FieldError] = []
    got = parse_selector(value, "s", errors)
    assert not errors, errors
    return got


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ({}, {}, True),  # empty: everything, as the API server's
        ({"matchLabels": {"team": "a"}}, {"team": "a", "x": "y"}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
        ({"matchLabels": {"team": "a"}}, {}, False),
        ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["a", "b"]}]}, {"t": "b"}, True),
        ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["a"]}]}, {}, False),
        ({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]}, {"t": "a"}, False),
        # NotIn matches an object without the key, as in Kubernetes
        ({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"matchExpressions": [{"key": "t", "operator": "Exists"}]}, {"t": ""}, True),
        ({"matchExpressions": [{"key": "t", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, {}, True),
        ({"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, {"t": "a"}, False),
        (  # all ANDed
            {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]},
            {"a": "1"},
            False,
        ),
    ],
)  # fmt: skip
def test_label_selector_semantics(selector: Any, labels: dict[str, str], matches: bool) -> None:
    assert _selector(selector).matches(labels) is matches


@pytest.mark.parametrize(
    ("selector", "field", "message"),
    [
        ("team=a", "namespaceSelector", "must be a label selector"),
        ({"matchLabel": {}}, "namespaceSelector.matchLabel", "unknown field"),
        ({"matchLabels": {"bad key!": "a"}}, "namespaceSelector.matchLabels['bad key!']", "invalid key"),
        ({"matchLabels": {"t": "a b"}}, "namespaceSelector.matchLabels['t']", "invalid value"),
        ({"matchLabels": {"t": True}}, "namespaceSelector.matchLabels['t']", "quote it"),
        ({"matchExpressions": {"key": "t"}}, "namespaceSelector.matchExpressions", "must be a list"),
        ({"matchExpressions": [{"key": "t", "operator": "Equals", "values": ["a"]}]},
         "namespaceSelector.matchExpressions[0].operator", "'Equals' is not one of In, NotIn"),
        ({"matchExpressions": [{"key": "t"}]}, "namespaceSelector.matchExpressions[0].operator", "required"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "namespaceSelector.matchExpressions[0].key", "required"),
        ({"matchExpressions": [{"key": "t", "operator": "In"}]},
         "namespaceSelector.matchExpressions[0].values", "must be non-empty when the operator is In"),
        ({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": []}]},
         "namespaceSelector.matchExpressions[0].values", "must be non-empty"),
        ({"matchExpressions": [{"key": "t", "operator": "Exists", "values": ["a"]}]},
         "namespaceSelector.matchExpressions[0].values", "must be empty when the operator is Exists"),
        ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["a b"]}]},
         "namespaceSelector.matchExpressions[0].values[0]", "invalid value"),
        ({"matchExpressions": [{"key": "t", "operator": "In", "values": [1]}]},
         "namespaceSelector.matchExpressions[0].values", "list of strings"),
        ({"matchExpressions": [{"key": "t", "operator": "Exists", "value": "a"}]},
         "namespaceSelector.matchExpressions[0].value", "unknown field"),
    ],
)  # fmt: skip
def test_a_bad_selector_is_an_error_at_its_field_path_when_the_policy_loads(
    selector: Any, field: str, message: str
) -> None:
    for which in ("namespaceSelector", "objectSelector"):
        doc = {"rules": [{"name": "r", "match": {which: selector}, "labels": {"a": "b"}}]}
        with pytest.raises(PolicyError) as e:
            parse_policy(doc)
        where = f"rules[0] (r).match.{field.replace('namespaceSelector', which)}"
        assert any(err.path == where and message in err.message for err in e.value.errors), (
            e.value.errors
        )


def test_every_error_of_a_selector_at_once() -> None:
    doc = {
        "rules": [
            {
                "name": "r",
                "labels": {"a": "b"},
                "match": {
                    "namespaceSelector": {"matchLabels": {"t": "a b"}},
                    "objectSelector": {"matchExpressions": [{"key": "k", "operator": "Is"}]},
                },
            }
        ]
    }
    with pytest.raises(PolicyError) as e:
        parse_policy(doc)
    assert [err.path for err in e.value.errors] == [
        "rules[0] (r).match.namespaceSelector.matchLabels['t']",
        "rules[0] (r).match.objectSelector.matchExpressions[0].operator",
    ]


def test_a_selector_loads_into_the_rules_match() -> None:
    pol = parse_policy(
        {
            "rules": [
                {
                    "name": "r",
                    "labels": {"a": "b"},
                    "match": {"namespaceSelector": {"matchLabels": {"team": "x"}}},
                }
            ]
        }
    )
    m = pol.rules[0].match
    assert m.selective and m.object_selector is None
    assert m.namespace_selector is not None and m.namespace_selector.matches({"team": "x"})
