"""The by-parent shortcut (``locator._by_parent``) on guarded paths, as the bundled catalog
writes optional components since issue 34 (``.spec.components.proxy // empty | .podLabels``,
``instanceIdPath: .spec.components.proxy // empty | "proxy"``): it is taken where it gives what
the general path gives, declined for every other shape, and never changes a result.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import ENGINE, REGISTRY, SAMPLES, policy
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.karta.fields import Role
from webhook.karta.loading import load_definition
from webhook.karta.model import Karta
from webhook.mutation.plan import plan
from webhook.workload import locator as workload
from webhook.workload.batch import Batch, shared_fields
from webhook.workload.locator import locator, resolve

POLICY = policy(
    schedulerName="kai-scheduler",
    labels={"kai.scheduler/queue": "research"},
    annotations={"example.com/owner": "$(workload.name)-$(instance)"},
    priorityClassName="high",
)
MILVUS_SAMPLES = [
    (path.name, obj)
    for path in sorted(SAMPLES.glob("milvus.io-milvus-v1beta1/*.yaml"))
    for _, obj in read_documents(path)
]


def _both(karta: Karta, obj: Any) -> tuple[Any, Any]:
    """(workload, plan) of a mutation with the shortcut, then without it."""
    fast = resolve(karta, obj, ENGINE, full=False)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(workload, "_by_parent", lambda part, batch: None)
        slow = resolve(karta, obj, ENGINE, full=False)
    return (fast, plan(fast, POLICY, obj)), (slow, plan(slow, POLICY, obj))


@pytest.mark.parametrize(("name", "obj"), MILVUS_SAMPLES, ids=[n for n, _ in MILVUS_SAMPLES])
def test_the_bundled_milvus_resolves_every_component_by_its_parent(name: str, obj: Any) -> None:
    karta = REGISTRY.lookup(GVK.of(obj))
    assert karta is not None
    where = locator(karta)
    batch = Batch(where.requests, ENGINE, obj, where.find(obj, ENGINE))
    for part in where.parts:
        assert part.shared is not None, part.component.name
        if not part.root:  # the root's parent may be missing: created by the general path
            assert workload._by_parent(part, batch) is not None, part.component.name
    assert batch.later is None  # no component's own (guarded) fields were evaluated
    fast, slow = _both(karta, obj)
    assert fast == slow
    ids = [i.id for c in fast[0].components[1:] for i in c.instances]
    assert set(ids) <= {c.name for c in karta.children}
    if name == "cluster-all-components.yaml":  # the shortcut made instances: it proves something
        assert len(ids) >= 5


def test_which_bundled_components_the_shortcut_takes() -> None:
    taken = {
        k.name: [c.name for c in k.components if shared_fields(c) is not None]
        for k in REGISTRY.definitions()
    }
    assert taken["serving-kserve-io-llminferenceservice-v1alpha1"] == ["worker", "prefill-worker"]
    assert taken["serving-kserve-io-inferenceservice-v1beta1"] == [
        "predictor",
        "transformer",
        "explainer",
    ]
    milvus = REGISTRY.lookup(GVK("milvus.io", "v1beta1", "Milvus"))
    assert milvus is not None
    assert taken[milvus.name] == [c.name for c in milvus.components]
    for c in milvus.children:
        shared = shared_fields(c)
        assert shared is not None and shared.id == c.exprs[Role.INSTANCE_ID].split('"')[1]


def _definition(fields: dict[str, str], instance_id: str | None) -> Karta:
    """A root with a plain global write and one child ``proxy`` with these fragment paths."""
    child: dict[str, Any] = {
        "name": "proxy",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "ownerRef": "milvus",
        "specDefinition": {"fragmentedPodSpecDefinition": fields},
    }
    if instance_id is not None:
        child["instanceIdPath"] = instance_id
    doc = {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": "guarded"},
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "name": "milvus",
                    "kind": {"group": "milvus.io", "version": "v1beta1", "kind": "Milvus"},
                    "specDefinition": {
                        "fragmentedPodSpecDefinition": {"labelsPath": ".spec.components.podLabels"}
                    },
                },
                "childComponents": [child],
            }
        },
    }
    return load_definition(doc, "guarded")


P = ".spec.components.proxy"
GUARDED = {
    "labelsPath": f"{P} // empty | .podLabels",
    "annotationsPath": f"({P} // empty) | .podAnnotations",
    "schedulerNamePath": f"{P} // empty | .schedulerName",
    "priorityClassNamePath": f"{P} // empty | .priorityClassName",
}
#: definition shapes: (fragment paths, instanceIdPath, the shortcut's instance id or None: declined)
SHAPES = {
    "guarded, id": (GUARDED, f'{P} // empty | "proxy"', "proxy"),
    "guarded, other id": (GUARDED, f'({P} // empty) | "px-1"', "px-1"),
    "guarded, no id": (GUARDED, None, "proxy"),
    "plain, no id": (
        {"labelsPath": f"{P}.podLabels", "schedulerNamePath": f"{P}.schedulerName"},
        None,
        "proxy",
    ),
    "guarded, empty id": (GUARDED, f'{P} // empty | ""', None),
    "guarded, id of another parent": (
        GUARDED,
        '.spec.components.mixCoord // empty | "proxy"',
        None,
    ),
    "guarded, id not constant": (GUARDED, f"{P} // empty | .name", None),
    "plain, guarded id": ({"labelsPath": f"{P}.podLabels"}, f'{P} // empty | "proxy"', None),
    "mixed": ({**GUARDED, "labelsPath": f"{P}.podLabels"}, None, None),
    "guard above the parent": (
        {"labelsPath": "(.spec.components // empty) | .proxy.podLabels"},
        None,
        None,
    ),
    "guard over the field": ({"labelsPath": f"{P}.podLabels // empty"}, None, None),
    "guard inside the path": (
        {"labelsPath": ".spec | (.components.proxy // empty) | .x"},
        None,
        None,
    ),
}
KARTAS = {name: _definition(fields, iid) for name, (fields, iid, _) in SHAPES.items()}


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_shortcut_takes_exactly_the_shapes_it_resolves_the_same(name: str) -> None:
    expected = SHAPES[name][2]
    proxy = KARTAS[name].children[0]
    shared = shared_fields(proxy)
    assert (shared.id if shared is not None else None) == expected
    obj = {
        "apiVersion": "milvus.io/v1beta1",
        "kind": "Milvus",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"components": {"proxy": {"podLabels": {"a": "b"}}}},
    }
    fast, slow = _both(KARTAS[name], obj)
    assert fast == slow
    if expected is not None:
        [instance] = fast[0].components[1].instances
        assert instance.id == expected


#: what a component's entry, or what holds it, may be on a hostile object
ODD = st.one_of(
    st.none(),
    st.just(False),
    st.just(True),
    st.just({}),
    st.just({"podLabels": None, "schedulerName": False}),
    st.just({"podLabels": "text", "schedulerName": 7, "priorityClassName": []}),
    st.just({"podLabels": {"a": "b"}, "podAnnotations": {}, "schedulerName": "default"}),
    st.text(max_size=3),
    st.integers(),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(
    shape=st.sampled_from(list(SHAPES)),
    proxy=ODD,
    components=st.sampled_from(["keep", "null", "false", "text", "absent", "list"]),
    spec=st.sampled_from(["keep", "null", "list", "absent"]),
)
def test_odd_objects_resolve_the_same_with_the_shortcut(
    shape: str, proxy: Any, components: str, spec: str
) -> None:
    obj: dict[str, Any] = {
        "apiVersion": "milvus.io/v1beta1",
        "kind": "Milvus",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"components": {"proxy": copy.deepcopy(proxy), "mixCoord": {}}},
    }
    held = {"null": None, "false": False, "text": "x", "list": [1]}
    if components in held:
        obj["spec"]["components"] = held[components]
    elif components == "absent":
        del obj["spec"]["components"]
    if spec == "absent":
        del obj["spec"]
    elif spec != "keep":
        obj["spec"] = {"null": None, "list": [1]}[spec]
    fast, slow = _both(KARTAS[shape], obj)
    assert fast == slow
