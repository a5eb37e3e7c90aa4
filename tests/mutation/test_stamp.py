"""The mutation's fast lane (``webhook.mutation.stamp``) plans exactly what the general path plans.

For every catalog sample under several policies, and for generated templates of every shape
(metadata, labels, annotations and spec absent, null, of the wrong type, or holding the
values the policy sets, the unset value or others), the fast lane's plan is the general
path's plan from the same outcomes, or the fast lane declines and the general path has a
reason to: a warning, a failure, no template, or templates that overlap. And it must not
decline more than that, or the server would silently lose its fast lane.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import ENGINE, JOBSET, JOBSET_KARTA, REGISTRY, SAMPLES, load
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.admission.handlers import mutate_with, nothing_found
from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.karta import model as definitions
from webhook.karta.model import Karta
from webhook.mutation import stamp
from webhook.mutation.plan import Plan, plan
from webhook.mutation.policy import Match, Policy, Rule
from webhook.mutation.policyfile import parse_policy
from webhook.workload import locator as locating
from webhook.workload.locator import locator, resolve

POLICIES: dict[str, Policy] = {
    "demo": parse_policy(
        {
            "rules": [
                {
                    "name": "kai",
                    "schedulerName": "kai-scheduler",
                    "labels": {"kai.scheduler/queue": "research"},
                    "annotations": {"example.com/owner": "$(workload.name)"},
                }
            ]
        }
    ),
    "variables": parse_policy(
        {
            "rules": [
                {
                    "name": "v",
                    "labels": {"team": "$(workload.namespace)", "c": "$(component)"},
                    "annotations": {
                        "who": "$(workload.kind)/$(workload.name)/$(component)/$(instance)",
                        "cost": "$$5",
                    },
                }
            ]
        }
    ),
    "overwrite": parse_policy(
        {
            "rules": [
                {
                    "name": "o",
                    "overwrite": True,
                    "schedulerName": "kai-scheduler",
                    "labels": {"kai.scheduler/queue": "research", "app": "x"},
                }
            ]
        }
    ),
    "layered": parse_policy(
        {
            "rules": [
                {"name": "a", "labels": {"q": "one"}, "annotations": {"n": "1"}},
                {
                    "name": "b",
                    "overwrite": True,
                    "labels": {"q": "two", "r": "2"},
                    "schedulerName": "other",
                },
                {
                    "name": "c",
                    "match": {"instances": ["w*", "1"], "components": ["replicatedjob"]},
                    "labels": {"q": "three"},
                    "annotations": {"n": "3", "m": "$(instance)"},
                    "schedulerName": "kai-scheduler",
                },
                {"name": "d", "match": {"namespaces": ["nowhere"]}, "labels": {"z": "z"}},
                {
                    "name": "e",
                    "match": {"kinds": ["JobSet", "PyTorchJob"], "namespaces": ["*"]},
                    "annotations": {"e": "$(workload.kind)"},
                },
            ]
        }
    ),
    "rendered invalid": parse_policy({"rules": [{"name": "bad", "labels": {"q": "$(instance)"}}]}),
    "default scheduler": parse_policy(
        {"rules": [{"name": "s", "schedulerName": "default-scheduler"}]}
    ),
    "pod fields": parse_policy(
        {
            "rules": [
                {
                    "name": "p",
                    "priorityClassName": "train",
                    "nodeSelector": {
                        "nvidia.com/gpu.present": "true",
                        "z": "$(workload.namespace)",
                    },
                },
                {"name": "q", "nodeSelector": {"z": "other", "pool": "$(component)"}},
            ]
        }
    ),
    "pod fields overwrite": parse_policy(
        {
            "rules": [
                {
                    "name": "o",
                    "overwrite": True,
                    "priorityClassName": "high",
                    "nodeSelector": {"kubernetes.io/arch": "arm64"},
                    "labels": {"q": "x"},
                }
            ]
        }
    ),
}

SAMPLE_OBJECTS = [
    (f"{path.parent.name}/{path.name}", obj)
    for path in sorted(SAMPLES.glob("*/*.yaml"))
    for _, obj in read_documents(path)
]


def _karta(obj: dict[str, Any]) -> Karta:
    karta = REGISTRY.lookup(GVK.of(obj))
    assert karta is not None
    return karta


def _both(karta: Karta, obj: dict[str, Any], pol: Policy) -> tuple[Plan | None, Plan, bool]:
    """The fast lane's plan, the general path's, and whether the general path said anything
    (a warning or a failure), all from what one evaluation found (as the handler does)."""
    where = locator(karta)
    found = where.find(obj, ENGINE)
    outcomes = ENGINE.evaluate(where.requests.prepared, obj)  # each expression on its own
    if not found.failed:
        assert list(found.items) == [out.items for out in outcomes]
    lane = stamp.lane(karta)
    fast = (
        stamp.plan(karta, lane, pol, obj, found.items)
        if lane is not None and not found.failed
        else None
    )
    w = where.locate(obj, ENGINE, found)
    assert w == resolve(karta, obj, ENGINE, full=False)  # what was found is handed over right
    general = plan(w, pol, obj)
    said = bool(w.warnings or nothing_found(w, karta) or general.warnings or general.failures)
    return fast, general, said


def _templates(obj: dict[str, Any], karta: Karta) -> int:
    return len(resolve(karta, obj, ENGINE, full=False).instances)


def _check(karta: Karta, obj: dict[str, Any], pol: Policy, *, apart: bool = True) -> Plan | None:
    fast, general, said = _both(karta, obj, pol)
    if fast is not None:
        assert not said
        assert fast == general
    elif stamp.lane(karta) is not None and apart:
        # declined: only with a reason the general path shows
        assert said or _templates(obj, karta) == 0
    return fast


@pytest.mark.parametrize("policy_name", list(POLICIES))
@pytest.mark.parametrize(("name", "obj"), SAMPLE_OBJECTS, ids=[n for n, _ in SAMPLE_OBJECTS])
def test_every_sample_plans_the_same_in_the_fast_lane(
    name: str, obj: dict[str, Any], policy_name: str
) -> None:
    _check(_karta(obj), obj, POLICIES[policy_name])


def _job(name: Any, template: Any) -> dict[str, Any]:
    job = {"template": {"spec": {"template": template}}}
    return job if name is None else {"name": name, **job}


def _jobset(jobs: list[dict[str, Any]], namespace: str | None) -> dict[str, Any]:
    obj = load(JOBSET)
    obj["spec"]["replicatedJobs"] = jobs
    if namespace is None:
        obj["metadata"].pop("namespace", None)
    else:
        obj["metadata"]["namespace"] = namespace
    return obj


#: templates at each edge the fast lane handles (or declines), each tried under every policy
EDGES = [
    {"spec": {}},
    {"spec": {"schedulerName": "default-scheduler"}},
    {"spec": {"schedulerName": "kai-scheduler"}},
    {"spec": {"schedulerName": "other"}},
    {"spec": {"schedulerName": None}},
    {"spec": {"schedulerName": 7}},
    {"spec": None},
    {"spec": "x"},
    {"metadata": None, "spec": {}},
    {"metadata": "x", "spec": {}},
    {"metadata": {}, "spec": {}},
    {"metadata": {"labels": None, "annotations": None}, "spec": {}},
    {"metadata": {"labels": "x"}, "spec": {}},
    {"metadata": {"annotations": []}, "spec": {}},
    {"metadata": {"labels": {}}, "spec": {}},
    {"metadata": {"labels": {"kai.scheduler/queue": "research", "q": "one"}}, "spec": {}},
    {"metadata": {"labels": {"kai.scheduler/queue": "other", "q": "two", "app": None}}, "spec": {}},
    {"metadata": {"labels": {"q": "default-scheduler"}, "annotations": {"n": 1}}, "spec": {}},
    {"metadata": {"annotations": {"example.com/owner": "trainer", "m": "w1"}}, "spec": {}},
]


@pytest.mark.parametrize("policy_name", list(POLICIES))
@pytest.mark.parametrize("template", EDGES, ids=[str(i) for i in range(len(EDGES))])
def test_templates_at_every_edge_plan_the_same_in_the_fast_lane(
    template: dict[str, Any], policy_name: str
) -> None:
    jobs = [_job("w1", copy.deepcopy(template)), _job("leader", copy.deepcopy(template))]
    obj = _jobset(jobs, "team-a")
    _check(_karta(obj), obj, POLICIES[policy_name])


def test_the_fast_lane_is_taken_for_every_definition_of_whole_templates() -> None:
    """Every bundled definition whose components keep whole pod templates gets the fast lane
    on at least one sample, and at least the kinds the issue names are among them."""
    eligible = {k.name for k in REGISTRY.definitions() if stamp.lane(k) is not None}
    taken = set()
    for _, obj in SAMPLE_OBJECTS:
        karta = _karta(obj)
        if _check(karta, obj, POLICIES["demo"]) is not None:
            taken.add(karta.name)
    assert taken == eligible
    for kind in ("JobSet", "PyTorchJob", "RayCluster", "LeaderWorkerSet", "Deployment"):
        assert any(
            k.gvk and k.gvk.kind == kind for k in REGISTRY.definitions() if k.name in taken
        ), kind


def test_definitions_with_other_shapes_take_the_general_path() -> None:
    milvus = next(k for k in REGISTRY.definitions() if k.gvk and k.gvk.kind == "Milvus")
    assert stamp.lane(milvus) is None  # fragments
    doc = load(JOBSET_KARTA)
    child = doc["spec"]["structureDefinition"]["childComponents"][0]
    child["specDefinition"] = {
        "podSpecPath": ".spec.replicatedJobs[].template.spec.template.spec",
        "metadataPath": ".spec.replicatedJobs[].template.spec.template.metadata",
    }
    assert stamp.lane(definitions.parse(doc)) is None  # a pod spec and its metadata


def test_the_handler_answers_from_the_fast_lane_as_from_the_general_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    obj = load(JOBSET)
    karta = _karta(obj)
    pol = POLICIES["demo"]
    fast = mutate_with(karta, pol, obj, ENGINE)
    monkeypatch.setattr(stamp, "plan", lambda *a: None)
    general = mutate_with(karta, pol, obj, ENGINE)
    assert fast == general
    assert fast.ops and fast.templates_mutated == 2


def _in_the_way(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with a string where each template keeps its metadata (the lane declines)."""
    out = copy.deepcopy(obj)
    karta = _karta(obj)
    lane = stamp.lane(karta)
    if lane is None:
        return out
    outcomes = ENGINE.evaluate(locator(karta).requests.prepared, out)
    for _, at_paths, _ in lane.components:
        for _, template in outcomes[at_paths].items:
            if isinstance(template, dict):
                template["metadata"] = "in the way"
    return out


