"""Loading definitions (webhook.karta.model): the safety screen runs wherever one is loaded."""

from __future__ import annotations

import copy

import pytest

from webhook.base.documents import read_documents
from webhook.base.errors import DefinitionError
from webhook.karta.loading import catalog_dir, load_definition


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("env.HOME", "env"),
        ("$ENV.PATH", "$ENV"),
        ("input_filename", "input_filename"),
        ('"\\(env)"', "env"),
    ],
)
def test_definition_reading_the_environment_is_refused_at_load(expr: str, reason: str) -> None:
    doc = copy.deepcopy(next(iter(read_documents(catalog_dir() / "batch-job-v1.yaml")))[1])
    doc["spec"]["structureDefinition"]["rootComponent"]["scaleDefinition"]["replicasPath"] = expr
    with pytest.raises(DefinitionError) as e:
        load_definition(doc, "test.yaml")
    assert "spec.structureDefinition.rootComponent.scaleDefinition.replicasPath" in str(e.value)
    assert reason in str(e.value)
