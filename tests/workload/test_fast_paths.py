"""The shortcuts of the /mutate hot path give exactly what the general path gives.

* An absent child component (a Milvus component nobody listed) is known to have no instance
  without resolving it, and a present one whose fields are keys of one object is resolved
  directly (``locator._by_parent``): the workload, the patch and every warning must
  be the same as when it is resolved by the general rules. Templates are resolved for a
  mutation without replicas and GPUs (``locator._template_view``): the instances must be
  those a describe finds.
* JSON Pointers are memoised by location, bounded in bytes.
* Policy values are prepared once (``policy.Setting``), rendered without a regex.
* Metric children are looked up once per label set.
"""

from __future__ import annotations

import copy
import gc
import logging
import re
import threading
import time
from typing import Any

import pytest
import yaml
from helpers import ENGINE, REGISTRY, ROOT, SAMPLES, policy
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY as METRICS

from webhook.base import pointers
from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.base.limits import POINTER_CACHE_BYTES
from webhook.karta.fields import INJECTABLES
from webhook.karta.loading import load_definition
from webhook.mutation.plan import plan
from webhook.mutation.policy import VARIABLES, Match, Policy, Rule, _setting, render, variables_in
from webhook.server import metrics
from webhook.workload import locator as workload
from webhook.workload.batch import Batch
from webhook.workload.locator import locator, resolve
from webhook.workload.model import ComponentView

POLICY = policy(
    schedulerName="kai-scheduler",
    labels={"kai.scheduler/queue": "research"},
    annotations={"example.com/owner": "$(workload.name)-$(instance)"},
)
SAMPLE_OBJECTS = [
    (f"{path.parent.name}/{path.name}", obj)
    for path in sorted(SAMPLES.glob("*/*.yaml"))
    for _, obj in read_documents(path)
]
MILVUS = next(obj for name, obj in SAMPLE_OBJECTS if name.endswith("cluster-some-components.yaml"))
MILVUS_BY_PARENT = load_definition(
    yaml.safe_load((ROOT / "tests/fixtures/milvus-by-parent.yaml").read_text()), "milvus-by-parent"
)


