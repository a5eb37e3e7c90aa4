"""Inputs an attacker (or an unlucky user) would send, one test each: the mutation is never
silently switched off, and every problem is a field error, a 4xx or exit 2 with a message that
names the file and the problem, never a traceback, a 5xx or a hang.

Hostile *clients* (slow, silent, half-handshaken connections) are driven against a real server
in ``tests/e2e``; the time they cost is measured by ``bench/``, never asserted here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import (
    ENGINE,
    JOBSET_KARTA,
    JOBSET_SAMPLE,
    REGISTRY,
    load,
    patch_of,
    policy,
    review,
    sample,
)
from prometheus_client import REGISTRY as METRICS

from webhook.admission import handlers
from webhook.admission import review as admission
from webhook.admission.registry import Registry
from webhook.admission.state import State
from webhook.base import jsontext
from webhook.base.errors import DefinitionError
from webhook.base.gvk import GVK
from webhook.base.limits import MAX_EXPRESSION_BYTES, MAX_JSON_DEPTH, YAML_MAX_DEPTH
from webhook.cli.console import EXIT_FINDING, EXIT_INPUT
from webhook.cli.main import main
from webhook.jq.syntax import screen
from webhook.karta.loading import load_definition
from webhook.karta.samples import SampleIndex
from webhook.mutation.policyfile import parse_policy
from webhook.server import app as server
from webhook.server import metrics
from webhook.validation.check import check

KAI = {"schedulerName": "kai-scheduler", "labels": {"kai.scheduler/queue": "research"}}


def _mutate(obj: Any, pol: Any, registry: Registry = REGISTRY) -> handlers.Result:
    req = admission.decode(json.dumps(review(obj)).encode())
    return handlers.mutate(req, registry, pol, ENGINE)


def _nest(depth: int, leaf: Any = 1) -> Any:
    out = leaf
    for _ in range(depth):
        out = {"k": out}
    return out


# --------------------------------------------------------------------------- no silent bypass


def test_three_thousand_replicated_jobs_are_all_mutated() -> None:
    obj = sample(*JOBSET_SAMPLE)
    job = obj["spec"]["replicatedJobs"][-1]
    obj["spec"]["replicatedJobs"] = [{**copy.deepcopy(job), "name": f"w{i}"} for i in range(3000)]
    r = _mutate(obj, policy(**KAI))
    assert r.failure is None and r.response.allowed
    ops = r.response.patch or []
    written = {op["path"].split("/")[3] for op in ops if op["path"].endswith("schedulerName")}
    assert written == {str(i) for i in range(3000)}
    assert r.response.audit["mutated-templates"] == "3000"


def test_a_five_thousand_deep_free_form_field_does_not_stop_the_mutation() -> None:
    """DynamoGraphDeployment's instance ids need libjq (the sandbox): the object goes there too,
    its deep part cut where libjq could not parse it, and the templates are still written."""
    obj = sample("nvidia.com-dynamographdeployment-v1alpha1", "agg.yaml")
    name, service = next(iter(obj["spec"]["services"].items()))
    service["annotations"] = {"deep": "x"}
    service["extraPodSpec"]["mainContainer"]["env"] = [{"name": "X", "value": "1"}]
    service["config"] = _nest(5000)
    body = jsontext.dumps(review(obj))  # as deep as the API server sends; orjson stops at 1,024
    req = admission.decode(body)
    r = handlers.mutate(req, REGISTRY, policy(**KAI), ENGINE)
    assert r.failure is None, r.response.warnings
    paths = {op["path"] for op in r.response.patch or []}
    assert f"/spec/services/{name}/extraPodSpec/schedulerName" in paths


def test_deeper_than_the_api_server_accepts_is_a_400_saying_so() -> None:
    client = server.create_app(State([]), engine=ENGINE).test_client()
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "x": None}
    text = json.dumps(review(obj)).replace(
        '"x": null', '"x": ' + "[" * (MAX_JSON_DEPTH + 50) + "]" * (MAX_JSON_DEPTH + 50)
    )
    r = client.post("/mutate", data=text, content_type="application/json")
    assert r.status_code == 400
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in r.get_data(as_text=True)


def _regex_karta() -> Any:
    """A definition whose template path runs a regex that backtracks without end on a crafted
    name: libjq gives up with Oniguruma's retry limit."""
    root = {
        "name": "batch",
        "kind": {"group": "example.com", "version": "v1", "kind": "Batch"},
        "statusDefinition": {},
        "specDefinition": {
            "podTemplateSpecPath": '.spec.jobs[] | select(.name | test("^(a+)+$") | not) | .template'
        },
    }
    doc = {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "batch"},
        "spec": {"structureDefinition": {"rootComponent": root}},
    }
    return load_definition(doc, "regex.yaml")


