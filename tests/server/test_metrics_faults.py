"""Metrics never cost an admission (webhook/server/metrics.py): every write that fails is counted in
memory, logged once, and raises nothing into the request, the worker's start or the master."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from webhook.server import metrics


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every metric write fails as it does when the multiprocess directory is gone."""

    def fail(*_: Any, **__: Any) -> Any:
        raise FileNotFoundError(2, "No such file or directory", "/gone/counter_123.db")

    monkeypatch.setattr(metrics, "child", fail)
    monkeypatch.setattr(metrics.DEFINITIONS, "set", fail)
    monkeypatch.setattr(metrics.RELOAD_SUCCESS, "labels", fail)
    monkeypatch.setattr(metrics.multiprocess, "mark_process_dead", fail)
    monkeypatch.setenv(metrics.ENV, "/gone")
    monkeypatch.setattr(metrics, "FAILURES", {})
    # caplog listens at the root: an earlier test that configured our logging (in process)
    # stopped the package's records there
    monkeypatch.setattr(logging.getLogger("karta_webhook"), "propagate", True)
    metrics._queued.clear()  # earlier tests' admissions: not flushed (failed) before the test


def test_past_the_queue_bound_a_failing_write_is_counted_not_raised(
    broken: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="karta_webhook.metrics"):
        for _ in range(3 * metrics.FLUSH_AT):
            metrics.count_admission("mutate", "Pod", "CREATE", "allowed", 0.001, 2)
        metrics.flush()
    assert len(metrics._queued) == 0  # the batches that could not be written are dropped
    assert metrics.FAILURES["admissions"] >= 3
    [record] = caplog.records  # logged once, however often it failed
    assert record.fields["write"] == "admissions"  # type: ignore[attr-defined]
    assert "FileNotFoundError" in record.fields["error"]  # type: ignore[attr-defined]
    assert record.exc_info is None


def test_every_kind_of_write_survives_and_is_counted(broken: None) -> None:
    metrics.count_cut("handshake_timeout")
    metrics.set_definitions(3, 0, 0)
    metrics.set_reload_status({"policy": (True, 1.0)})
    metrics.mark_process_dead(12345)  # in gunicorn's master: it must go on replacing workers
    assert metrics.FAILURES == {
        "connections": 1,
        "definitions": 1,
        "reload_status": 1,
        "mark_dead": 1,
    }


def test_a_failing_cpu_write_is_counted_and_the_admissions_still_written(
    broken: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*_: Any, **__: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(metrics.SERVER_CPU, "inc", fail)
    metrics.count_admission("mutate", "Pod", "CREATE", "allowed", 0.001, 0, None, 0.0001)
    metrics.flush()
    assert metrics.FAILURES["server_cpu"] == 1
    assert metrics.FAILURES["admissions"] == 1  # tried too (``child`` fails in this fixture)
    assert len(metrics._queued) == 0


def test_a_scrape_reports_the_failures_of_the_process_answering(
    broken: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics.set_definitions(3, 0, 0)
    monkeypatch.setenv(metrics.ENV, str(tmp_path))  # multiprocess rendering, an empty directory
    text = metrics.render()[0].decode()
    assert 'karta_webhook_metrics_failures_total{write="definitions"} 1.0' in text


class _Broken:
    """A stream whose every write fails, as stderr does when its reader went away."""

    def write(self, _: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_log_stream_that_fails_is_counted_and_said_once(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from webhook.server import logs

    logger = logging.getLogger("karta_webhook.test_broken_stream")
    handler = logs.JsonLines(_Broken())  # type: ignore[arg-type]
    handler.setFormatter(logs.JsonFormatter())
    monkeypatch.setattr(logger, "handlers", [handler])
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logs, "_failures", 0)
    for i in range(50):
        logs.emit(logger, logging.ERROR, "admission", {"uid": str(i)})  # the request path's
        logger.error("something else")  # any other record
    assert logs.failed_writes() == 100
    err = capfd.readouterr().err
    assert err.count("writing logs failed") == 1, err
    assert "BrokenPipeError" in err and "Traceback" not in err and "Logging error" not in err
    monkeypatch.setitem(metrics.FAILURE_SOURCES, "logs", logs.failed_writes)
    monkeypatch.setattr(metrics, "FAILURES", {})
    collected = next(iter(metrics._FailuresCollector().collect()))
    assert [(s.labels, s.value) for s in collected.samples if s.name.endswith("_total")] == [
        ({"write": "logs"}, 100.0)
    ]
