"""The jq engine: the only module that runs libjq.

Definitions are untrusted, and libjq can neither be interrupted (``def f: f; f`` never returns)
nor capped in memory from the calling thread. So expressions are split two ways:

* **Plain paths** (``.a.b``, ``.a[]``, ``.a[0]``, ``.["k"]`` and pipes of them — nearly every
  path a definition writes through) are walked natively in Python by :mod:`webhook.jqsyntax`.
  That is bounded by the object's size, costs microseconds, and gives exactly libjq's answers.
* **Everything else** runs in libjq inside a *sandbox*: a child process with an empty
  environment and a memory limit, killed when it overruns its wall-clock budget. All of one
  object's non-plain expressions go to the child in one message, compiled there once into one
  program, so the object is parsed by libjq at most once per call of :func:`evaluate`.

Results are :class:`Outcome` values; iterating over an absent (null) list or map — a RayCluster
without ``workerGroupSpecs`` meeting ``.spec.workerGroupSpecs[].template`` — is reported as
``absent``, which callers treat as "nothing here", not as a failure.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook import jqsyntax

Mode = Literal["paths", "values", "compile"]
Token = str | int
Path_ = tuple[Token, ...]

#: Upstream Karta caps a query at 1000 results; so do we (a definition that yields more is
#: almost certainly iterating the wrong thing, and its output would bloat every response).
MAX_RESULTS = 1000
DEFAULT_TIMEOUT = 2.0
MEMORY_LIMIT = 1 << 30  # bytes of address space for a sandbox child

ITERATE_NULL = "Cannot iterate over null"


@dataclass(frozen=True)
class Outcome:
    """What one expression gave on one object.

    ``items`` are values (mode ``values``) or ``(path, value)`` pairs (mode ``paths``).
    ``absent`` is set when evaluation stopped on iterating over null: there is nothing there.
    ``error`` is any other failure (not a path expression, wrong type, timeout, compile error).
    """

    items: list[Any] = field(default_factory=list)
    error: str | None = None
    absent: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class JqTimeout(Exception):
    pass


def screen(expr: str) -> list[str]:
    """Reasons an expression may not run (empty when it may). See :func:`jqsyntax.screen`."""
    return jqsyntax.screen(expr)


_plain_cache: dict[str, tuple[Any, ...] | None] = {}


def plain(expr: str) -> tuple[Any, ...] | None:
    """The parsed steps of a plain path expression, or None (cached: definitions repeat)."""
    try:
        return _plain_cache[expr]
    except KeyError:
        steps = jqsyntax.parse_plain(expr)
        if len(_plain_cache) < 10_000:
            _plain_cache[expr] = steps
        return steps


def getpath(obj: Any, path: Sequence[Token]) -> Any:
    """The value at a location, or None where any step is missing (jq ``getpath``)."""
    cur = obj
    for tok in path:
        if isinstance(cur, dict) and isinstance(tok, str):
            cur = cur.get(tok)
        elif isinstance(cur, list) and isinstance(tok, int) and 0 <= tok < len(cur):
            cur = cur[tok]
        else:
            return None
    return cur


_ESCAPED: dict[str, str] = {}


def pointer(path: Sequence[Token]) -> str:
    """RFC 6901 JSON Pointer of a location (``~`` → ``~0``, ``/`` → ``~1``). Same result as
    :func:`jqsyntax.to_pointer`, with escaped keys memoised: they repeat on every request."""
    parts = []
    for t in path:
        if isinstance(t, int):
            parts.append(str(t))
            continue
        esc = _ESCAPED.get(t)
        if esc is None:
            esc = t.replace("~", "~0").replace("/", "~1")
            if len(_ESCAPED) < 50_000:
                _ESCAPED[t] = esc
        parts.append(esc)
    return "/" + "/".join(parts) if parts else ""


def _native(steps: tuple[Any, ...], mode: Mode, obj: Any) -> Outcome:
    try:
        pairs = jqsyntax.walk(steps, obj)
    except jqsyntax.WalkError as e:
        return Outcome([], None if e.iterates_null else str(e), e.iterates_null)
    if len(pairs) > MAX_RESULTS:
        return Outcome([], f"more than {MAX_RESULTS} results")
    if mode == "values":
        return Outcome([v for _, v in pairs])
    return Outcome(pairs)  # walk's paths are tuples already


def evaluate(
    batch: Sequence[tuple[str, Mode]], obj: Any, *, timeout: float = DEFAULT_TIMEOUT
) -> list[Outcome]:
    """Evaluate every ``(expression, mode)`` of ``batch`` against ``obj``.

    Plain paths are walked natively; the rest go to the sandbox in a single round trip with a
    wall-clock bound of ``timeout`` seconds for all of them together. Never raises on bad
    expressions or objects: every failure is an :class:`Outcome` with ``error`` set.
    """
    out: list[Outcome | None] = [None] * len(batch)
    remote: list[int] = []
    for i, (expr, mode) in enumerate(batch):
        steps = plain(expr)
        if steps is None or mode == "compile":
            remote.append(i)
        else:
            out[i] = _native(steps, mode, obj)
    if remote:
        results = _SANDBOX.run([(batch[i][0], batch[i][1]) for i in remote], obj, timeout)
        for i, res in zip(remote, results, strict=True):
            out[i] = _from_remote(res, batch[i][1], obj)
    return [o if o is not None else Outcome([], "not evaluated") for o in out]


def compile_errors(exprs: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT) -> list[str | None]:
    """Compile each expression with libjq (in the sandbox) without running it; None where it
    compiles. Plain paths are compiled too, so this is the full syntax check."""
    outcomes = evaluate([(e, "compile") for e in exprs], None, timeout=timeout)
    return [o.error for o in outcomes]


def locations(expr: str, obj: Any, *, timeout: float = DEFAULT_TIMEOUT) -> Outcome:
    return evaluate([(expr, "paths")], obj, timeout=timeout)[0]


def values(expr: str, obj: Any, *, timeout: float = DEFAULT_TIMEOUT) -> Outcome:
    return evaluate([(expr, "values")], obj, timeout=timeout)[0]


def _from_remote(res: dict[str, Any], mode: Mode, obj: Any) -> Outcome:
    err = res.get("error")
    items = res.get("out") or []
    if err is not None:
        absent = isinstance(err, str) and err.startswith(ITERATE_NULL)
        return Outcome([], None if absent else str(err), absent)
    if mode == "paths":
        return Outcome([(tuple(p), getpath(obj, p)) for p in items])
    return Outcome(list(items))


# --------------------------------------------------------------------------- the sandbox


def _program(batch: Sequence[tuple[str, str]]) -> str:
    """One jq program evaluating every expression of a batch, each under ``try`` so that one
    failing expression does not hide the others, and capped at MAX_RESULTS + 1 results.

    Expressions are put on lines of their own so that a ``#`` comment cannot swallow the
    wrapper, and each is compiled alone first (see :func:`_compile_batch`) so that one cannot
    close the wrapper's parentheses and splice itself into its neighbours.
    """
    parts = []
    cap = MAX_RESULTS + 1
    for expr, mode in batch:
        if mode == "compile":  # compiled alone in the child; nothing to run
            body = "[]"
        elif mode == "paths":
            body = f"[limit({cap}; try (path(\n{expr}\n) | {{p: .}}) catch {{e: .}})]"
        else:
            body = f"[limit({cap}; try ((\n{expr}\n) | {{v: .}}) catch {{e: .}})]"
        parts.append(body)
    return "[" + ",\n".join(parts) + "]"


def _child_main() -> None:  # pragma: no cover - runs in the sandbox process
    """The sandbox loop: one JSON request per line on stdin, one JSON reply per line."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):
        pass
    import jq  # type: ignore[import-untyped]

    os.environ.clear()  # unsetenv() each: libjq's $ENV / env see nothing (Python may add LC_CTYPE)

    compiled: dict[tuple[tuple[str, str], ...], tuple[Any, dict[int, str]]] = {}
    for line in sys.stdin:
        try:
            req = json.loads(line)
            batch = tuple((e, m) for e, m in req["exprs"])
            if batch not in compiled:
                bad: dict[int, str] = {}
                for i, (expr, _) in enumerate(batch):
                    try:
                        jq.compile(expr)
                    except ValueError as e:
                        bad[i] = "compile error: " + _first_line(str(e))
                good = [b if i not in bad else (".", b[1]) for i, b in enumerate(batch)]
                if len(compiled) > 256:
                    compiled.clear()
                compiled[batch] = (jq.compile(_program(good)), bad)
            program, bad = compiled[batch]
            try:
                raw = program.input_text(req["input"]).first()
            except ValueError as e:
                reply: Any = {"fatal": _first_line(str(e))}
            else:
                reply = [_reply(i, r, bad) for i, r in enumerate(raw)]
        except MemoryError:
            reply = {"fatal": "out of memory"}
        except Exception as e:  # the protocol must answer every line
            reply = {"fatal": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def _reply(i: int, raw: list[dict[str, Any]], bad: dict[int, str]) -> dict[str, Any]:
    if i in bad:
        return {"error": bad[i]}
    if len(raw) > MAX_RESULTS:
        return {"error": f"more than {MAX_RESULTS} results"}
    out = []
    for item in raw:
        if "e" in item:
            msg = item["e"]
            return {"error": msg if isinstance(msg, str) else json.dumps(msg), "out": out}
        out.append(item["p"] if "p" in item else item["v"])
    return {"out": out}


def _first_line(msg: str) -> str:
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    return lines[0].removeprefix("jq: error: ") if lines else msg


class _Child:
    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        code = f"import sys; sys.path.insert(0, {root!r}); from webhook.jqexpr import _child_main; _child_main()"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},  # nothing to read even if an expression slipped past the screen
            close_fds=True,
        )
        self.buf = b""

    def call(self, payload: bytes, deadline: float) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(payload)
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise JqTimeout
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise JqTimeout
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