def _crafted_batch() -> dict[str, Any]:
    tmpl = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
    return {
        "apiVersion": "example.com/v1",
        "kind": "Batch",
        "metadata": {"name": "b", "namespace": "research"},
        "spec": {"jobs": [{"name": "a" * 30 + "!", "template": tmpl}]},
    }


def _failures(kind: str, reason: str) -> float:
    labels = {"kind": kind, "reason": reason}
    metrics.flush()
    return METRICS.get_sample_value("karta_webhook_mutation_failures_total", labels) or 0.0


def test_failure_mode_closed_denies_what_cannot_be_mutated() -> None:
    registry = Registry([_regex_karta()])
    closed = parse_policy({"failureMode": "closed", "rules": [{"name": "kai", **KAI}]})
    r = _mutate(_crafted_batch(), closed, registry)
    resp = r.response
    assert resp.allowed is False and resp.code == 403 and r.failure == "evaluation"
    assert resp.message is not None
    for needle in ("Batch research/b", "definition batch", "retry-limit", "failureMode is closed"):
        assert needle in resp.message


def test_failure_mode_open_allows_with_a_warning_and_a_metric() -> None:
    registry = Registry([_regex_karta()])
    state = State(bundled=False)
    state.snapshot = state.snapshot.__class__(
        registry, parse_policy({"rules": [{"name": "kai", **KAI}]})
    )
    client = server.create_app(state, engine=ENGINE).test_client()
    before = _failures("Batch", "evaluation")
    out = client.post("/mutate", json=review(_crafted_batch(), resource="batches")).get_json()
    r = out["response"]
    assert r["allowed"] is True and patch_of(r) == []
    assert any("retry-limit" in w for w in r["warnings"])
    assert r["auditAnnotations"]["mutation-failure"] == "evaluation"
    assert _failures("Batch", "evaluation") == before + 1


def test_failure_mode_is_checked_when_the_policy_loads() -> None:
    from webhook.mutation.policyfile import PolicyError

    with pytest.raises(PolicyError) as e:
        parse_policy({"failureMode": "sometimes", "rules": []})
    assert "failureMode: 'sometimes' is not one of open, closed" in str(e.value)


def test_a_value_the_api_server_would_reject_is_a_failure_too() -> None:
    obj = sample(*JOBSET_SAMPLE)
    obj["metadata"]["name"] = "x" * 70
    closed = parse_policy(
        {"failureMode": "closed", "rules": [{"name": "r", "labels": {"o": "$(workload.name)"}}]}
    )
    r = _mutate(obj, closed)
    assert r.response.allowed is False and r.failure == "invalid_value"


# --------------------------------------------------------------------------- hostile definitions


def test_nested_string_interpolations_are_a_field_error_not_a_recursion_error() -> None:
    expr = '"' + '\\("' * 600 + ")" * 0 + '"' + '")' * 600 + '"'
    [reason] = screen(expr)
    assert "string interpolations nested more than" in reason
    doc = load(JOBSET_KARTA)
    doc["spec"]["structureDefinition"]["rootComponent"]["instanceIdPath"] = expr
    with pytest.raises(DefinitionError) as e:
        load_definition(doc, "interp.yaml")
    assert "rootComponent.instanceIdPath: cannot tokenize: string interpolations" in str(e.value)


