"""priorityClassName, nodeSelector and tolerations in the policy: checked when the policy
loads, written wherever a definition locates a whole template or pod spec, not applicable
where it does not (a failure that ``failureMode`` decides), left out where the definition says
its kind refuses them; minimal, polite and idempotent patches."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from helpers import ENGINE, JOBSET_SAMPLE, REGISTRY, apply, policy, review, sample

from webhook.admission.handlers import mutate, mutate_object, mutate_with
from webhook.admission.review import decode, encode
from webhook.karta import carry
from webhook.karta import model as definitions
from webhook.karta.carry import REFUSED_ANNOTATION
from webhook.karta.loading import catalog_dir
from webhook.mutation.plan import NOT_APPLICABLE
from webhook.mutation.policyfile import PolicyError, parse_policy

GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SIX = {
    "schedulerName": "kai-scheduler",
    "labels": {"kai.scheduler/queue": "research"},
    "annotations": {"example.com/owner": "$(workload.name)"},
    "priorityClassName": "train",
    "nodeSelector": {"nvidia.com/gpu.present": "true"},
    "tolerations": [GPU, {"key": "team", "value": "$(workload.namespace)", "effect": "NoExecute",
                          "tolerationSeconds": 60}],
}  # fmt: skip


def _templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [rj["template"]["spec"]["template"] for rj in obj["spec"]["replicatedJobs"]]


# --------------------------------------------------------------------------- checked at load


@pytest.mark.parametrize(
    ("rule", "field", "message"),
    [
        ({"priorityClassName": "Train_1"}, "priorityClassName", "DNS subdomain"),
        ({"nodeSelector": {"bad key!": "x"}}, "nodeSelector['bad key!']", "invalid key"),
        ({"nodeSelector": {"zone": "a b"}}, "nodeSelector['zone']", "invalid value"),
        ({"nodeSelector": {"zone": 3}}, "nodeSelector['zone']", "must be a string"),
        ({"tolerations": {"key": "a"}}, "tolerations", "must be a list"),
        ({"tolerations": ["a"]}, "tolerations[0]", "must be a map"),
        ({"tolerations": [{"key": "a", "operator": "In"}]}, "tolerations[0].operator", "'In'"),
        (
            {"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]},
            "tolerations[0].value",
            "must be empty when the operator is Exists",
        ),
        ({"tolerations": [{"value": "x"}]}, "tolerations[0].key", "required unless"),
        ({"tolerations": [{"key": "a b"}]}, "tolerations[0].key", "invalid key"),
        ({"tolerations": [{"key": "a", "value": "b c"}]}, "tolerations[0].value", "invalid"),
        ({"tolerations": [{"key": "a", "effect": "Never"}]}, "tolerations[0].effect", "'Never'"),
        (
            {"tolerations": [{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}]},
            "tolerations[0].tolerationSeconds",
            "only with effect NoExecute",
        ),
        (
            {"tolerations": [{"key": "a", "effect": "NoExecute", "tolerationSeconds": "5"}]},
            "tolerations[0].tolerationSeconds",
            "must be an integer",
        ),
        ({"tolerations": [{"key": "a", "seconds": 5}]}, "tolerations[0].seconds", "unknown"),
        ({"tolerations": [{"key": "a", "value": "$(nope)"}]}, "tolerations[0].value", "$(nope)"),
        ({"tolerations": [GPU, dict(GPU)]}, "tolerations[1]", "the same key, operator"),
    ],
)
def test_a_policy_field_the_api_server_would_refuse_is_an_error_at_load(
    rule: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy({"rules": [{"name": "r", **rule}]})
    # the field's error (and, when it was the rule's only field, that the rule sets nothing)
    [err] = [x for x in e.value.errors if x.path != "rules[0] (r)"]
    assert err.path == f"rules[0] (r).{field}" and message in err.message, str(err)


def test_the_six_fields_are_the_rule_fields_a_policy_can_set() -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy({"rules": [{"name": "r"}]})
    said = str(e.value)
    for key in SIX:
        assert key in said


# --------------------------------------------------------------------------- written


def test_every_field_lands_in_every_template_and_a_second_plan_is_empty() -> None:
    obj = sample(*JOBSET_SAMPLE)
    out, ops = apply(obj, policy(**SIX))
    for t in _templates(out):
        spec = t["spec"]
        assert spec["schedulerName"] == "kai-scheduler"
        assert spec["priorityClassName"] == "train"
        assert spec["nodeSelector"]["nvidia.com/gpu.present"] == "true"
        assert GPU in spec["tolerations"]
        team = {"key": "team", "value": obj["metadata"]["namespace"], "effect": "NoExecute",
                "tolerationSeconds": 60}  # fmt: skip
        assert team in spec["tolerations"]
        assert t["metadata"]["labels"]["kai.scheduler/queue"] == "research"
    assert all(op["op"] == "add" for op in ops)
    _, again = apply(out, policy(**SIX))
    assert again == []  # reinvocation: nothing to do


def test_node_selector_merges_by_key_and_keeps_a_key_unless_overwrite() -> None:
    obj = sample(*JOBSET_SAMPLE)
    _templates(obj)[0]["spec"]["nodeSelector"] = {"zone": "a", "disk": "ssd"}
    rule = {"nodeSelector": {"zone": "b", "gpu": "h100"}}
    out, _ = apply(obj, policy(**rule))
    t0, t1 = _templates(out)
    assert t0["spec"]["nodeSelector"] == {"zone": "a", "disk": "ssd", "gpu": "h100"}
    assert t1["spec"]["nodeSelector"] == {"zone": "b", "gpu": "h100"}
    out, _ = apply(obj, policy(overwrite=True, **rule))
    assert _templates(out)[0]["spec"]["nodeSelector"] == {"zone": "b", "disk": "ssd", "gpu": "h100"}


def test_priority_class_is_set_when_absent_and_replaced_only_with_overwrite() -> None:
    obj = sample(*JOBSET_SAMPLE)
    _templates(obj)[0]["spec"]["priorityClassName"] = "mine"
    out, _ = apply(obj, policy(priorityClassName="train"))
    assert [t["spec"]["priorityClassName"] for t in _templates(out)] == ["mine", "train"]
    out, _ = apply(obj, policy(priorityClassName="train", overwrite=True))
    assert [t["spec"]["priorityClassName"] for t in _templates(out)] == ["train", "train"]


def test_a_toleration_is_appended_unless_one_with_its_key_operator_and_effect_is_there() -> None:
    obj = sample(*JOBSET_SAMPLE)
    t0 = _templates(obj)[0]
    mine = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    other = {"key": "spot", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}
    t0["spec"]["tolerations"] = [other, mine]
    slow = {"key": "spot", "operator": "Equal", "value": "no", "effect": "NoSchedule"}
    tolerations = [GPU, slow, {"key": "spot", "operator": "Exists"}]
    out, ops = apply(obj, policy(tolerations=tolerations))
    first, second = (t["spec"]["tolerations"] for t in _templates(out))
    # the same key+operator+effect is kept as it is (the value differs: kept without overwrite)
    assert first == [other, mine, {"key": "spot", "operator": "Exists"}]
    assert second == tolerations  # created with the list, in one op
    paths = [op["path"] for op in ops]
    assert paths.count("/spec/replicatedJobs/0/template/spec/template/spec/tolerations/-") == 1
    out, ops = apply(obj, policy(tolerations=tolerations, overwrite=True))
    assert _templates(out)[0]["spec"]["tolerations"][0] == slow  # replaced in place
    assert {"op": "replace", "path": "/spec/replicatedJobs/0/template/spec/template/spec/tolerations/0", "value": slow} in ops  # fmt: skip
    _, again = apply(out, policy(tolerations=tolerations, overwrite=True))
    assert again == []


def test_rules_that_add_tolerations_to_one_template_make_one_list() -> None:
    obj = sample(*JOBSET_SAMPLE)
    pol = parse_policy(
        {
            "rules": [
                {"name": "a", "tolerations": [GPU]},
                {"name": "b", "tolerations": [GPU, {"key": "b", "operator": "Exists"}]},
            ]
        }
    )
    out, ops = apply(obj, pol)
    for t in _templates(out):
        assert t["spec"]["tolerations"] == [GPU, {"key": "b", "operator": "Exists"}]
    assert len([op for op in ops if op["path"].endswith("/tolerations")]) == 2  # one per template


def test_a_pod_spec_definition_takes_the_pod_spec_fields_at_the_pod_spec() -> None:
    doc = yaml.safe_load((catalog_dir() / "jobset.x-k8s.io-jobset-v1alpha2.yaml").read_text())
    child = doc["spec"]["structureDefinition"]["childComponents"][0]
    child["specDefinition"] = {"podSpecPath": ".spec.replicatedJobs[].template.spec.template.spec"}
    karta = definitions.parse(doc)
    assert carry.carried(karta) == (
        "schedulerName", "priorityClassName", "nodeSelector", "tolerations", "runtimeClassName"
    )  # fmt: skip
    obj = sample(*JOBSET_SAMPLE)
    m = mutate_with(karta, policy(**SIX), obj, ENGINE)
    out = jsonpatch.apply_patch(obj, m.ops)
    for t in _templates(out):
        assert t["spec"]["tolerations"][0] == GPU and t["spec"]["priorityClassName"] == "train"
        assert "kai.scheduler/queue" not in (t.get("metadata") or {}).get("labels", {})
    # labels and annotations have no place without a metadataPath: not applicable, once each
    assert [r for r, _ in m.failures] == [NOT_APPLICABLE, NOT_APPLICABLE]
    assert sum("no place for labels" in w for w in m.warnings) == 1


# --------------------------------------------------------------------------- not applicable


def _argo() -> dict[str, Any]:
    return sample("argoproj.io-workflow-v1alpha1", "gpu-dag.yaml")


def test_a_fragmented_definition_writes_priority_class_through_its_fragmented_path() -> None:
    out, _ = apply(_argo(), policy(priorityClassName="train"))
    assert out["spec"]["podPriorityClassName"] == "train"


def _notebook() -> dict[str, Any]:
    return sample("kubeflow.org-notebook-v1", "jupyter-gpu.yaml")


def test_a_field_a_definition_cannot_locate_is_not_applicable_never_guessed() -> None:
    # A Notebook's template has no metadata and its controller copies no annotation to the
    # pod: the definition has no annotationsPath, and none is guessed.
    obj = _notebook()
    m = mutate_object(REGISTRY, policy(annotations={"a": "b"}), obj, ENGINE)
    assert m is not None and m.ops == []
    assert [w.split(": ", 1)[1] for w in m.warnings] == [
        "the definition gives no place for annotations; not applicable, skipped",
    ]
    assert {r for r, _ in m.failures} == {NOT_APPLICABLE}


def _mutate(obj: dict[str, Any], text: str, resource: str = "notebooks") -> dict[str, Any]:
    req = decode(json.dumps(review(obj, resource=resource)).encode())
    resp = mutate(req, REGISTRY, parse_policy(yaml.safe_load(text)), ENGINE).response
    out: dict[str, Any] = json.loads(encode(resp))["response"]
    return out


def test_not_applicable_is_denied_under_failure_mode_closed_and_warned_under_open() -> None:
    rules = "rules:\n- {name: n, schedulerName: kai-scheduler, annotations: {a: b}}\n"
    closed = _mutate(_notebook(), "failureMode: closed\n" + rules)
    assert closed["allowed"] is False and "no place for annotations" in closed["status"]["message"]
    opened = _mutate(_notebook(), rules)
    assert opened["allowed"] is True
    assert any("no place for annotations" in w for w in opened["warnings"])
    assert opened["auditAnnotations"]["mutation-failure"] == NOT_APPLICABLE


# --------------------------------------------------------------------------- refused by the kind


def _knative() -> dict[str, Any]:
    stem = "serving.knative.dev-service-v1"
    name = sorted(p.name for p in (catalog_dir() / "samples" / stem).iterdir())[0]
    return sample(stem, name)


def test_the_knative_definition_says_its_kind_refuses_three_fields_and_they_are_left_out() -> None:
    obj = _knative()
    karta = REGISTRY.lookup(definitions.GVK.of(obj))
    assert karta is not None
    assert carry.declined(karta) == {
        "nodeSelector", "tolerations", "priorityClassName", "runtimeClassName"
    }  # fmt: skip
    out, _ = apply(obj, policy(**SIX))
    spec = out["spec"]["template"]["spec"]
    assert spec["schedulerName"] == "kai-scheduler"
    assert not {"nodeSelector", "tolerations", "priorityClassName"} & set(spec)
    m = mutate_object(REGISTRY, policy(**SIX), obj, ENGINE)
    assert m is not None and m.failures == [] and m.warnings == []  # not a failure: stated


def test_without_the_annotation_a_knative_service_takes_all_six() -> None:
    obj = _knative()
    karta = REGISTRY.lookup(definitions.GVK.of(obj))
    assert karta is not None
    doc = copy.deepcopy(dict(karta.raw))
    del doc["metadata"]["annotations"][REFUSED_ANNOTATION]
    m = mutate_with(definitions.parse(doc), policy(**SIX), obj, ENGINE)
    spec = jsonpatch.apply_patch(obj, m.ops)["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "train" and GPU in spec["tolerations"]


def test_validate_names_the_fields_a_definition_carries_and_an_unknown_refused_field() -> None:
    obj = _knative()
    karta = REGISTRY.lookup(definitions.GVK.of(obj))
    assert karta is not None
    assert carry.summary(karta) == (
        "policy fields carried: labels, annotations, schedulerName; refused by the kind, per "
        f"{REFUSED_ANNOTATION}: priorityClassName, nodeSelector, tolerations, runtimeClassName"
    )
    doc = copy.deepcopy(dict(karta.raw))
    doc["metadata"]["annotations"][REFUSED_ANNOTATION] = "nodeSelector, affinity"
    [err] = carry.declined_errors(definitions.parse(doc))
    assert err.path == f"metadata.annotations[{REFUSED_ANNOTATION}]"
    assert "unknown policy field 'affinity'" in err.message


def test_every_catalog_kind_with_whole_templates_or_pod_specs_carries_all_six() -> None:
    from webhook.karta.fields import INJECTABLE_KEYS, POD_SPEC, TEMPLATE

    for karta in REGISTRY.definitions():
        patterns = {c.pattern for c in karta.components if c.pattern}
        if patterns and patterns <= {TEMPLATE, POD_SPEC}:
            assert carry.carried(karta) == INJECTABLE_KEYS, karta.name


#: Kinds with no pods of their own (docs/policy.md's footnote ²): the pods come from an object
#: the kind creates, which its own definition mutates. Their cells are "—²".
NO_PODS = {
    # apps.nvidia.com/v1alpha1 NIMCacheSpec: the caching pod is a batch/v1 Job's, built by the
    # operator (the Job definition reaches it)
    "apps.nvidia.com/v1alpha1 NIMCache",
    # trainer.kubeflow.org/v1alpha1 TrainJobSpec: no pod template; the pods are the JobSet's
    # the Trainer controller creates from the TrainingRuntime (the JobSet definition reaches them)
    "trainer.kubeflow.org/v1alpha1 TrainJob",
}
#: Fields a kind's API has no place for (footnote ³): "—³".
NO_FIELD = {
    # kubeflow.org/v1 NotebookTemplateSpec has only ``spec`` (no metadata), and the notebook
    # controller copies the Notebook's labels, not its annotations, to the pod
    ("kubeflow.org/v1 Notebook", "annotations"),
}
#: Fields the kind's API has but the bundled definition does not locate yet: a plain "—" (the
#: catalog's to fix; docs/policy.md says so under the table).
CATALOG_GAPS: set[tuple[str, str]] = set()


def policy_fields_table() -> str:
    """docs/policy.md's table of kinds and fields, from the catalog as loaded (``✓`` carried,
    ``refused¹`` refused by the kind, ``—²`` no pods of its own, ``—³`` no such field in the
    kind's API, ``—`` not located by the definition)."""
    from webhook.karta.fields import INJECTABLE_KEYS

    def order(k: definitions.Karta) -> tuple[str, str, str]:
        g = k.gvk
        return (g.group, g.kind, g.version) if g else ("", "", "")

    def none(kind: str, key: str) -> str:
        return "—²" if kind in NO_PODS else "—³" if (kind, key) in NO_FIELD else "—"

    lines = [
        "| kind | " + " | ".join(f"`{x}`" for x in INJECTABLE_KEYS) + " |",
        "|---|" + ":-:|" * len(INJECTABLE_KEYS),
    ]
    for k in sorted(REGISTRY.definitions(), key=order):
        g = k.gvk
        assert g is not None
        kind = f"{g.group or 'core'}/{g.version} {g.kind}"
        can, refused = set(carry.carried(k)), carry.declined(k)
        cells = [
            ("refused¹" if key in refused else "✓") if key in can else none(kind, key)
            for key in INJECTABLE_KEYS
        ]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_every_kind_carries_every_field_its_api_has() -> None:
    """All ✓ but where the kind's own API has no such field or refuses it (issue 35 item 3),
    and the gaps the catalog has yet to fill (never more)."""
    rows = [line.split(" | ") for line in policy_fields_table().splitlines()[2:]]
    from webhook.karta.fields import INJECTABLE_KEYS

    bare = {
        (row[0].removeprefix("| "), key)
        for row in rows
        for key, cell in zip(INJECTABLE_KEYS, [c.removesuffix(" |") for c in row[1:]], strict=True)
        if cell == "—"
    }
    assert bare <= CATALOG_GAPS, bare - CATALOG_GAPS