@pytest.mark.parametrize("way", ["as is", "one by one", "declined"])
@pytest.mark.parametrize(("name", "obj"), SAMPLE_OBJECTS, ids=[n for n, _ in SAMPLE_OBJECTS])
def test_the_handler_answers_every_sample_as_the_general_path_does(
    name: str, obj: dict[str, Any], way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whichever way the handler evaluates (the paths walked together, or one by one) and
    whether the lane plans or declines, its answer is the general path's."""
    if way == "declined":
        obj = _in_the_way(obj)
    if way == "one by one":  # as when the paths cannot be walked together
        monkeypatch.setattr(locating, "walked", lambda prepared, obj: None)
    karta = _karta(obj)
    pol = POLICIES["demo"]
    answer = mutate_with(karta, pol, obj, ENGINE)
    if way == "declined" and stamp.lane(karta) is not None:
        assert answer.warnings or answer.failures  # the general path answered, and says why
    monkeypatch.setattr(stamp, "plan", lambda *a: None)
    assert answer == mutate_with(karta, pol, obj, ENGINE)


def _jobset_karta(*paths: str) -> Karta:
    """The JobSet definition with one child component per template path."""
    doc = load(JOBSET_KARTA)
    child = doc["spec"]["structureDefinition"]["childComponents"][0]
    children = []
    for i, path in enumerate(paths):
        c = copy.deepcopy(child)
        c["name"] = f"c{i}"
        c["specDefinition"]["podTemplateSpecPath"] = path
        del c["instanceIdPath"]
        children.append(c)
    doc["spec"]["structureDefinition"]["childComponents"] = children
    return definitions.parse(doc)


@pytest.mark.parametrize(
    "paths",
    [
        (".spec.replicatedJobs[0].template.spec.template",) * 2,  # one template, twice
        (
            ".spec.replicatedJobs[0].template.spec.template",
            ".spec.replicatedJobs[0].template.spec.template.metadata",  # inside another
        ),
        (".spec.replicatedJobs[0].template.spec.template, .spec.replicatedJobs[0].template",),
    ],
)
def test_templates_that_overlap_take_the_general_path(paths: tuple[str, ...]) -> None:
    obj = load(JOBSET)
    obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = {}
    karta = _jobset_karta(*paths)
    assert stamp.lane(karta) is not None
    for pol in POLICIES.values():
        assert _check(karta, obj, pol, apart=False) is None


def test_templates_apart_at_different_depths_take_the_fast_lane() -> None:
    obj = load(JOBSET)
    karta = _jobset_karta(
        ".spec.replicatedJobs[0].template.spec.template", ".spec.replicatedJobs[1].template"
    )
    assert _check(karta, obj, POLICIES["layered"]) is not None


VALUE = st.one_of(
    st.none(),
    st.sampled_from(["research", "one", "two", "x", "default-scheduler", "kai-scheduler", ""]),
    st.integers(-1, 1),
    st.just({"a": 1}),
)
MAP = st.one_of(
    st.none(),
    st.text(max_size=2),
    st.just([]),
    st.dictionaries(
        st.sampled_from(["kai.scheduler/queue", "example.com/owner", "q", "n", "app", "e"]),
        VALUE,
        max_size=3,
    ),
)
META = st.one_of(
    st.none(),
    st.text(max_size=2),
    st.integers(),
    st.fixed_dictionaries({}, optional={"labels": MAP, "annotations": MAP, "name": st.just("p")}),
)
SPEC = st.one_of(
    st.fixed_dictionaries({}, optional={"schedulerName": VALUE}),
    st.sampled_from([None, "spec", []]),
)
# Mostly templates the fast lane takes (objects with a spec), sometimes ones it must decline.
TEMPLATE = st.one_of(
    st.fixed_dictionaries({"spec": SPEC}, optional={"metadata": META}),
    st.fixed_dictionaries({}, optional={"metadata": META}),
    st.sampled_from([None, "t"]),
)

#: names that are ids, and (sometimes) ones that are not, or none (then ids from places)
GOOD_NAME = st.sampled_from(["leader", "workers", "w1", "1"])
ANY_NAME = st.one_of(GOOD_NAME, st.sampled_from(["", 3, "not a label!", None]))


@settings(max_examples=400, deadline=None)
@given(
    jobs=st.lists(st.builds(_job, GOOD_NAME, TEMPLATE), max_size=3),
    policy_name=st.sampled_from(list(POLICIES)),
    namespace=st.sampled_from(["team-a", None]),
)
def test_generated_templates_plan_the_same_in_the_fast_lane(
    jobs: list[dict[str, Any]], policy_name: str, namespace: str | None
) -> None:
    obj = _jobset(jobs, namespace)
    _check(_karta(obj), obj, POLICIES[policy_name])


@settings(max_examples=150, deadline=None)
@given(
    jobs=st.lists(st.builds(_job, ANY_NAME, TEMPLATE), max_size=3),
    policy_name=st.sampled_from(list(POLICIES)),
)
def test_generated_names_plan_the_same_in_the_fast_lane(
    jobs: list[dict[str, Any]], policy_name: str
) -> None:
    obj = _jobset(jobs, "team-a")
    _check(_karta(obj), obj, POLICIES[policy_name])


def test_a_constant_the_injectable_rejects_declines_only_where_its_rule_applies() -> None:
    """A policy file cannot hold such a constant (loading rejects it), but a rule built in
    code can: the fast lane leaves any template its rule applies to to the general path,
    which warns, and plans the templates it does not apply to itself."""
    obj = load(JOBSET)
    karta = _karta(obj)
    bad = {"labels": (("q", "not a label value!"),)}
    applies = Policy((Rule("bad", Match(), bad),))
    fast, general, said = _both(karta, obj, applies)
    assert fast is None and said and general.failures
    elsewhere = Policy(
        (
            Rule("bad", Match(instances=("nothing-is-called-this",)), bad),
            Rule("ok", Match(), {"labels": (("q", "fine"),)}),
        )
    )
    assert _check(karta, obj, elsewhere) is not None


def test_a_rule_that_sets_tolerations_is_planned_by_the_general_path() -> None:
    """The fast lane writes maps and single fields; a list (tolerations) is the general
    path's, from the same outcomes, and the handler's answer is the general path's."""
    obj = load(JOBSET)
    karta = _karta(obj)
    pol = parse_policy(
        {"rules": [{"name": "t", "tolerations": [{"key": "gpu", "operator": "Exists"}]}]}
    )
    fast, general, said = _both(karta, obj, pol)
    assert fast is None and not said
    assert general.ops and general.ops == mutate_with(karta, pol, obj, ENGINE).ops
