"""Sample objects that definitions are checked against, by group/version/kind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.base.documents import read_documents, yaml_files
from webhook.base.errors import KartaError
from webhook.base.gvk import GVK
from webhook.karta.model import root_gvk

Sample = tuple[str, Mapping[str, Any]]


@dataclass
class SampleIndex:
    """Sample objects by GVK, loaded once from directories (recursively)."""

    by_gvk: dict[GVK, list[Sample]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: where the samples were read from, for messages
    sources: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, dirs: Sequence[Path]) -> SampleIndex:
        """Every YAML/JSON document under each directory (a file is taken as is); a
        ``kind: List`` contributes its items. Unreadable files are skipped with a warning."""
        index = cls(sources=[str(d) for d in dirs])
        for d in dirs:
            d = Path(d)
            if d.is_dir():
                files = yaml_files(d)
            elif d.is_file():
                files = [d]
            else:
                index.warnings.append(f"{d}: no such directory; no samples from there")
                continue
            for f in files:
                try:
                    docs = read_documents(f)
                except KartaError as e:
                    index.warnings.append(f"sample skipped: {e}")
                    continue
                base = d if d.is_dir() else d.parent
                label = str(f.relative_to(base)) if f.is_relative_to(base) else str(f)
                for source, doc in docs:
                    index.add(label + source[len(str(f)) :], doc)
        return index

    def add(self, source: str, doc: Any) -> None:
        if not isinstance(doc, dict):
            return
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for i, item in enumerate(doc["items"]):
                self.add(f"{source}[{i}]", item)
            return
        gvk = GVK.of(doc)
        if gvk is not None:
            self.by_gvk.setdefault(gvk, []).append((source, doc))

    def for_gvk(self, gvk: GVK) -> list[Sample]:
        return list(self.by_gvk.get(gvk, []))

    def for_definition(self, doc: Any) -> list[Sample]:
        """The samples of a Karta document's root kind, read from the raw document so that
        samples can be chosen before (and whether or not) it parses: none when the root kind
        is not there in full, whatever the document's shape (the check reports that)."""
        gvk = root_gvk(doc)
        return self.for_gvk(gvk) if gvk is not None else []
