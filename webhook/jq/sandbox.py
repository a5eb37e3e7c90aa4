"""libjq in child processes: the only place untrusted jq runs on libjq.

libjq can neither be interrupted (``def f: f; f`` never returns) nor capped in memory from the
calling thread, and definitions are untrusted. So a :class:`Sandbox` evaluates jq programs in
child processes with an empty environment (nothing for ``$ENV`` or ``env`` to read even if an
expression slipped past the screen), an address-space limit and a wall-clock deadline: a child
that overruns is killed and replaced, so a hostile expression costs one child, never a web
worker. All of one object's expressions go to a child in one message and are compiled there
once (cached in the child) into one program, so libjq parses the object at most once per call.

The pool has a fixed size (one child per thread that may evaluate at once) and is started
ahead: in steady state no child is spawned on the request path, and a child is replaced only
when it is killed. The number of children, their address space and their replies are bounded
(:mod:`webhook.base.limits`), so the memory a worker and its children can use has a ceiling.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import orjson

from webhook.base import jsontext
from webhook.base.depth import pruned
from webhook.base.limits import (
    MAX_RESULTS,
    SANDBOX_DEPTH,
    SANDBOX_MEMORY,
    SANDBOX_PROGRAMS,
    SANDBOX_REPLY_BYTES,
)

Request = tuple[str, str]  # (expression, mode: "paths" | "values" | "compile")
Reply = dict[str, Any]  # {"out": [...]} or {"error": "..."} (with the partial "out")


class Timeout(Exception):
    """The child did not answer before the deadline."""


class TooLarge(Exception):
    """The child's reply is larger than :data:`~webhook.base.limits.SANDBOX_REPLY_BYTES`."""


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
    """The sandbox loop: per request a header line (``{"exprs": [...]}``) and the object's JSON
    on the next line; one JSON reply per line."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (SANDBOX_MEMORY, SANDBOX_MEMORY))
    except (ImportError, ValueError, OSError):
        pass
    nice = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if nice:
        os.nice(nice)
    # Replies are as deep as the inputs (SANDBOX_DEPTH levels): written by jsontext, which never
    # recurses, so the recursion limit is left as it is (from Python 3.12 it would not govern
    # the C codec anyway).
    import jq

    os.environ.clear()  # unsetenv() each: libjq's $ENV / env see nothing (Python may add LC_CTYPE)

    compiled: dict[tuple[Request, ...], tuple[Any, dict[int, str]]] = {}
    while True:
        header = sys.stdin.readline()
        text = sys.stdin.readline()
        if not header or not text:
            return
        try:
            req = json.loads(header)
            batch = tuple((e, m) for e, m in req["exprs"])
            if batch not in compiled:
                bad: dict[int, str] = {}
                for i, (expr, _) in enumerate(batch):
                    try:
                        jq.compile(expr)
                    except ValueError as e:
                        bad[i] = "compile error: " + _first_line(str(e))
                good = [b if i not in bad else (".", b[1]) for i, b in enumerate(batch)]
                if len(compiled) >= SANDBOX_PROGRAMS:
                    compiled.clear()
                compiled[batch] = (jq.compile(program(good)), bad)
            prog, bad = compiled[batch]
            try:
                raw = prog.input_text(text).first()
            except ValueError as e:
                reply: Any = {"fatal": _first_line(str(e))}
            else:
                reply = [_reply(i, r, bad) for i, r in enumerate(raw)]
            line = jsontext.dumps(reply).decode()
        except MemoryError:
            line = json.dumps({"fatal": "out of memory"})
        except Exception as e:  # the protocol must answer every request
            line = json.dumps({"fatal": f"{type(e).__name__}: {e}"})
        sys.stdout.write(line + "\n")
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
            return {
                "error": msg if isinstance(msg, str) else jsontext.dumps(msg).decode(),
                "out": out,
            }
        out.append(item["p"] if "p" in item else item["v"])
    return {"out": out}


def _first_line(msg: str) -> str:
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    return lines[0].removeprefix("jq: error: ") if lines else msg


def encode_input(obj: Any) -> bytes:
    """The object as the child reads it: one line of JSON. Parts nested deeper than
    :data:`~webhook.base.limits.SANDBOX_DEPTH` (libjq parses little more) are null there; plain
    paths, walked natively, still see them."""
    try:
        return orjson.dumps(obj)  # anything orjson encodes is shallow enough
    except orjson.JSONEncodeError:
        pass
    return jsontext.dumps(pruned(obj, SANDBOX_DEPTH))


class _Child:
    def __init__(self, nice: int) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = (
            f"import sys; sys.path.insert(0, {root!r}); "
            "from webhook.jq.sandbox import _child_main; _child_main()"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, str(nice)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},  # nothing to read even if an expression slipped past the screen
            close_fds=True,
        )
        self.buf = b""

    def call(self, header: bytes, text: bytes, deadline: float) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(header + b"\n" + text + b"\n")
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
            if len(self.buf) > SANDBOX_REPLY_BYTES:
                raise TooLarge
        line, _, self.buf = self.buf.partition(b"\n")
        return jsontext.loads(line)

    def signal(self) -> None:
        """SIGKILL, without waiting (the child is reaped by :meth:`reap`)."""
        with contextlib.suppress(OSError):
            self.proc.kill()

    def reap(self) -> None:
        """Wait until the killed child is gone (SIGKILL cannot be ignored) and close its pipes."""
        with contextlib.suppress(OSError):
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def kill(self) -> None:
        self.signal()
        self.reap()


class Sandbox:
    """A fixed-size pool of sandbox children, reused across calls.

    ``size`` children at most, one per caller at a time (a caller beyond that waits for one,
    within its deadline); ``nice`` lowers their CPU priority (the validating webhook's children
    must not take CPU from /mutate). A child that overruns its deadline or dies is killed and a
    replacement started in the background. The pool belongs to one process: after a fork the
    parent's children are not used (the pool starts over).

    The bound holds under any storm of timeouts, kills and closes: a child counts against
    ``size`` from the moment it is about to be started until it has been *reaped* (not merely
    signalled), and a replacement is started only after the child it replaces is gone. A
    :meth:`close` ends a generation: children of an earlier one (in use at the close, or being
    started as replacements) are killed when they come back, never kept. ``peak`` records the
    most children alive at once.
    """

    def __init__(self, size: int = 2, *, nice: int = 0) -> None:
        self.size = max(1, size)
        self.nice = nice
        self._idle: list[_Child] = []
        self._count = 0  # children that may be alive: idle, in use, starting, or being reaped
        self._cond = threading.Condition()
        self._pid = os.getpid()
        self._generation = 0  # advanced by close(): children of an earlier one are not kept
        self._born: dict[_Child, int] = {}  # children alive -> their generation
        self.spawned = 0  # children started, in this process (tests and benchmarks read it)
        self.peak = 0  # the most children alive at once, in this process

    def _forked(self) -> None:
        if self._pid != os.getpid():  # under the lock: a fork left the parent's children
            self._idle, self._count, self._pid, self.spawned = [], 0, os.getpid(), 0
            self._born, self.peak = {}, 0

    def alive(self) -> int:
        """Children started and not yet reaped (the pool's own record)."""
        with self._cond:
            return len(self._born)

    def _spawn(self, generation: int) -> _Child:
        """Start a child; the caller has counted it in ``_count`` already."""
        child = _Child(self.nice)
        with self._cond:
            self.spawned += 1
            self._born[child] = generation
            self.peak = max(self.peak, len(self._born))
        return child

    def _uncount(self, child: _Child | None) -> None:
        """Under the lock: a child (or a start that failed) no longer counts."""
        if child is not None:
            self._born.pop(child, None)
        self._count -= 1
        self._cond.notify()

    def _take(self, deadline: float) -> _Child:
        with self._cond:
            self._forked()
            while not self._idle and self._count >= self.size:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout
                self._cond.wait(left)
            if self._idle:
                return self._idle.pop()
            self._count += 1
            generation = self._generation
        try:
            return self._spawn(generation)
        except BaseException:
            with self._cond:
                self._uncount(None)
            raise

    def _give(self, child: _Child) -> None:
        """Return a healthy child: kept when it belongs to the current generation, else killed
        and reaped before it stops counting."""
        with self._cond:
            if self._pid != os.getpid():
                return  # a child of the parent process (after a fork): not ours to kill
            if self._born.get(child) == self._generation:
                self._idle.append(child)
                self._cond.notify()
                return
        child.kill()
        with self._cond:
            self._uncount(child)

    def _discard(self, child: _Child) -> None:
        """Kill a child that misbehaved; reap it and start its replacement off the request
        path. It counts against the size until it is reaped."""
        if self._pid != os.getpid():
            return  # a child of the parent process (after a fork): not ours to kill
        child.signal()
        threading.Thread(
            target=self._replace, args=(child,), name="karta-sandbox", daemon=True
        ).start()

    def _replace(self, child: _Child) -> None:
        child.reap()
        with self._cond:
            if self._pid != os.getpid():
                return
            current = self._born.get(child) == self._generation
            self._uncount(child)
            if not current or self._count >= self.size:
                return  # closed since, or a caller has started one in its place already
            self._count += 1
            generation = self._generation
        try:
            new = self._spawn(generation)
        except OSError:
            with self._cond:
                self._uncount(None)
            return
        self._give(new)

    def start(self, n: int | None = None) -> None:
        """Start ``n`` children (all ``size`` by default) ahead of the first request (a child
        takes tens of milliseconds to start)."""
        for _ in range(self.size if n is None else min(n, self.size)):
            with self._cond:
                self._forked()
                if self._count >= self.size:
                    return
                self._count += 1
                generation = self._generation
            try:
                child = self._spawn(generation)
            except BaseException:
                with self._cond:
                    self._uncount(None)
                raise
            self._give(child)

    def run(self, batch: Sequence[Request], obj: Any, timeout: float) -> list[Reply]:
        """Evaluate ``batch`` on ``obj`` in a child; one reply per request, in order. Never
        raises: a timeout, a dead child or a fatal error is every reply's ``error``."""
        deadline = time.monotonic() + timeout
        try:
            text = encode_input(obj)
        except (ValueError, TypeError) as e:
            return [{"error": f"cannot encode the object: {e}"}] * len(batch)
        header = json.dumps({"exprs": list(batch)}).encode()
        try:
            child = self._take(deadline)
        except Timeout:
            return [{"error": f"evaluation timed out after {timeout:g}s"}] * len(batch)
        try:
            reply = child.call(header, text, deadline)
        except Timeout:
            self._discard(child)
            return [{"error": f"evaluation timed out after {timeout:g}s"}] * len(batch)
        except TooLarge:
            self._discard(child)
            return [{"error": f"results larger than {SANDBOX_REPLY_BYTES} bytes"}] * len(batch)
        except (EOFError, OSError, ValueError):
            self._discard(child)
            return [
                {"error": "evaluation aborted: the sandbox exited (memory limit exceeded?)"}
            ] * len(batch)
        except BaseException:
            self._discard(child)  # its state is unknown: never reused
            raise
        self._give(child)
        if isinstance(reply, dict):
            return [{"error": str(reply.get("fatal", "evaluation failed"))}] * len(batch)
        return list(reply)

    def close(self) -> None:
        """Kill the idle children and end the generation: children in use now, or being
        started as replacements, are killed when they come back."""
        with self._cond:
            idle, self._idle = self._idle, []
            self._generation += 1
        for c in idle:
            c.kill()
        with self._cond:
            for c in idle:
                self._uncount(c)