def test_docs_table_of_policy_fields_is_the_catalogs() -> None:
    """The table lives in docs/policy.md (README links it); wherever it is, in README.md or a
    file of docs/, there is exactly one and it is the catalog's."""
    root = Path(__file__).resolve().parents[2]
    holders = [
        p
        for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
        if "<!-- policy-fields-table" in p.read_text()
    ]
    assert len(holders) == 1, f"the policy fields table is in {holders}, not in one file"
    text = holders[0].read_text()
    start = text.index("<!-- policy-fields-table")
    start = text.index("\n", start) + 1
    end = text.index("<!-- /policy-fields-table -->")
    assert text[start:end].strip() == policy_fields_table(), (
        f"{holders[0].relative_to(root)}'s table is stale; print "
        "tests.test_policy_fields.policy_fields_table()"
    )


def test_a_value_in_the_way_is_unwritable_never_overwritten() -> None:
    from webhook.mutation.plan import UNWRITABLE

    obj = sample(*JOBSET_SAMPLE)
    spec = _templates(obj)[0]["spec"]
    spec["tolerations"] = "all"
    spec["nodeSelector"] = ["a"]
    m = mutate_object(REGISTRY, policy(tolerations=[GPU], nodeSelector={"a": "b"}), obj, ENGINE)
    assert m is not None
    assert [r for r, _ in m.failures] == [UNWRITABLE, UNWRITABLE]
    assert not any(op["path"].startswith("/spec/replicatedJobs/0/") for op in m.ops)
    assert any(op["path"].startswith("/spec/replicatedJobs/1/") for op in m.ops)