def test_huge_expressions_are_refused_before_they_are_read() -> None:
    [reason] = screen("#" * 3_000_000 + "\n.")
    assert reason == f"expression is 3000002 bytes long; at most {MAX_EXPRESSION_BYTES} are allowed"


def test_a_deep_expected_result_is_a_field_error_not_a_500() -> None:
    doc = load(JOBSET_KARTA)
    mappings = doc["spec"]["structureDefinition"]["rootComponent"]["statusDefinition"]
    mappings["statusMappings"]["running"] = [
        {"byExpression": {"expression": ".x", "expectedResult": _nest(990)}}
    ]
    report = check(doc, [], ENGINE)
    assert not report.ok
    [e] = report.errors
    assert e.path.endswith("statusMappings.running[0].byExpression.expectedResult")
    assert e.message == "must be a string, got an object"


def test_the_validation_budget_bounds_the_whole_check_and_names_what_was_left() -> None:
    """Endless expressions each just under their own timeout used to add up to many times the
    webhook's timeout and end allowed; within one budget they end denied, each field named."""
    doc = load(JOBSET_KARTA)
    root = doc["spec"]["structureDefinition"]["rootComponent"]
    busy = "def f: f; f"
    root["scaleDefinition"] = {
        "replicasPath": busy,
        "minReplicasPath": busy,
        "maxReplicasPath": busy,
    }
    samples = SampleIndex.load([Path("catalog/samples")]).for_gvk(
        GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
    )
    report = check(doc, samples, ENGINE, timeout=2.0, budget=1.0)
    assert not report.ok
    fields = {e.path.rsplit(".", 1)[-1] for e in report.errors}
    assert {"replicasPath", "minReplicasPath", "maxReplicasPath"} <= fields
    assert all("validation budget of 1s ran out" in e.message for e in report.errors)


def test_a_long_api_group_is_not_stamped_as_a_label() -> None:
    doc = load(JOBSET_KARTA)
    group = "a" * 40 + "." + "b" * 41  # 82 characters: a valid group, not a valid label value
    doc["spec"]["structureDefinition"]["rootComponent"]["kind"]["group"] = group
    doc["metadata"].pop("labels", None)
    ops, warnings = handlers.stamp_index_labels(doc)
    assert ops == [
        {
            "op": "add",
            "path": "/metadata/labels",
            "value": {"run.ai/karta-version": "v1alpha2", "run.ai/karta-kind": "JobSet"},
        }
    ]
    [w] = warnings
    assert "run.ai/karta-group" in w and "KAI Scheduler will not find" in w


def test_a_bad_catalog_file_is_reported_once_per_change(tmp_path: Path) -> None:
    good = tmp_path / "k.yaml"
    good.write_text(JOBSET_KARTA.read_text())
    state = State([tmp_path], bundled=False)
    doc = yaml.safe_load(JOBSET_KARTA.read_text())
    doc["spec"]["structureDefinition"]["rootComponent"]["instanceIdPath"] = '"\\(' * 600
    good.write_text(yaml.safe_dump(doc))
    import os

    os.utime(good, ns=(1, 1))
    first = state.reload_files()
    assert len(first) == 1 and "k.yaml" in first[0] and "cannot tokenize" in first[0]
    assert state.reload_status["catalog"][0] is False  # the reload gauge says so
    assert state.reload_files() == []  # not re-parsed until it changes again
    # One rulebook (issue 25 item 2): a definition that fails is not used (the others
    # would be); the rejection is on the snapshot, for the metrics.
    assert len(state.snapshot.registry) == 0
    assert list(state.snapshot.file_errors) == [str(good)]


def test_an_unparsable_cluster_karta_is_skipped() -> None:
    from webhook.cluster.kartasync import load_cluster_karta

    doc = load(JOBSET_KARTA)
    doc["spec"]["structureDefinition"]["rootComponent"]["instanceIdPath"] = '"\\(' * 600
    karta, errors = load_cluster_karta(doc, ENGINE)
    assert karta is None and any("cannot tokenize" in e for e in errors)


