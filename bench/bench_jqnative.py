"""Microseconds per evaluation of every catalog expression: native (webhook.jq.native.evaluate) vs libjq.

For each definition of the bundled catalog and each of its jq expressions (status
expressions wrapped in ``(EXPR) | tostring`` as the status code evaluates them), on each sample
of its kind, in the mode the engine uses (``paths`` for the write paths, ``values`` for the
rest): the native program compiled once against libjq compiled once and fed the decoded object
with ``input_value`` — the in-process cost of libjq, before any sandbox round trip.

Run: ``python bench/bench_jqnative.py [--seconds S] [--all]``; without ``--all`` only the
expressions that are not plain paths are listed (plain paths are already native). CPU time,
best of several rounds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from webhook.base.documents import read_documents  # noqa: E402
from webhook.jq.native import evaluate as jqnative  # noqa: E402
from webhook.jq.paths import parse_plain  # noqa: E402
from webhook.karta.fields import WRITE_FRAGMENTS  # noqa: E402
from webhook.karta.loading import catalog_dir, load_files  # noqa: E402
from webhook.karta.model import jq_fields  # noqa: E402

PATH_ROLES = {"podTemplateSpecPath", "podSpecPath", "metadataPath", *WRITE_FRAGMENTS}


def per_call(fn: Callable[[], Any], seconds: float) -> float:
    """Best CPU µs per call over a few rounds of about ``seconds / 5`` each."""
    n = 1
    while True:
        t = time.process_time()
        for _ in range(n):
            fn()
        dt = time.process_time() - t
        if dt > 0.01:
            break
        n *= 4
    reps = max(1, int(n * (seconds / 5) / dt))
    best = float("inf")
    for _ in range(5):
        t = time.process_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.process_time() - t) / reps)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=0.1, help="time per measurement")
    ap.add_argument("--all", action="store_true", help="plain paths too")
    args = ap.parse_args()

    rows = []
    for karta in load_files([catalog_dir()]):
        stem = Path(karta.source.split("#")[0]).stem
        samples = [o for f in sorted((catalog_dir() / "samples" / stem).glob("*.yaml"))
                   for _, o in read_documents(f)]  # fmt: skip
        seen: set[tuple[str, str]] = set()
        for field in jq_fields(karta):
            expr = field.expr
            if field.role == "byExpression.expression":
                expr = f"({expr}\n) | tostring"
            mode = "paths" if field.role in PATH_ROLES else "values"
            if (expr, mode) in seen or (not args.all and parse_plain(expr) is not None):
                continue
            seen.add((expr, mode))
            prog = jqnative.compile(expr)
            lib = jq.compile(f"[path({expr}\n)]" if mode == "paths" else expr)
            for obj in samples:
                if prog is None:
                    native_us = float("nan")
                else:
                    run = prog.paths if mode == "paths" else prog.values

                    def native(run: Any = run, obj: Any = obj) -> Any:
                        try:
                            return run(obj)
                        except jqnative.JqError:
                            return None

                    native_us = per_call(native, args.seconds)

                def libjq(obj: Any = obj, lib: Any = lib) -> Any:
                    try:
                        return lib.input_value(obj).all()
                    except ValueError:
                        return None

                rows.append((stem, mode, expr, native_us, per_call(libjq, args.seconds)))

    print(f"{'µs native':>10} {'µs libjq':>10} {'gain':>6}  mode    kind / expression")
    for stem, mode, expr, n_us, l_us in rows:
        one_line = " ".join(expr.split())
        if len(one_line) > 70:
            one_line = one_line[:67] + "..."
        print(f"{n_us:10.2f} {l_us:10.1f} {l_us / n_us:5.0f}x  {mode:6}  {stem}: {one_line}")
    natives = sorted(r[3] for r in rows)
    gains = sorted(r[4] / r[3] for r in rows)
    print(
        f"\n{len(rows)} (expression, sample) pairs: native median {natives[len(natives) // 2]:.2f} µs,"
        f" max {natives[-1]:.2f} µs; gain median {gains[len(gains) // 2]:.0f}x, min {gains[0]:.0f}x"
    )


if __name__ == "__main__":
    main()