class Sandbox:
    """A pool of sandbox children, one per concurrent caller, reused across calls.

    A child that overruns its deadline or dies is killed and replaced, so a hostile expression
    costs one child, never a web worker. The pool is per process (children of a forked parent
    are not shared).
    """

    def __init__(self, max_idle: int = 4) -> None:
        self._idle: list[_Child] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._max_idle = max_idle

    def _take(self) -> _Child:
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop()
        return _Child()

    def _give(self, child: _Child) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle and self._pid == os.getpid():
                self._idle.append(child)
                return
        child.kill()

    def warm(self) -> None:
        """Start one child ahead of the first request (a child costs ~50 ms to start)."""
        self._give(self._take())

    def run(
        self, batch: Sequence[tuple[str, str]], obj: Any, timeout: float
    ) -> list[dict[str, Any]]:
        text = json.dumps(obj)
        payload = (json.dumps({"exprs": list(batch), "input": text}) + "\n").encode()
        deadline = time.monotonic() + timeout
        child = self._take()
        try:
            reply = child.call(payload, deadline)
        except JqTimeout:
            child.kill()
            return [{"error": f"evaluation timed out after {timeout:g}s"}] * len(batch)
        except (EOFError, OSError, ValueError):
            child.kill()
            return [
                {"error": "evaluation aborted: the sandbox exited (memory limit exceeded?)"}
            ] * len(batch)
        self._give(child)
        if isinstance(reply, dict):
            return [{"error": str(reply.get("fatal", "evaluation failed"))}] * len(batch)
        return list(reply)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.kill()


_SANDBOX = Sandbox()
warm = _SANDBOX.warm
