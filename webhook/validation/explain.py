"""``validate --explain``: what each path of a definition matched on each sample, so a user
sees which paths did work: the count and the first locations (paths) or values."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from webhook.base.pointers import to_pointer
from webhook.jq.engine import Outcome
from webhook.karta.model import JqField
from webhook.validation.state import mode

#: At most this many locations or values are shown per path and sample.
SHOWN: Final = 3
_LIMIT: Final = 60


def explain(
    fields: Sequence[JqField], outs: Mapping[tuple[str, str], Outcome], label: str
) -> list[str]:
    """One line per field: ``PATH on SAMPLE: N match(es): first, …`` (or why none)."""
    lines = []
    for f in fields:
        out = outs.get((f.expr, mode(f)))
        if out is None:
            continue
        where = f"{f.path} on {label}"
        if not out.ok:
            lines.append(f"{where}: error: {out.error}")
            continue
        shown = [_show(item, mode(f) == "paths") for item in out.items[:SHOWN]]
        more = ", …" if len(out.items) > SHOWN else ""
        count = len(out.items)
        lines.append(
            f"{where}: {count} match{'es' if count != 1 else ''}"
            + (f": {', '.join(shown)}{more}" if shown else (" (absent)" if out.absent else ""))
        )
    return lines


def _show(item: Any, paths: bool) -> str:
    if paths and isinstance(item, tuple | list) and item and isinstance(item[0], list | tuple):
        tokens = item[0]
        if all(isinstance(t, str | int) for t in tokens):  # a slice's token is an object
            return to_pointer(tokens) or "/"
        item = tokens
    text = json.dumps(item, default=str, ensure_ascii=False)
    return text if len(text) <= _LIMIT else text[: _LIMIT - 1] + "…"
