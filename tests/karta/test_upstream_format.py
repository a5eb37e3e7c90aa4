"""What upstream's newest Karta format added (issue 28 item 3): ``componentTypeSelector``
with ``matchLabels``, the proposed ``pending`` and ``progressing`` status categories, and
categories this version does not know, read with a warning instead of a refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ENGINE
from test_validation import SAMPLES, base, child, errors_at, root, run

from webhook.cli.console import EXIT_OK
from webhook.cli.livedescribe_pods import type_selected
from webhook.cli.main import main
from webhook.karta.loading import load_definition
from webhook.karta.model import parse
from webhook.karta.statusmodel import StatusDefinition
from webhook.workload import phase as status

SELECTOR = "spec.structureDefinition.childComponents[0].podSelector.componentTypeSelector"


def with_selector(selector: dict[str, Any]) -> dict[str, Any]:
    d = base()
    child(d)["podSelector"]["componentTypeSelector"] = selector
    return d


# --------------------------------------------------------------------------- matchLabels


def test_match_labels_without_key_path_is_admitted(tmp_path: Path, capsys: Any) -> None:
    """Upstream's newest Milvus selects Pulsar pods by two labels and no keyPath; we used to
    refuse that with "keyPath: required field is missing"."""
    d = with_selector({"matchLabels": {"app": "pulsar", "component": "proxy"}})
    report = run(d)
    assert report.ok, [str(e) for e in report.errors]
    karta = load_definition(d, "k.yaml")
    assert karta.children[0].type_labels == {"app": "pulsar", "component": "proxy"}
    f = tmp_path / "k.yaml"
    f.write_text(yaml.safe_dump(d))
    samples = tmp_path / "samples" / "jobset"
    samples.mkdir(parents=True)
    (samples / "train.yaml").write_text(yaml.safe_dump(SAMPLES[0][1]))
    code = main(["validate", "-f", str(f), "--samples", str(samples.parent)])
    assert code == EXIT_OK, capsys.readouterr().out
    assert capsys.readouterr().out.startswith("OK jobset ")


def test_match_labels_values_read_as_yaml_scalars() -> None:
    d = with_selector({"matchLabels": {"tier": 1, "gpu": True}})
    assert parse(d).children[0].type_labels == {"tier": "1", "gpu": "true"}


@pytest.mark.parametrize(
    ("selector", "field", "fragment"),
    [
        ({}, SELECTOR, "at least one of keyPath or matchLabels must be set"),
        ({"value": "x"}, f"{SELECTOR}.value", "value requires keyPath"),
        ({"matchLabels": {}}, f"{SELECTOR}.matchLabels", "must have at least one label"),
        ({"matchLabels": {"bad key!": "x"}}, f"{SELECTOR}.matchLabels.bad key!", "label key"),
        ({"matchLabels": {"app": "not valid"}}, f"{SELECTOR}.matchLabels.app", "label value"),
        ({"matchLabels": {"app": None}}, f"{SELECTOR}.matchLabels.app", "got null"),
        ({"matchLabels": ["app"]}, f"{SELECTOR}.matchLabels", "must be an object"),
    ],
    ids=["empty", "value-alone", "no-labels", "bad-key", "bad-value", "null-value", "a-list"],
)
def test_type_selector_rules_at_their_field(
    selector: dict[str, Any], field: str, fragment: str
) -> None:
    report = run(with_selector(selector))
    assert not report.ok
    assert any(fragment in m for m in errors_at(report, field)), [str(e) for e in report.errors]


def test_key_path_and_match_labels_are_anded() -> None:
    d = with_selector(
        {
            "keyPath": '.metadata.labels["component"]',
            "value": "proxy",
            "matchLabels": {"app": "pulsar"},
        }
    )
    comp = load_definition(d, "k.yaml").children[0]

    def selected(labels: dict[str, str]) -> bool:
        return type_selected(
            comp,
            labels,
            lambda expr: ENGINE.values(expr, {"metadata": {"labels": labels}}).items[0],
        )

    assert selected({"app": "pulsar", "component": "proxy"})
    assert not selected({"app": "milvus", "component": "proxy"})  # Milvus's own proxy
    assert not selected({"app": "pulsar", "component": "broker"})
    only_labels = load_definition(with_selector({"matchLabels": {"app": "pulsar"}}), "k").children[
        0
    ]
    assert type_selected(only_labels, {"app": "pulsar", "x": "y"}, lambda _: None)
    assert not type_selected(only_labels, {}, lambda _: None)
    no_selector = load_definition(base(), "k").root
    assert not type_selected(no_selector, {"app": "pulsar"}, lambda _: "anything")


# --------------------------------------------------------------------------- status categories


def _category(sd: StatusDefinition, obj: dict[str, Any]) -> str:
    return status.category(
        sd,
        ENGINE.values(".status.phase", obj),
        ENGINE.values("(.status.conditions // [])", obj),
        lambda e: ENGINE.values(e, obj),
        [],
    )


def test_pending_and_progressing_are_categories() -> None:
    d = base()
    mappings = root(d)["statusDefinition"]["statusMappings"]
    mappings["pending"] = [{"byPhase": "Queued"}]
    mappings["progressing"] = [{"byConditions": [{"type": "Progressing", "status": "True"}]}]
    mappings["initializing"] = [{"byPhase": "Queued"}]
    report = run(d)
    assert report.ok and not any("statusMappings" in w for w in report.warnings), report
    sd = load_definition(d, "k").root.status
    assert sd is not None
    assert _category(sd, {"status": {"phase": "Queued"}}) == "Pending"  # before initializing
    progressing = {
        "status": {"phase": "Queued", "conditions": [{"type": "Progressing", "status": "True"}]}
    }
    assert _category(sd, progressing) == "Progressing"  # the more specific of the two
    assert _category(sd, {"status": {"phase": "Running"}}) == "Running"


def test_unknown_category_is_read_with_a_warning() -> None:
    d = base()
    root(d)["statusDefinition"]["statusMappings"]["queued"] = [{"byPhase": "Queued"}]
    report = run(d)
    assert report.ok, [str(e) for e in report.errors]
    where = "spec.structureDefinition.rootComponent.statusDefinition.statusMappings.queued"
    assert any(w.startswith(where) and "unknown status category" in w for w in report.warnings)
    sd = load_definition(d, "k").root.status
    assert sd is not None and sd.unknown == ("queued",)
    assert _category(sd, {"status": {"phase": "Queued"}}) == "Undefined"  # never matched


def test_match_labels_is_warned_as_beyond_upstreams_pinned_crd(tmp_path: Path, capsys: Any) -> None:
    """Issue 34 item 4: matchLabels is not in the CRD of the upstream version KAI pins; validate
    says so at the field, and still admits the definition."""
    report = run(with_selector({"keyPath": ".metadata.labels.app", "matchLabels": {"a": "b"}}))
    assert report.ok, [str(e) for e in report.errors]
    field = f"{SELECTOR}.matchLabels"
    [warning] = [w for w in report.warnings if "upstream" in w]
    assert warning.startswith(f"{field}: not in the Karta CRD of upstream's ")
    assert "github.com/run-ai/karta v0.1.1-0.20260708043952-998140308a96" in warning
    assert not any("upstream" in w for w in run(base()).warnings)  # keyPath alone: no warning
    f = tmp_path / "k.yaml"
    f.write_text(yaml.safe_dump(with_selector({"matchLabels": {"app": "pulsar"}})))
    samples = tmp_path / "samples" / "jobset"
    samples.mkdir(parents=True)
    (samples / "train.yaml").write_text(yaml.safe_dump(SAMPLES[0][1]))
    assert main(["validate", "-f", str(f), "--samples", str(samples.parent)]) == EXIT_OK
    assert f"warning: {field}: not in the Karta CRD" in capsys.readouterr().out
