"""The outcome of checking one Karta definition, and its two renderings: the lines ``validate``
prints and the message the validating webhook denies with."""

from __future__ import annotations

from dataclasses import dataclass, field

from webhook.base.errors import FieldError
from webhook.base.gvk import GVK

NO_SAMPLE = "no sample found: only structure and jq were checked"


@dataclass(frozen=True)
class Report:
    """The outcome of :func:`check` for one definition."""

    source: str
    name: str
    gvk: GVK | None
    errors: list[FieldError]
    warnings: list[str]
    samples: int  # how many real samples were checked
    #: what was checked how (the schema used, which samples were real, which synthesised)
    notes: list[str] = field(default_factory=list)
    synthesised: int = 0  # how many samples synthesised from the schema were checked
    #: per workload-side path, per sample: what it matched (``validate --explain``)
    explained: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def lines(self) -> list[str]:
        """The report as ``validate`` prints it: ``OK <name> (<group>/<version> <Kind>): …`` or
        ``INVALID <name>``, then one indented line per error, per warning and per note."""
        name = self.name or self.source
        gvk = f" ({self.gvk})" if self.gvk else ""
        warnings = [w for w in self.warnings if not (self.samples == 0 and w == NO_SAMPLE)]
        if self.errors:
            head = f"INVALID {name}"
        elif self.samples:
            head = f"OK {name}{gvk}: checked against {self.samples} sample(s)"
        elif self.synthesised:
            head = f"OK {name}{gvk}: no samples found; checked against a sample synthesised from the schema"
        else:
            head = f"OK {name}{gvk}: no samples found; checked structure and jq only"
        return [
            head,
            *(f"  {e}" for e in self.errors),
            *(f"  warning: {w}" for w in warnings),
            *(f"  note: {n}" for n in self.notes),
        ]

    def denial(self, name: str) -> str:
        """The report as the validating webhook's denial message: every error, one line."""
        details = "; ".join(str(e) for e in self.errors)
        return f'Karta "{name}" is invalid: {details or "invalid definition"}'
