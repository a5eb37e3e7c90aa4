"""JSON log lines: one object per line, the record's structured fields as keys.

Logs never cost an admission: a line that cannot be written (the stream closed, broken or
gone) is counted in memory (:func:`failed_writes`; ``serve`` exports it as
``karta_webhook_metrics_failures_total{write="logs"}``) and said once per process, never a
traceback per record, and the request goes on.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import orjson

_failures = 0  # log lines this process could not write
_failures_lock = threading.Lock()


def failed_writes() -> int:
    """Log lines this process could not write."""
    return _failures


def _failed(e: BaseException | None) -> None:
    """Count a line that could not be written; say so once per process, on the original
    stderr (which may be the stream that fails: then nothing is said)."""
    global _failures
    with _failures_lock:
        _failures += 1
        first = _failures == 1
    if first:
        try:
            stream = sys.__stderr__
            if stream is not None:
                line = {
                    "ts": timestamp(time.time()),
                    "level": "error",
                    "logger": "karta_webhook.logs",
                    "msg": "writing logs failed; later failures are only counted",
                    "error": f"{type(e).__name__}: {e}" if e is not None else "unknown",
                }
                stream.write(orjson.dumps(line).decode() + "\n")
                stream.flush()
        except Exception:
            pass


#: the last second :func:`timestamp` formatted, and its text
_second: tuple[int, str] = (-1, "")


def timestamp(created: float) -> str:
    """``datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")``, for a
    time after 1970: the date and time of day are formatted once per second (each line has
    one, and the datetime machinery is slow to run on cold caches), the milliseconds by hand,
    rounded as datetime rounds (to the microsecond, half to even; then cut)."""
    global _second
    frac, whole = math.modf(created)
    us = round(frac * 1e6)
    sec = int(whole)
    if us >= 1_000_000:
        sec, us = sec + 1, us - 1_000_000
    last = _second
    if last[0] != sec:
        last = _second = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return f"{last[1]}.{us // 1000:03d}+00:00"


def _line(created: float, level: str, logger: str, msg: str, fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ts": timestamp(created),
        "level": level,
        "logger": logger,
        "msg": msg,
    }
    if isinstance(fields, Mapping):
        out.update(fields)
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg`` and the record's
    ``fields`` (``logger.info("...", extra={"fields": {...}})``)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        out = _line(
            record.created, record.levelname.lower(), record.name, record.getMessage(), fields
        )
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class JsonLines(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler :func:`configure_logging` installs: JSON lines on a stream. A record its
    stream cannot take is counted (:func:`failed_writes`), not a traceback on stderr."""

    def handleError(self, record: logging.LogRecord) -> None:
        e = sys.exc_info()[1]
        if isinstance(e, OSError) or (isinstance(e, ValueError) and "closed file" in str(e)):
            _failed(e)  # the stream: broken, full or gone (OSError), or closed
        else:  # a record that cannot be formatted is a bug: the usual traceback shows it
            super().handleError(record)


def emit(logger: logging.Logger, level: int, msg: str, fields: Mapping[str, Any]) -> None:
    """What ``logger.log(level, msg, extra={"fields": fields})`` writes, written straight to
    the stream when that is all the logging machinery would do with it: the line reaches only
    a :class:`JsonLines` handler, with no filter on the way. That is the admission line, one
    per request, and a log record with its handlers and filters costs as much as the rest of
    the request (docs/performance.md). Any other set-up (a test's capturing handler,
    an added filter) gets the record as usual."""
    if not logger.isEnabledFor(level):
        return
    handler = _only_handler(logger, level)
    if handler is None:
        logger.log(level, msg, extra={"fields": fields})
        return
    name = logging.getLevelName(level).lower()
    text = orjson.dumps(_line(time.time(), name, logger.name, msg, fields), default=str)
    try:
        with handler.lock:  # type: ignore[union-attr]
            handler.stream.write(text.decode() + handler.terminator)
            handler.stream.flush()
    except Exception as e:  # a closed or broken stream: counted, as the handler does
        _failed(e)


def _only_handler(logger: logging.Logger, level: int) -> JsonLines | None:
    """The one handler a record of ``logger`` at ``level`` would reach, when it is a
    :class:`JsonLines` writing with :class:`JsonFormatter` and nothing on the way filters;
    else None."""
    found: JsonLines | None = None
    cur: logging.Logger | None = logger
    while cur is not None:
        if cur.filters:
            return None
        for h in cur.handlers:
            if level < h.level:
                continue  # it would not write this record
            if (
                type(h) is not JsonLines
                or type(h.formatter) is not JsonFormatter
                or h.filters
                or found is not None
            ):
                return None
            found = h
        if not cur.propagate:
            break
        cur = cur.parent
    return found


def configure_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr for this package's loggers (gunicorn keeps its own format).

    A line is written per admission, so what a record costs counts: the records do not look
    up their caller, thread or multiprocessing name (the logging HOWTO's optimisations; no
    format here shows them). The process id stays: gunicorn's own lines print it."""
    logging._srcfile = None  # no sys._getframe() walk per record
    logging.logThreads = False
    logging.logMultiprocessing = False
    handler = JsonLines(sys.stderr)
    handler.setFormatter(JsonFormatter())
    pkg = logging.getLogger("karta_webhook")
    pkg.handlers[:] = [handler]
    pkg.setLevel(level)
    pkg.propagate = False
