"""JSON log lines: one object per line, the record's structured fields as keys."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import sys
from collections.abc import Mapping
from typing import Any


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
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr for this package's loggers (gunicorn keeps its own format)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    pkg = logging.getLogger("karta_webhook")
    pkg.handlers[:] = [handler]
    pkg.setLevel(level)
    pkg.propagate = False
