"""A definition's locator: compiled once, when the definition enters a registry, and a request's
object handed to it once.

* After a registry is made, mutating any sample compiles nothing (compiling raises here).
* A mutation evaluates its object once: one batch, walked together or evaluated one by one,
  and never a second time, unless a component resolved by its shared parent must be resolved
  in full (then its deferred requests, once).
* A locator of a definition that is made again (a reload that did not change the file) is
  compiled again; one kept by a registry snapshot made again from the same definitions is not.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from helpers import ENGINE, ROOT, SAMPLES, policy

from webhook.admission.handlers import mutate_with
from webhook.admission.registry import Registry, load_registry
from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.jq.engine import Engine
from webhook.karta.loading import load_definition
from webhook.workload import locator as locating
from webhook.workload.locator import locator

SAMPLE_OBJECTS = [
    (f"{path.parent.name}/{path.name}", obj)
    for path in sorted(SAMPLES.glob("*/*.yaml"))
    for _, obj in read_documents(path)
]
IDS = [n for n, _ in SAMPLE_OBJECTS]
MILVUS_BY_PARENT = ROOT / "tests" / "fixtures" / "milvus-by-parent.yaml"
REGISTRY = load_registry()  # every definition's mutation locator compiled here, as it enters
POLICY_DEMO = policy(
    schedulerName="kai-scheduler",
    labels={"kai.scheduler/queue": "research"},
    annotations={"example.com/owner": "$(workload.name)-$(instance)"},
)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each evaluation a locator makes: ``walked`` (the batch's paths walked together) when it
    gave items, ``evaluate`` for each batch the engine evaluated."""
    calls: list[str] = []
    walked = locating.walked
    evaluate = Engine.evaluate

    def walked_counted(prepared: Any, obj: Any) -> Any:
        items = walked(prepared, obj)
        if items is not None:
            calls.append("walked")
        return items

    def evaluate_counted(self: Engine, batch: Any, obj: Any, **kw: Any) -> Any:
        calls.append("evaluate")
        return evaluate(self, batch, obj, **kw)

    monkeypatch.setattr(locating, "walked", walked_counted)
    monkeypatch.setattr(Engine, "evaluate", evaluate_counted)
    yield calls


@pytest.mark.parametrize(("name", "obj"), SAMPLE_OBJECTS, ids=IDS)
def test_a_mutation_compiles_nothing_and_evaluates_its_object_once(
    name: str, obj: dict[str, Any], counted: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    karta = REGISTRY.lookup(GVK.of(obj))
    assert karta is not None

    def no_compile(*args: Any) -> Any:
        raise AssertionError("compiled on a request")

    monkeypatch.setattr(locating, "_compile", no_compile)
    monkeypatch.setattr(locating, "requests_of", no_compile)
    counted.clear()
    mutate_with(karta, POLICY_DEMO, obj, ENGINE)
    assert len(counted) == 1, counted


def test_a_component_resolved_in_full_evaluates_its_deferred_requests_once(
    counted: list[str],
) -> None:
    [(_, milvus)] = read_documents(SAMPLES / "milvus.io-milvus-v1beta1" / "cluster.yaml")
    assert isinstance(milvus, dict)
    # the shape resolved by a parent alone (the bundled Milvus takes the general path, issue 34)
    karta = load_definition(yaml.safe_load(MILVUS_BY_PARENT.read_text()), "milvus-by-parent")
    locator(karta)  # compiled before counting, as a registry does on load
    odd = copy.deepcopy(milvus)
    for name in ("proxy", "dataNode"):  # two components whose entry is not an object
        odd["spec"]["components"][name] = "in the way"
    counted.clear()
    plan = mutate_with(karta, POLICY_DEMO, odd, ENGINE)
    assert counted == ["walked", "evaluate"]  # the batch, then the deferred requests once
    assert plan.ops  # the others are still written
    for name in ("proxy", "datanode"):  # each is reported, as resolution in full says
        assert any(f"component {name!r}" in w for w in plan.warnings), plan.warnings
    counted.clear()
    mutate_with(karta, POLICY_DEMO, milvus, ENGINE)
    assert counted == ["walked"]


def test_locators_are_kept_with_their_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_registry()
    kartas = first.definitions()
    made: list[str] = []
    compile_ = locating._compile

    def compile_counted(karta: Any, full: bool) -> Any:
        made.append(karta.name)
        return compile_(karta, full)

    monkeypatch.setattr(locating, "_compile", compile_counted)
    again = Registry(kartas).merged([])
    assert made == []  # the same definitions: their locators are kept
    assert all(locator(k) is locator(again.lookup(k.gvk)) for k in kartas)  # type: ignore[arg-type]
    load_registry()  # the definitions read again are new objects: compiled as they enter
    assert sorted(made) == sorted(k.name for k in kartas)