def _both(obj: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(workload, plan) with the absent-component shortcut, then without it."""
    karta = REGISTRY.lookup(GVK.of(obj))
    assert karta is not None
    fast = resolve(karta, obj, ENGINE, full=False)
    fast_plan = plan(fast, POLICY, obj)
    with monkeypatch.context() as m:
        m.setattr(workload, "_by_parent", lambda part, batch: None)
        slow = resolve(karta, obj, ENGINE, full=False)
    return (fast, fast_plan), (slow, plan(slow, POLICY, obj))


@pytest.mark.parametrize(("name", "obj"), SAMPLE_OBJECTS, ids=[n for n, _ in SAMPLE_OBJECTS])
def test_every_sample_resolves_the_same_with_the_shortcut(
    name: str, obj: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = _both(obj, monkeypatch)
    assert fast == slow


def test_the_shortcut_is_taken_for_components_nobody_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    karta = MILVUS_BY_PARENT  # plain paths (bundled, guarded: test_by_parent_guarded.py)
    listed = set(MILVUS["spec"]["components"])
    where = locator(karta)
    batch = Batch(where.requests, ENGINE, MILVUS, where.find(MILVUS, ENGINE))
    skipped = [
        p.component.name
        for p in where.parts[1:]
        if workload._by_parent(p, batch)
        == ComponentView(p.component.name, p.component.kind, p.component.owner_ref, ())
    ]
    assert skipped  # the test would prove nothing otherwise
    assert batch.later is None  # their own fields were never evaluated
    for c in karta.children:
        if c.name in skipped:
            assert c.name not in listed


#: What a component's entry, or the map of components, may be on a hostile object.
ODD = st.one_of(
    st.none(),
    st.just({}),
    st.just({"podLabels": None}),
    st.just({"podLabels": "text", "schedulerName": 7}),
    st.just({"podLabels": {"a": "b"}, "schedulerName": "default-scheduler"}),
    st.text(max_size=3),
    st.integers(),
    st.lists(st.integers(), max_size=2),
)
COMPONENTS = [
    "standalone",
    "proxy",
    "mixCoord",
    "dataNode",
    "queryNode",
    "indexNode",
    "streamingNode",
]


@settings(max_examples=150, deadline=None)
@given(
    entries=st.dictionaries(st.sampled_from(COMPONENTS), ODD, max_size=5),
    top=st.sampled_from(["keep", "null", "text", "absent", "spec-null", "spec-list"]),
)
def test_odd_milvus_objects_resolve_the_same_with_the_shortcut(
    entries: dict[str, Any], top: str
) -> None:
    obj = copy.deepcopy(MILVUS)
    obj["spec"]["components"] = entries
    if top == "null":
        obj["spec"]["components"] = None
    elif top == "text":
        obj["spec"]["components"] = "x"
    elif top == "absent":
        del obj["spec"]["components"]
    elif top == "spec-null":
        obj["spec"] = None
    elif top == "spec-list":
        obj["spec"] = [1]
    with pytest.MonkeyPatch.context() as mp:
        fast, slow = _both(obj, mp)
    assert fast == slow


def test_pointers_are_memoised_right_and_bounded() -> None:
    for path in [("a", "b~c", "d/e", 0), ("spec", "x", 12), (), ("~", "/")]:
        assert pointers.pointer(path) == pointers.to_pointer(path)
        # a list key works too
        assert pointers.pointer(list(path)) == pointers.to_pointer(path)
        assert pointers.pointer(path) == pointers.to_pointer(path)  # and the memoised answer
    for i in range(POINTER_CACHE_BYTES // 20 + 100):  # more than the memo holds
        pointers.pointer(("attacker", f"key-{i:08d}"))
    memo = pointers._pointers
    assert 0 < memo.bytes <= POINTER_CACHE_BYTES
    assert sum(len(v) for v in memo.data.values()) == memo.bytes


def test_policy_values_are_prepared_once() -> None:
    pol = policy(
        labels={"plain": "x", "var": "$(component)"},
        annotations={"dollar": "$$5"},
        schedulerName="kai-scheduler",
    )
    [rule] = pol.rules
    by_key = {s.key: s for _, group in rule.settings for s in group}
    assert by_key["plain"].constant == "x" and not by_key["plain"].invalid
    assert by_key["var"].constant is None
    assert by_key["dollar"].constant is None  # "$$" renders to "$"
    assert by_key["dollar"].value({}) == "$5"
    assert by_key[None].tail == "" and by_key["plain"].tail == "/plain"
    assert rule.variable
    assert [inj.key for inj, _ in rule.settings] == ["labels", "annotations", "schedulerName"]


def test_a_constant_value_the_api_server_would_refuse_is_checked_once_and_skipped() -> None:
    # parse_policy refuses it at load; a Rule made in code still gets the check.
    bad = Rule("r", Match(), sets={"labels": (("q", "-x-"),)})
    [(_, (setting,))] = bad.settings
    assert setting.invalid
    obj = next(o for n, o in SAMPLE_OBJECTS if n.endswith("leader-workers.yaml"))
    w = resolve(REGISTRY.lookup(GVK.of(obj)), obj, ENGINE, full=False)
    out = plan(w, Policy((bad,)), obj)
    assert out.ops == []
    assert out.failures and all(reason == "invalid_value" for reason, _ in out.failures)
    assert all("is not a valid label value" in warning for warning in out.warnings)


def test_an_injectable_that_checks_its_values_says_what_a_bad_one_is() -> None:
    # The text goes into the warning of a skipped value; free text has no check and no text.
    for inj in INJECTABLES:
        assert bool(inj.invalid) == (inj.check_value is not None), inj.key


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([f"$({v})" for v in VARIABLES]),
            st.sampled_from(["$$", "$", "(", ")", "$(", "-", "x"]),
            st.text(alphabet="ab$()-", max_size=4),
        ),
        max_size=6,
    )
)
def test_values_render_without_the_regex_as_with_it(parts: list[str]) -> None:
    template = "".join(parts)
    if any(v not in VARIABLES for v in variables_in(template)):
        return  # a policy with an unknown variable is refused at load
    values = {v: f"<{v}>" for v in VARIABLES}
    setting = _setting(INJECTABLES[1], "k", template)  # annotations: any value is valid
    # the oracle: substitution by the regex, as Kubernetes expands $(VAR) and $$
    expected = re.sub(
        r"\$\$|\$\(([^)]*)\)", lambda m: "$" if m.group(0) == "$$" else values[m.group(1)], template
    )
    assert setting.value(values) == render(template, values) == expected


def test_metric_children_are_looked_up_once() -> None:
    a = metrics.child(metrics.REQUESTS, "mutate", "JobSet", "CREATE", "patched")
    assert a is metrics.child(metrics.REQUESTS, "mutate", "JobSet", "CREATE", "patched")
    assert a is not metrics.child(metrics.REQUESTS, "mutate", "JobSet", "UPDATE", "patched")
    before = a._value.get()
    metrics.child(metrics.REQUESTS, "mutate", "JobSet", "CREATE", "patched").inc()
    assert (
        metrics.REQUESTS.labels("mutate", "JobSet", "CREATE", "patched")._value.get() == before + 1
    )


def _sample(name: str, **labels: str) -> float:
    return METRICS.get_sample_value(name, labels) or 0.0


def test_admissions_are_counted_when_flushed_in_sums() -> None:
    kind = "FlushKind"  # a kind no other test counts
    req = {"webhook": "mutate", "kind": kind, "operation": "CREATE"}
    metrics.flush()
    before = _sample("karta_webhook_request_duration_seconds_count", webhook="mutate")
    metrics.count_admission("mutate", kind, "CREATE", "patched", 0.002, 6)
    metrics.count_admission("mutate", kind, "CREATE", "patched", 0.003, 4)
    metrics.count_admission("mutate", kind, "CREATE", "error", 0.001, 0, "error")
    assert _sample("karta_webhook_requests_total", outcome="patched", **req) == 0  # queued
    metrics.flush()
    assert _sample("karta_webhook_requests_total", outcome="patched", **req) == 2
    assert _sample("karta_webhook_requests_total", outcome="error", **req) == 1
    assert _sample("karta_webhook_patch_operations_total", kind=kind) == 10
    assert _sample("karta_webhook_mutation_failures_total", kind=kind, reason="error") == 1
    after = _sample("karta_webhook_request_duration_seconds_count", webhook="mutate")
    assert after == before + 3
    metrics.flush()  # nothing is written twice
    assert _sample("karta_webhook_requests_total", outcome="patched", **req) == 2


def test_the_admission_queue_is_bounded_without_a_flusher() -> None:
    kind = "BoundKind"
    n = metrics.FLUSH_AT * 2 + 7
    for _ in range(n):
        metrics.count_admission("mutate", kind, "CREATE", "skipped", 0.0)
        assert len(metrics._queued) <= metrics.FLUSH_AT
    metrics.flush()
    counted = _sample(
        "karta_webhook_requests_total",
        webhook="mutate",
        kind=kind,
        operation="CREATE",
        outcome="skipped",
    )
    assert counted == n


def test_a_flushing_thread_writes_what_requests_queue() -> None:
    kind = "ThreadKind"
    labels = {"webhook": "mutate", "kind": kind, "operation": "CREATE", "outcome": "patched"}
    stop = metrics.start_flushing(every=0.01)
    try:
        metrics.count_admission("mutate", kind, "CREATE", "patched", 0.001, 2)
        deadline = time.monotonic() + 5
        # read without flushing here: only the thread writes
        while METRICS.get_sample_value("karta_webhook_requests_total", labels) is None:
            assert time.monotonic() < deadline, "the flushing thread wrote nothing"
            time.sleep(0.01)
    finally:
        stop.set()
    assert METRICS.get_sample_value("karta_webhook_requests_total", labels) == 1


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _no_flushing_thread() -> None:
    """Wait for the flushing threads of earlier tests to end (each flushes once more after
    its stop), so that the flush a test patches in is called by its own thread alone."""
    for thread in threading.enumerate():
        if thread.name == "karta-metrics-flush":
            thread.join(timeout=5)
            assert not thread.is_alive(), "a flushing thread did not stop"


def test_the_flushing_thread_goes_on_after_a_failed_write(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_flushing_thread()
    calls: list[int] = []
    real = metrics.flush
    kept = _Kept()
    metrics.log.addHandler(kept)

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("No space left on device")
        real()

    monkeypatch.setattr(metrics, "flush", flaky)
    stop = metrics.start_flushing(every=0.01)
    try:
        deadline = time.monotonic() + 5
        while len(calls) < 3:
            assert time.monotonic() < deadline, "the thread stopped after the failed write"
            metrics.count_admission("mutate", "JobSet", "CREATE", "patched", 0.001)
            time.sleep(0.01)
    finally:
        stop.set()
        metrics.log.removeHandler(kept)
    assert "writing the metrics failed" in kept.messages


def test_an_idle_flushing_thread_sleeps_until_an_admission_is_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker with nothing to write is not woken on a timer (each wake of an idle process
    costs this machine a millisecond or more of CPU); the next admission wakes it."""
    _no_flushing_thread()
    metrics.flush()
    calls: list[float] = []
    real = metrics.flush

    def counted() -> None:
        calls.append(time.monotonic())
        real()

    monkeypatch.setattr(metrics, "flush", counted)
    stop = metrics.start_flushing(every=0.01)
    try:
        time.sleep(0.1)  # at most the one flush of what was queued before the thread began
        idle = len(calls)
        time.sleep(0.3)  # 30 of its periods: a timer would have flushed about 30 times
        assert len(calls) == idle <= 1
        metrics.count_admission("mutate", "JobSet", "CREATE", "patched", 0.001)
        deadline = time.monotonic() + 5
        while len(calls) == idle:
            assert time.monotonic() < deadline, "the queued admission did not wake the thread"
            time.sleep(0.01)
    finally:
        stop.set()
    _no_flushing_thread()  # and a stop wakes a sleeping thread, which ends


def test_the_last_flush_when_flushing_stops_is_logged_when_it_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_flushing_thread()
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    kept = _Kept()
    metrics.log.addHandler(kept)

    def broken() -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(metrics, "flush", broken)
    try:
        metrics.start_flushing(every=60).set()  # the thread's only flush is its last
        _no_flushing_thread()
    finally:
        metrics.log.removeHandler(kept)
    assert raised == []
    assert kept.messages == ["writing the metrics failed"]


@pytest.mark.parametrize(("name", "obj"), SAMPLE_OBJECTS, ids=[n for n, _ in SAMPLE_OBJECTS])
def test_a_mutation_finds_the_instances_a_describe_finds(name: str, obj: Any) -> None:
    """Mutation resolves templates and fields under one parent by shortcuts
    (``_template_view``, ``_by_parent``); a describe resolves everything by the general rules:
    the instances, their ids, locations and slots must agree. (A describe also counts an
    instance known by read-only fields alone, a NIMCache's: nothing to write there, and a
    mutation does not read those fields.)"""
    karta = REGISTRY.lookup(GVK.of(obj))
    assert karta is not None
    full = resolve(karta, obj, ENGINE, full=True)
    mutation = resolve(karta, obj, ENGINE, full=False)

    def seen(w: Any) -> list[Any]:
        return [
            (c.name, [(i.id, i.location, i.slots) for i in c.instances if i.slots])
            for c in w.components
        ]

    assert seen(mutation) == seen(full)
    assert set(mutation.warnings) <= set(full.warnings)


def test_the_master_freezes_its_heap_before_each_fork(tmp_path: Any, monkeypatch: Any) -> None:
    """The loaded heap goes to the permanent generation before a worker is forked, so the
    worker's full collections skip it (bench_mutate does the same before measuring)."""
    from gunicorn.app.base import BaseApplication

    from webhook.admission.state import State
    from webhook.server import run as serving
    from webhook.server.certs_dev import ensure_dev_certs

    seen: dict[str, Any] = {}

    def capture(app: Any) -> None:
        seen["pre_fork"] = app.cfg.settings["pre_fork"].value
        seen["preload"] = app.cfg.settings["preload_app"].value

    monkeypatch.setattr(BaseApplication, "run", capture)
    certs = ensure_dev_certs(tmp_path / "certs")
    serving.run(State(), certfile=certs.cert, keyfile=certs.key, workers=1)
    assert seen == {"pre_fork": serving.freeze_heap, "preload": True}
    before = gc.get_freeze_count()
    try:
        gc.collect()
        kept = [object() for _ in range(10)], {"a": [1]}  # tracked objects that live on
        serving.freeze_heap(None, None)
        assert gc.get_freeze_count() > before
        assert kept
    finally:
        gc.unfreeze()


def test_kinds_are_parsed_once_and_the_kept_ones_are_bounded() -> None:
    from webhook.base import gvk as gvk_module
    from webhook.base.limits import GVK_CACHE_ENTRIES, GVK_CACHE_TEXT

    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}
    assert GVK.of(obj) is GVK.of(dict(obj)) == GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
    before = gvk_module._parsed.cache_info().currsize
    huge = {"apiVersion": "g" * GVK_CACHE_TEXT + "/v1", "kind": "K"}
    assert GVK.of(huge) == GVK("g" * GVK_CACHE_TEXT, "v1", "K")  # parsed all the same
    assert gvk_module._parsed.cache_info().currsize == before  # and not kept
    for i in range(GVK_CACHE_ENTRIES + 50):
        assert (
            GVK.of({"apiVersion": f"g{i}.example.com/v1", "kind": "K"}).group == f"g{i}.example.com"
        )
    assert gvk_module._parsed.cache_info().currsize <= GVK_CACHE_ENTRIES
    assert GVK.of({"apiVersion": "v1", "kind": "Pod"}) == GVK("", "v1", "Pod")
