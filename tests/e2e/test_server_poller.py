"""Requests the worker's poller answers itself (``/mutate``, small bodies) beside those it hands
to a request thread: ``serve --workers=1 --threads=1`` for real, over TLS on 127.0.0.1.

A mutation that would wait on the jq sandbox (a definition only libjq evaluates) is given up on
the poller before it waits and answered, the same, by the request thread. While that thread is
held by a slow one, the poller still answers the other connections' JobSets; with the old hand-
off to a thread they waited behind it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from helpers import JOBSET, POLICY, load, patch_of, review
from running import Server, serving

#: Work that costs the native evaluator more than its budget on 60 jobs (216,000 bindings), so
#: that libjq in the sandbox evaluates the path; four levels (13 million) run to its deadline.
_WORK3 = ".spec.jobs[] as $a | .spec.jobs[] as $b | .spec.jobs[] as $c"
_WORK4 = _WORK3 + " | .spec.jobs[] as $d"
JOBS = 60

#: A kind whose template path libjq evaluates (see above).
LIBJQ = """\
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: test-libjq}
spec:
  structureDefinition:
    rootComponent:
      name: batch
      kind: {group: poller.example.com, version: v1, kind: Batch}
      statusDefinition: {}
      specDefinition:
        podTemplateSpecPath: "(WORK | empty), (.spec.jobs[] | .template)"
""".replace("WORK", _WORK3)

#: A kind whose template path runs in libjq until the evaluation's deadline (2 s).
SLOW = (
    LIBJQ.replace("test-libjq", "test-slow")
    .replace("kind: Batch", "kind: Slow")
    .replace(_WORK3, _WORK4)
)


def _batch(kind: str) -> dict[str, Any]:
    tmpl = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "poller.example.com/v1",
        "kind": kind,
        "metadata": {"name": "b", "namespace": "research"},
        "spec": {"jobs": [{"template": tmpl} for _ in range(JOBS)]},
    }


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("poller")
    catalog = tmp / "catalog"
    catalog.mkdir()
    (catalog / "libjq.yaml").write_text(LIBJQ)
    (catalog / "slow.yaml").write_text(SLOW)
    with serving(tmp, POLICY, ["--workers=1", "--threads=1", f"--catalog={catalog}"]) as server:
        yield server


def _templates(obj: dict[str, Any], r: dict[str, Any]) -> list[dict[str, Any]]:
    patched = jsonpatch.apply_patch(obj, patch_of(r))
    return [job["template"] for job in patched["spec"]["jobs"]]


def test_a_mutation_that_needs_the_sandbox_is_answered_by_a_request_thread(srv: Server) -> None:
    obj = _batch("Batch")
    r = srv.admit("/mutate", review(obj, resource="batches"))
    templates = _templates(obj, r)
    assert [t["spec"]["schedulerName"] for t in templates] == ["kai-scheduler"] * JOBS
    assert all(t["metadata"]["labels"]["kai.scheduler/queue"] == "research" for t in templates)
    # the same answer again and again: nothing of the attempt on the poller is left behind
    assert srv.admit("/mutate", review(obj, resource="batches"))["patch"] == r["patch"]


def test_the_poller_answers_while_the_request_thread_is_held(srv: Server, tmp_path: Path) -> None:
    done: dict[str, float] = {}
    answers: dict[str, dict[str, Any]] = {}

    def slow() -> None:
        answers["slow"] = srv.admit("/mutate", review(_batch("Slow"), resource="slows"), 30)
        done["slow"] = time.monotonic()

    held = threading.Thread(target=slow)
    held.start()
    time.sleep(0.3)  # the slow one is in the only request thread, until its 2 s deadline
    assert "slow" not in done
    obj = load(JOBSET)
    for i in range(5):
        answers[f"jobset-{i}"] = srv.admit("/mutate", review(obj), 10)
        done[f"jobset-{i}"] = time.monotonic()
    held.join(30)
    assert all(done[f"jobset-{i}"] < done["slow"] for i in range(5)), done
    for i in range(5):
        assert patch_of(answers[f"jobset-{i}"])
    # the slow one ran to its deadline in the thread and was let through, saying why
    slow_answer = answers["slow"]
    assert slow_answer["allowed"] is True and "patch" not in slow_answer
    assert any("deadline" in w or "timed out" in w for w in slow_answer["warnings"]), slow_answer
    assert "Traceback" not in json.dumps(slow_answer)
