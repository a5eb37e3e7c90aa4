"""JSON log lines: the direct writer (``logs.emit``) writes what the logging machinery would,
and leaves the machinery to any set-up other than its own handler."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.server import logs

FIELDS = {"uid": "u-1", "webhook": "mutate", "kind": "JobSet", "ops": 6, "dryRun": False}


@pytest.fixture
def logger() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger set up as ``configure_logging`` sets up ours, writing to a string."""
    stream = io.StringIO()
    handler = logs.JsonLines(stream)
    handler.setFormatter(logs.JsonFormatter())
    lg = logging.getLogger("karta_webhook_test.logs")
    lg.handlers[:] = [handler]
    lg.setLevel(logging.INFO)
    lg.propagate = False
    yield lg, stream
    lg.handlers[:] = []


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_emit_writes_the_line_the_formatter_writes(
    logger: tuple[logging.Logger, io.StringIO],
) -> None:
    lg, stream = logger
    logs.emit(lg, logging.INFO, "admission", FIELDS)
    lg.info("admission", extra={"fields": FIELDS})  # the same, through a record
    direct, recorded = _lines(stream)
    assert stream.getvalue().count("\n") == 2
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", str(direct["ts"]))
    del direct["ts"], recorded["ts"]
    assert direct == recorded == {"level": "info", "logger": lg.name, "msg": "admission", **FIELDS}


def test_emit_below_the_level_writes_nothing(logger: tuple[logging.Logger, io.StringIO]) -> None:
    lg, stream = logger
    lg.setLevel(logging.WARNING)
    logs.emit(lg, logging.INFO, "admission", FIELDS)
    assert stream.getvalue() == ""


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_emit_leaves_other_handlers_and_filters_to_the_machinery(
    logger: tuple[logging.Logger, io.StringIO],
) -> None:
    lg, stream = logger
    kept = _Kept()
    lg.addHandler(kept)  # another handler: it gets the record, ours still writes the line
    logs.emit(lg, logging.INFO, "admission", FIELDS)
    assert [getattr(r, "fields", None) for r in kept.records] == [FIELDS]
    assert len(_lines(stream)) == 1
    lg.removeHandler(kept)

    lg.handlers[0].addFilter(lambda record: False)  # a filter that drops everything
    logs.emit(lg, logging.INFO, "admission", FIELDS)
    assert len(_lines(stream)) == 1
    lg.handlers[0].filters.clear()

    lg.handlers[0].setFormatter(logging.Formatter("%(message)s"))  # another format
    logs.emit(lg, logging.INFO, "admission", FIELDS)
    assert stream.getvalue().splitlines()[-1] == "admission"


def test_emit_on_a_broken_stream_does_not_raise(logger: tuple[logging.Logger, io.StringIO]) -> None:
    lg, stream = logger
    stream.close()
    raising, logging.raiseExceptions = logging.raiseExceptions, False  # as in production
    try:
        logs.emit(lg, logging.INFO, "admission", FIELDS)
    finally:
        logging.raiseExceptions = raising


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_timestamps_are_the_datetime_ones(t: float) -> None:
    expected = dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds")
    assert logs.timestamp(t) == expected
