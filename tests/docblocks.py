"""The command blocks of the docs a newcomer follows (README.md, docs/install.md), for the tests
that run them and for the test that holds every block to being run or marked.

A command block is a fenced block whose info string is ``sh``, ``bash``, ``shell`` or
``console``. The line just before it (blank lines aside) says what covers it:

* ``<!-- run-by: ID -->``: a test runs it, reading it with :func:`block` (``block(DOC, "ID")``
  in the test's source, so that the checker finds the test by that call);
* ``<!-- needs: WHY -->``: it needs what a test cannot have (a real cluster with running pods,
  docker, the network for pip), said in WHY.

Blocks may be indented (inside a list item): their text comes back dedented. A test runs them
in :func:`cli_env`, where ``karta-webhook`` is this checkout's CLI.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "docs/install.md")
COMMAND_LANGS = frozenset({"sh", "bash", "shell", "console"})

_FENCE = re.compile(r"^(\s*)(`{3,})(\S*)\s*$")
_MARKER = re.compile(r"^\s*<!--\s*(run-by|needs):\s*(.*?)\s*-->\s*$")
#: How a test names the block it runs: ``block("README.md", "ID")``.
USE = re.compile(r"""\bblock\(\s*["']([^"']+)["']\s*,\s*["']([^"']+)["']""")


@dataclass(frozen=True)
class Block:
    doc: str
    line: int  # 1-based line of the opening fence
    lang: str
    text: str  # dedented, without the fences
    run_by: str | None
    needs: str | None

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


@dataclass(frozen=True)
class Marker:
    doc: str
    line: int
    kind: str
    value: str
    followed_by_block: bool


def parse(doc: str) -> tuple[list[Block], list[Marker]]:
    """Every fenced block of ``doc`` (a path relative to the repository) and every marker."""
    lines = (ROOT / doc).read_text().splitlines()
    blocks: list[Block] = []
    markers: list[Marker] = []
    pending: tuple[int, str, str] | None = None  # the last marker, until a non-blank line
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _MARKER.match(line)
        if m:
            if pending is not None:
                markers.append(Marker(doc, pending[0], pending[1], pending[2], False))
            pending = (i + 1, m.group(1), m.group(2))
            i += 1
            continue
        f = _FENCE.match(line)
        if f:
            _indent, fence, lang = f.groups()
            j = i + 1
            while j < len(lines) and not (
                lines[j].strip().startswith(fence) and lines[j].strip().strip("`") == ""
            ):
                j += 1
            text = textwrap.dedent("\n".join(lines[i + 1 : j])) + "\n"
            run_by = needs = None
            if pending is not None:
                markers.append(Marker(doc, pending[0], pending[1], pending[2], True))
                if pending[1] == "run-by":
                    run_by = pending[2]
                else:
                    needs = pending[2]
                pending = None
            blocks.append(Block(doc, i + 1, lang, text, run_by, needs))
            i = j + 1
            continue
        if line.strip() and pending is not None:
            markers.append(Marker(doc, pending[0], pending[1], pending[2], False))
            pending = None
        i += 1
    if pending is not None:
        markers.append(Marker(doc, pending[0], pending[1], pending[2], False))
    return blocks, markers


def command_blocks(doc: str) -> list[Block]:
    return [b for b in parse(doc)[0] if b.lang in COMMAND_LANGS]


def block(doc: str, ident: str) -> str:
    """The text of the block of ``doc`` marked ``<!-- run-by: ident -->``, as it is written."""
    found = [b for b in parse(doc)[0] if b.run_by == ident]
    if len(found) != 1:
        raise AssertionError(f"{doc}: {len(found)} blocks marked run-by: {ident}, want 1")
    return found[0].text


def console_commands(text: str) -> list[tuple[str, list[str]]]:
    """A ``console`` block as (command, expected output lines): ``$ `` starts a command, a
    line ending in ``\\`` continues it, the lines up to the next command are its output."""
    out: list[tuple[str, list[str]]] = []
    lines = text.rstrip("\n").splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise AssertionError(f"console block: expected a $ command, got {lines[i]!r}")
        cmd = lines[i][2:]
        while cmd.endswith("\\"):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        i += 1
        expected: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        while expected and not expected[-1].strip():
            expected.pop()
        out.append((cmd, expected))
    return out


def matches(expected: list[str], actual: list[str]) -> bool:
    """``actual`` is ``expected`` where a line that is ``...`` alone (indentation aside)
    stands for any number of lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and matches(expected[1:], actual[1:])


def cli_env(tmp: Path) -> dict[str, str]:
    """An environment whose ``karta-webhook`` is this checkout's CLI (as ``pip install .``
    makes it, from the console-script entry point), in ``tmp/bin``."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "karta-webhook"
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nfrom webhook.cli.main import main\nsys.exit(main())\n"
    )
    exe.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env