# --------------------------------------------------------------------------- hostile files


def _bomb() -> str:
    text = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    prev = "a"
    for name in "bcdefghi":
        text += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
        prev = name
    return text


def _deep_yaml() -> str:
    return "a:\n" + "".join("  " * (i + 1) + "b:\n" for i in range(1000)) + "  " * 1001 + "c: 1\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (_bomb(), "nodes with its aliases expanded"),
        (_deep_yaml(), f"nested deeper than {YAML_MAX_DEPTH} levels"),
        ("[" * 20_000 + "]" * 20_000, f"nested deeper than {MAX_JSON_DEPTH} levels"),
    ],
    ids=["alias-bomb", "deep-yaml", "deep-json"],
)
@pytest.mark.parametrize(
    "command",
    [
        ["mutate", "-f"],
        ["describe", "-f"],
        ["validate", "-f"],
        ["mutate", "-f", "{ok}", "--policy"],
    ],
    ids=["mutate", "describe", "validate", "policy"],
)
def test_hostile_files_are_exit_2_naming_the_file(
    tmp_path: Path, capsys: Any, text: str, problem: str, command: list[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    ok = tmp_path / "ok.yaml"
    ok.write_text(yaml.safe_dump(sample(*JOBSET_SAMPLE)))
    args = [a.replace("{ok}", str(ok)) for a in command] + [str(bad)]
    assert main(args) == EXIT_INPUT
    err = capsys.readouterr().err
    assert str(bad) in err and problem in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (_bomb(), "nodes with its aliases expanded"),
        (_deep_yaml(), f"nested deeper than {YAML_MAX_DEPTH} levels"),
        ("[" * 20_000 + "]" * 20_000, f"nested deeper than {MAX_JSON_DEPTH} levels"),
    ],
    ids=["alias-bomb", "deep-yaml", "deep-json"],
)
def test_hostile_catalog_files_are_rejected_naming_the_file(
    tmp_path: Path, text: str, problem: str
) -> None:
    """The server (``serve --catalog``) and the CLI's ``--catalog`` reject such a file and
    load the others (issue 28 item 3): the server's state, as ``serve`` builds it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    (tmp_path / "ok.yaml").write_text(JOBSET_KARTA.read_text())
    state = State([tmp_path], bundled=False)
    [(source, why)] = state.snapshot.file_errors.items()
    assert source == str(bad) and any(problem in w for w in why)
    assert len(state.snapshot.registry) == 1 and state.reload_status["catalog"][0] is False


def test_a_deep_json_workload_is_mutated_by_the_cli(tmp_path: Path, capsys: Any) -> None:
    obj = sample(*JOBSET_SAMPLE)
    obj["spec"]["extra"] = _nest(5000)
    f = tmp_path / "deep.json"
    f.write_bytes(jsontext.dumps(obj))
    pol = tmp_path / "policy.yaml"
    pol.write_text(yaml.safe_dump({"rules": [{"name": "kai", **KAI}]}))
    assert main(["mutate", "-f", str(f), "--policy", str(pol), "-o", "patch"]) == 0
    ops = json.loads(capsys.readouterr().out)
    assert sum(op["path"].endswith("/schedulerName") for op in ops) == 2


def test_an_invalid_karta_is_exit_1_not_2(tmp_path: Path, capsys: Any) -> None:
    doc = load(JOBSET_KARTA)
    doc["spec"]["structureDefinition"]["rootComponent"]["instanceIdPath"] = '"\\(' * 600
    f = tmp_path / "k.yaml"
    f.write_text(yaml.safe_dump(doc))
    assert main(["validate", "-f", str(f)]) == EXIT_FINDING
    out = capsys.readouterr().out
    assert out.startswith("INVALID ") and "cannot tokenize" in out
