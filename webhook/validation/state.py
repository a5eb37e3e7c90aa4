"""What every part of checking a Karta shares: its state, recording findings, the budget.

:mod:`webhook.validation.check` orchestrates a check; the rules applied on each sample
(:mod:`webhook.validation.samplerules`) and to write locations (:mod:`webhook.validation.writerules`) are mixins of
:class:`CheckerBase`, which holds the definition, the engine, the budget and the findings.
"""

from __future__ import annotations

import time
from typing import Any

from webhook.jq.engine import Engine, Outcome
from webhook.karta.fields import Mode
from webhook.karta.model import JqField, Karta
from webhook.schema.nodes import Schema
from webhook.validation.structure import Findings

#: At most this many expressions are hunted down one by one after a batch timed out; each
#: costs a full ``timeout``. Past that, checking against further samples stops.
MAX_CULPRITS = 3

TIMED_OUT = "evaluation timed out"
NOT_EVALUATED = "not evaluated"
UNKNOWN = -1  # a component's instance count when its pod-spec path could not be evaluated
#: Findings that depend on a sample's data: on a synthesised sample they are warnings.
DATA_KINDS = frozenset({"shape", "conditions", "ids", "scale", "fails"})


def mode(f: JqField) -> Mode:
    return f.field.mode


def timed_out(o: Outcome) -> bool:
    return bool(o.error and o.error.startswith(TIMED_OUT))


class CheckerBase:
    def __init__(
        self,
        karta: Karta,
        engine: Engine,
        timeout: float,
        budget: float | None,
        schema: Schema | None = None,
    ) -> None:
        self.k = karta
        self.schema = schema
        full = karta.gvk is not None and bool(karta.gvk.version and karta.gvk.kind)
        self.gvk = karta.gvk if full else None
        self.notes: list[str] = []
        self.synthesised = 0
        self.on_synthetic = False  # the sample being judged is synthesised
        self.deferred: list[JqField] = []  # non-plain paths judged at their locations
        self.engine = engine
        self.timeout = timeout
        self.budget = budget
        self.deadline = time.monotonic() + budget if budget is not None else None
        self.found = Findings()
        self.checked = 0
        self._seen: set[tuple[str, str]] = set()
        self._slow: set[str] = set()  # expressions known to overrun
        self._culprits = 0
        self.unrunnable: set[str] = set()
        self.written = {c.name for c in karta.components if c.patterns}
        #: per write field path: what the samples said of its locations' last segment
        self._last_segments: dict[str, Any] = {}

    def err(self, path: str, message: str, kind: str | None = None) -> None:
        """Record an error; with ``kind``, only the first of that kind per field (a broken
        path would otherwise repeat itself once per sample). On a synthesised sample, a
        finding that depends on the data (:data:`DATA_KINDS`) is a warning."""
        if self.on_synthetic and kind in DATA_KINDS:
            self.warn(f"{path}: {message}" if path else message)
            return
        if kind is not None:
            if (path, kind) in self._seen:
                return
            self._seen.add((path, kind))
        self.found.err(path, message)

    def warn(self, message: str) -> None:
        self.found.warn(message)

    def time_left(self, bound: float) -> float:
        """Seconds the next evaluation may take: ``bound``, or less when the budget ends
        sooner (0 when it has ended)."""
        if self.deadline is None:
            return bound
        return max(0.0, min(bound, self.deadline - time.monotonic()))

    def spent(self) -> Outcome:
        return Outcome([], f"{NOT_EVALUATED}: the validation budget of {self.budget:g}s ran out")

    def used(self, f: JqField) -> bool:
        """Whether resolution uses ``f``: not a field of a spec pattern its component does not
        follow (a ``metadataPath`` without ``podSpecPath`` is ignored, so it writes nothing)."""
        if f.field.pattern is None:
            return True
        comp = next((c for c in self.k.components if c.name == f.component), None)
        return comp is None or comp.pattern == f.field.pattern

    def bounded(self, batch: list[tuple[str, Mode]], obj: Any) -> list[Outcome]:
        """One engine call within what is left of the budget; nothing runs once it has ended.
        A batch cut short by the budget (not by its own timeout) is not evaluated."""
        left = self.time_left(self.timeout)
        if left <= 0:
            return [self.spent() for _ in batch]
        results = self.engine.evaluate(batch, obj, timeout=left)
        if left < self.timeout:
            results = [self.spent() if timed_out(o) else o for o in results]
        return results
