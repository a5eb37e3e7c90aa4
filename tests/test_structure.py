"""The project's structure checks (issue 50, item 5 "the house kept").

* no module under ``webhook/`` is over 400 lines;
* no module docstring under ``webhook/`` is over 25 lines;
* no absolute path of a development machine in the project's text files.

Each check is a function of the project's root, so that the tests at the end of this file can run
it on a small made-up tree and show that it fails when it should.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MAX_MODULE_LINES = 400
MAX_DOCSTRING_LINES = 25

# Where the machine-path check reads: these directories, and the regular files at the top.
SCANNED_DIRS = ("webhook", "tests", "bench", "hack", "docs")

# An absolute path into a development machine: under ``/work``, ``/root``, ``/Users``,
# ``/home/<user>`` or ``C:\Users``. Not when it continues a word, a host or a relative path
# (``github.com/home/x``, ``src/work/x``, ``../root/x``, ``~/work``): the character before the
# slash must not be a word character, ``.``, ``~`` or ``-``. The whole path is taken, so that
# the allow-list below names exact strings.
MACHINE_PATH = re.compile(
    r"(?<![\w.~-])/(?:work|root|Users|home/[^/\s]+)/[^\s'\"`<>()\[\]{},;|]*"
    r"|\b[A-Za-z]:\\{1,2}Users\\[^\s'\"`<>()\[\]{},;|]*"
)

# Paths that match MACHINE_PATH but are not a development machine's, by file and exact string.
# Each one is a reason, not a pattern: any other match, in any file, fails.
ALLOWED_PATHS: frozenset[tuple[str, str]] = frozenset(
    {
        # Inside the built image: the e2e image test lists what the final stage must not keep
        # (pip's cache of the build stage's root user).
        ("tests/e2e/test_image.py", "/" + "root/.cache/pip"),
    }
)


def _relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in (root / "webhook").rglob("*.py") if "__pycache__" not in p.parts)


def oversized_modules(root: Path) -> list[str]:
    """Every module under ``webhook/`` over :data:`MAX_MODULE_LINES` lines, with its count."""
    found = []
    for path in _modules(root):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{_relative(root, path)}: {lines} lines")
    return found


def long_docstrings(root: Path) -> list[str]:
    """Every module docstring under ``webhook/`` over :data:`MAX_DOCSTRING_LINES` lines.

    A docstring's lines are those it spans in the file, its quotes included (as ``wc -l`` of it
    would count): not its text's lines, which miss a closing line of their own and count an
    escaped ``\\n`` as a line break."""
    found = []
    for path in _modules(root):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if ast.get_docstring(tree, clean=False) is None:
            continue
        node = tree.body[0]
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        if lines > MAX_DOCSTRING_LINES:
            found.append(f"{_relative(root, path)}: docstring of {lines} lines")
    return found


def _text_files(root: Path) -> list[Path]:
    """The files the machine-path check reads: text files only, no caches or hidden files."""
    candidates = [p for p in root.iterdir() if p.is_file() and not p.name.startswith(".")]
    for name in SCANNED_DIRS:
        if (root / name).is_dir():
            candidates.extend(p for p in (root / name).rglob("*") if p.is_file())
    files = []
    for path in sorted(candidates):
        parts = path.relative_to(root).parts
        if any(part == "__pycache__" or part.startswith(".") for part in parts):
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def machine_paths(root: Path) -> list[str]:
    """Every development machine's absolute path in the project's text files, as ``file:line``."""
    found = []
    for path in _text_files(root):
        rel = _relative(root, path)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in MACHINE_PATH.finditer(line):
                if (rel, match.group()) not in ALLOWED_PATHS:
                    found.append(f"{rel}:{number}: {match.group()}")
    return found


def test_no_module_over_400_lines() -> None:
    found = oversized_modules(ROOT)
    assert not found, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(found)


def test_every_package_is_in_the_wheel() -> None:
    """pyproject.toml lists the packages the wheel (and so ``pip install .`` and the image) ships:
    a package directory missing there imports in the checkout and nowhere else."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "webhook").rglob("__init__.py")
    }
    assert not found - listed, f"packages not in pyproject.toml's list: {sorted(found - listed)}"


def test_module_docstrings_at_most_25_lines() -> None:
    found = long_docstrings(ROOT)
    assert not found, f"module docstrings over {MAX_DOCSTRING_LINES} lines:\n" + "\n".join(found)


