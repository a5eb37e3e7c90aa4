"""libjq in child processes: the only place untrusted jq runs on libjq.

libjq can neither be interrupted (``def f: f; f`` never returns) nor capped in memory from the
calling thread, and definitions are untrusted. So a :class:`Sandbox` evaluates jq programs in
child processes with an empty environment (nothing for ``$ENV`` or ``env`` to read even if an
expression slipped past the screen), an address-space limit and a wall-clock deadline: a child
that overruns is killed and replaced, so a hostile expression costs one child, never a web
worker. All of one object's expressions go to a child in one message and are compiled there
once (cached in the child) into one program, so libjq parses the object at most once per call.
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
from typing import Any

#: Results one expression may give before it counts as runaway (upstream Karta caps at 1000).
MAX_RESULTS = 1000
#: Bytes of address space for a sandbox child.
MEMORY_LIMIT = 1 << 30

Request = tuple[str, str]  # (expression, mode: "paths" | "values" | "compile")
Reply = dict[str, Any]  # {"out": [...]} or {"error": "..."} (with the partial "out")


class Timeout(Exception):
    """The child did not answer before the deadline."""


def program(batch: Sequence[Request]) -> str:
    """One jq program evaluating every expression of a batch, each under ``try`` so that one
    failing expression does not hide the others, and capped at MAX_RESULTS + 1 results.

    Expressions are put on lines of their own so that a ``#`` comment cannot swallow the
    wrapper, and each is compiled alone first (in :func:`_child_main`) so that one cannot close
    the wrapper's parentheses and splice itself into its neighbours.
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
    import jq

    os.environ.clear()  # unsetenv() each: libjq's $ENV / env see nothing (Python may add LC_CTYPE)

    compiled: dict[tuple[Request, ...], tuple[Any, dict[int, str]]] = {}
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
                compiled[batch] = (jq.compile(program(good)), bad)
            prog, bad = compiled[batch]
            try:
                raw = prog.input_text(req["input"]).first()
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


def _reply(i: int, raw: list[dict[str, Any]], bad: dict[int, str]) -> Reply:
    if i in bad:
        return {"error": bad[i]}
    if len(raw) > MAX_RESULTS:
        return {"error": f"more than {MAX_RESULTS} results"}
    out: list[Any] = []
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
        code = (
            f"import sys; sys.path.insert(0, {root!r}); "
            "from webhook.sandbox import _child_main; _child_main()"
        )
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
                raise Timeout
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise Timeout
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

    A child that overruns its deadline or dies is killed and replaced. The pool belongs to one
    process: after a fork the child processes of the parent are not used (the pool starts over).
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

    def run(self, batch: Sequence[Request], obj: Any, timeout: float) -> list[Reply]:
        """Evaluate ``batch`` on ``obj`` in a child; one reply per request, in order. Never
        raises: a timeout, a dead child or a fatal error is every reply's ``error``."""
        text = json.dumps(obj)
        payload = (json.dumps({"exprs": list(batch), "input": text}) + "\n").encode()
        deadline = time.monotonic() + timeout
        child = self._take()
        try:
            reply = child.call(payload, deadline)
        except Timeout:
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
