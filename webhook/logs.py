"""JSON log lines: one object per line, the record's structured fields as keys."""

from __future__ import annotations

import datetime as _dt
import logging
import sys
from collections.abc import Mapping
from typing import Any

import orjson


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg`` and the record's
    ``fields`` (``logger.info("...", extra={"fields": {...}})``)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            out.update(fields)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def configure_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr for this package's loggers (gunicorn keeps its own format).

    A line is written per admission, so what a record costs counts: the records do not look
    up their caller, thread or multiprocessing name (the logging HOWTO's optimisations; no
    format here shows them). The process id stays: gunicorn's own lines print it."""
    logging._srcfile = None  # no sys._getframe() walk per record
    logging.logThreads = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    pkg = logging.getLogger("karta_webhook")
    pkg.handlers[:] = [handler]
    pkg.setLevel(level)
    pkg.propagate = False