def test_no_machine_paths() -> None:
    found = machine_paths(ROOT)
    assert not found, (
        "absolute paths of a development machine (use a path relative to the project, or add a "
        "legitimate one to ALLOWED_PATHS with its reason):\n" + "\n".join(found)
    )


def test_allowed_paths_are_still_there() -> None:
    """An allow-list entry whose string is gone is stale: it would let the string back anywhere
    in its file unnoticed."""
    stale = [
        f"{file}: {text}"
        for file, text in sorted(ALLOWED_PATHS)
        if not (ROOT / file).is_file() or text not in (ROOT / file).read_text(encoding="utf-8")
    ]
    assert not stale, "ALLOWED_PATHS entries no longer found:\n" + "\n".join(stale)


# The checks themselves: each fails on a made-up tree that breaks its rule, and passes at the limit.


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_oversized_modules_names_each_module_and_its_count(tmp_path: Path) -> None:
    _write(tmp_path, "webhook/at_limit.py", "x = 1\n" * MAX_MODULE_LINES)
    _write(tmp_path, "webhook/pkg/big.py", "x = 1\n" * (MAX_MODULE_LINES + 1))
    _write(tmp_path, "webhook/pkg/__pycache__/cached.py", "x = 1\n" * 1000)
    assert oversized_modules(tmp_path) == ["webhook/pkg/big.py: 401 lines"]


def test_long_docstrings_names_each_module_and_its_count(tmp_path: Path) -> None:
    def module(lines: int) -> str:
        # A docstring spanning ``lines`` lines: the opening line, the body, the closing quotes.
        body = "".join(f"line {i}\n" for i in range(lines - 2))
        return f'"""Summary.\n{body}"""\n\nx = 1\n'

    _write(tmp_path, "webhook/at_limit.py", module(MAX_DOCSTRING_LINES))
    _write(tmp_path, "webhook/long.py", module(MAX_DOCSTRING_LINES + 1))
    _write(tmp_path, "webhook/none.py", "x = 1\n")
    # An escaped newline in the text is not a line of the file.
    _write(tmp_path, "webhook/escaped.py", module(MAX_DOCSTRING_LINES).replace("line 0", "a\\nb"))
    assert long_docstrings(tmp_path) == ["webhook/long.py: docstring of 26 lines"]


def test_machine_paths_finds_planted_paths(tmp_path: Path) -> None:
    home = "/".join(["", "home", "alice", "src", "karta"])
    work = "/".join(["", "work", "wt1", "webhook"])
    mac = "/".join(["", "Users", "bob", "karta"])
    windows = "\\\\".join(["C:", "Users", "carol", "karta"])
    allowed = "/" + "root/.cache/pip"
    _write(tmp_path, "docs/notes.md", f"see {home}/README.md\nrun `cd {work}`\n")
    _write(tmp_path, "bench/run.py", f'OUT = "{mac}"\nWIN = "{windows}"\n')
    # An allowed string is allowed in its own file only.
    _write(tmp_path, "tests/e2e/test_image.py", f'"ls {allowed}"\n')
    _write(tmp_path, "hack/build.sh", f"ls {allowed}\n")
    _write(tmp_path, "README.md", f"clone into {home}, or file://{mac}\n")
    # Not machine paths: URLs, relative paths, the home shorthand, /tmp, a container's /home.
    _write(
        tmp_path,
        "webhook/ok.py",
        '"https://github.com/home/x/y", "src/work/x", "../root/y", "~/work/z", "/tmp/k/x",'
        ' "HOME=/home/nonroot"\n',
    )
    # Binary files, caches and hidden files are not read.
    _write(tmp_path, "tests/__pycache__/x.txt", f"{work}\n")
    _write(tmp_path, "docs/.hidden.md", f"{work}\n")
    (tmp_path / "docs" / "image.bin").write_bytes(f"\0{work}".encode())
    assert machine_paths(tmp_path) == [
        f"README.md:1: {home}",
        f"README.md:1: {mac}",
        f"bench/run.py:1: {mac}",
        f"bench/run.py:2: {windows}",
        f"docs/notes.md:1: {home}/README.md",
        f"docs/notes.md:2: {work}",
        f"hack/build.sh:1: {allowed}",
    ]
