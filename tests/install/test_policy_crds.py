"""The policy CRDs hold every rule field the policy reader takes, each with the schema of its
field table entry (issue 50 item 2): a field the table gains and a CRD lacks would be pruned
by the API server from every KartaPolicy without a word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.karta.fields import INJECTABLES
from webhook.mutation import policycrd, policyfile, policyobject

ROOT = Path(__file__).resolve().parents[2]


def rule_properties(name: str) -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / name).read_text())
    [version] = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return dict(spec["properties"]["rules"]["items"]["properties"])


@pytest.mark.parametrize("name", policycrd.FILES)
def test_each_injectable_has_its_tables_schema(name: str) -> None:
    props = rule_properties(name)
    assert {i.key: props.get(i.key) for i in INJECTABLES} == {i.key: i.schema for i in INJECTABLES}


@pytest.mark.parametrize("name", policycrd.FILES)
def test_the_crd_holds_every_rule_field_the_reader_takes(name: str) -> None:
    props = set(rule_properties(name))
    if "namespace" in name:
        assert props >= policyobject._NAMESPACED_RULE
        assert props <= policyfile._RULE_FIELDS
    else:
        assert props == policyfile._RULE_FIELDS


@pytest.mark.parametrize("name", policycrd.FILES)
def test_the_generated_block_is_up_to_date(name: str) -> None:
    """``python3 hack/policy-crds.py`` writes it anew."""
    text = (ROOT / name).read_text()
    assert policycrd.regenerate(text, name) == text


def test_the_values_schema_is_up_to_date() -> None:
    """``python3 hack/policy-crds.py`` writes its string and string-map rule fields too."""
    text = (ROOT / policycrd.VALUES_SCHEMA).read_text()
    assert policycrd.values_schema(text) == text


def test_a_file_without_the_block_is_named() -> None:
    with pytest.raises(ValueError, match=r"crd\.yaml: no one"):
        policycrd.regenerate("spec: {}\n", "crd.yaml")
