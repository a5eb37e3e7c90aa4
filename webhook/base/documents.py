"""Reading YAML and JSON documents from text, files and directories.

Every input of the project (definitions, policies, samples, workloads for the CLI, CRDs) is a
stream of YAML documents (YAML is a superset of JSON). They are read here, in one way: as the
API server would read them, into JSON values, with every error naming the file and line. JSON
text is read as JSON (fast, and as deep as the API server accepts); YAML is read with bounds on
nesting and on alias expansion (:mod:`webhook.base.limits`), so a hostile file is an error, not a
traceback or minutes of work in every command.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent

from webhook.base import jsontext, yamlscalars
from webhook.base.errors import InputError
from webhook.base.limits import MAX_JSON_DEPTH, YAML_MAX_DEPTH, YAML_MAX_NODES

#: A document and where it came from: ``file`` for a one-document file, ``file#index`` otherwise.
Document = tuple[str, Any]

SUFFIXES = (".yaml", ".yml", ".json")


class _JsonLoader(yaml.SafeLoader):
    """YAML as the API server reads it: a document becomes JSON, its plain scalars and map keys
    read as go-yaml v2 and sigs.k8s.io/yaml read them (:mod:`webhook.base.yamlscalars`): an
    unquoted ``2024-01-01`` or ``1:20`` is the string kubectl would send, not a ``date`` or 80.

    Bounded: a document nested deeper than :data:`~webhook.base.limits.YAML_MAX_DEPTH`, or with more
    than :data:`~webhook.base.limits.YAML_MAX_NODES` nodes once every alias is expanded (the
    "billion laughs"), is refused while it is read."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._sizes: dict[int, int] = {}  # id(node) -> nodes below it, aliases expanded

    def compose_document(self) -> Any:
        self._depth, self._sizes = 0, {}
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(AliasEvent):
            event: Any = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in the stubs
            anchored = self.anchors.get(event.anchor)
            if anchored is not None and id(anchored) not in self._sizes:
                # The anchored node is still open: an ancestor of this alias. Its value would
                # contain itself, which no JSON (and no Kubernetes object) can.
                raise ComposerError(
                    None,
                    None,
                    f"recursive alias *{event.anchor}: the node it names contains it",
                    event.start_mark,
                )
            return super().compose_node(parent, index)  # the anchored node, counted again above
        self._depth += 1
        if self._depth > YAML_MAX_DEPTH:
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise ComposerError(None, None, f"nested deeper than {YAML_MAX_DEPTH} levels", mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:  # the stubs allow it; a node is always composed here
            return node
        children = node.value if isinstance(node.value, list) else []
        size = 1
        for child in children:
            for n in child if isinstance(child, tuple) else (child,):
                size += self._sizes.get(id(n), 1)
        if size > YAML_MAX_NODES:
            raise ComposerError(
                None,
                None,
                f"more than {YAML_MAX_NODES} nodes with its aliases expanded",
                node.start_mark,
            )
        self._sizes[id(node)] = size
        return node


yamlscalars.install(_JsonLoader)  # plain scalars and map keys as the API server reads them
for _tag in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"):  # when tagged so
    # the stubs type the constructor for SafeConstructor, not its subclasses
    _JsonLoader.add_constructor(_tag, yaml.SafeLoader.construct_yaml_str)  # type: ignore[type-var]


def parse_documents(text: str, label: str) -> list[Document]:
    """Split YAML (a superset of JSON) into documents; errors name the file and line. Empty
    documents are dropped. A JSON document is read as JSON."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            return [(label, jsontext.loads(text))]
        except jsontext.DepthError:
            raise InputError(f"{label}: nested deeper than {MAX_JSON_DEPTH} levels") from None
        except ValueError:
            pass  # YAML's flow style ({a: 1}) or several documents: read as YAML
    try:
        docs = list(yaml.load_all(text, Loader=_JsonLoader))  # a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"{label}: not valid YAML/JSON{where}: {problem}") from e
    except ValueError as e:  # an integer of more digits than Python converts (4,300)
        raise InputError(f"{label}: not valid YAML/JSON: {str(e).split(';')[0]}") from None
    out = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        source = label if len(docs) == 1 else f"{label}#{i}"
        out.append((source, doc))
    return out


def read_documents(path: Path | str) -> list[Document]:
    """Every YAML/JSON document in a file (``-`` is standard input), with a source label
    ``file#index`` for error messages. Empty documents are dropped."""
    name = str(path)
    try:
        text = sys.stdin.read() if name == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{name}: cannot read: {getattr(e, 'strerror', None) or e}") from e
    label = "<stdin>" if name == "-" else name
    return parse_documents(text, label)


def is_document_file(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() in SUFFIXES


def yaml_files(directory: Path) -> list[Path]:
    """YAML/JSON files under a directory, recursively, sorted for a stable order."""
    return sorted(p for p in directory.rglob("*") if is_document_file(p))


def document_files(paths: list[Path], *, recursive: bool = False, what: str = "") -> list[Path]:
    """The files named by ``paths``: a file as is (``-`` for standard input), a directory's
    YAML/JSON files (top level only unless ``recursive``). A path that does not exist is an
    :class:`InputError` (``what`` says which option it came from)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(
                yaml_files(p) if recursive else sorted(filter(is_document_file, p.iterdir()))
            )
        elif p.exists() or str(p) == "-":
            files.append(p)
        else:
            suffix = f" ({what})" if what else ""
            raise InputError(f"{p}: no such file or directory{suffix}")
    return files
