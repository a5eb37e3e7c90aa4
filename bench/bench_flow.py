"""How a workload object travels through the code on one mutation (issue 24, item 6).

For every bundled sample, :func:`webhook.admission.handlers.mutate_with` runs once under
``sys.setprofile``, after a warm-up run (the per-definition work is done by then, as on a
server). Every call of a function in ``webhook`` that is handed the object or a part of it (an
argument, or an attribute of ``self``, that is one of the object's maps or lists) is recorded
by its module. Printed per sample:

* ``stays``: the runs of consecutive calls in one module (``a > b > a`` is three stays);
* ``modules``: how many modules the object visits;
* ``climbs``: how often it goes back up, to a module of a higher package in the layers of
  ``pyproject.toml`` (``jq.engine`` is above ``jq.native`` and ``jq.paths``): the
  back-and-forth between the layers.

With ``--trace NAME`` (a part of a sample's path) the sequence of stays is printed too; with
``--all`` every call in ``webhook`` is recorded, carrying the object or not.

Run: ``python bench/bench_flow.py [--trace NAME ...] [--all]``. Counts, not times: the same on
every machine.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from bench_mutate import POLICY, SAMPLES  # noqa: E402  # the same samples and policy

from webhook.admission import handlers  # noqa: E402
from webhook.admission.registry import load_registry  # noqa: E402
from webhook.base.documents import read_documents  # noqa: E402
from webhook.base.gvk import GVK  # noqa: E402
from webhook.jq.engine import Engine  # noqa: E402

#: The packages top to bottom (``pyproject.toml``'s layers; siblings share a rank), with the
#: jq engine's own layers inside ``jq``.
LAYERS = [
    ("webhook.cli",),
    ("webhook.server",),
    ("webhook.cluster",),
    ("webhook.admission",),
    ("webhook.mutation", "webhook.validation"),
    ("webhook.workload", "webhook.schema"),
    ("webhook.karta",),
    ("webhook.jq.engine", "webhook.jq.sandbox"),
    ("webhook.jq.native",),
    ("webhook.jq.paths",),
    ("webhook.jq.syntax", "webhook.jq"),
    ("webhook.base",),
]
#: The caller is not counted: the object starts there.
START = "webhook.admission.handlers"


def rank(module: str) -> int:
    for i, names in enumerate(LAYERS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    return -1


def parts(obj: Any) -> set[int]:
    """The ids of the object's maps and lists."""
    found: set[int] = set()
    todo = [obj]
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            found.add(id(x))
            todo.extend(x.values())
        elif isinstance(x, list):
            found.add(id(x))
            todo.extend(x)
    return found


def carries(frame: FrameType, ids: set[int]) -> bool:
    code = frame.f_code
    local = frame.f_locals
    for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
        value = local.get(name)
        if id(value) in ids:
            return True
        if name == "self" and any(id(v) in ids for v in getattr(value, "__dict__", {}).values()):
            return True
        if name == "self" and any(
            id(getattr(value, s, None)) in ids for s in getattr(type(value), "__slots__", ())
        ):
            return True
    return False


def flow(karta: Any, obj: dict[str, Any], engine: Engine, every: bool) -> list[str]:
    """The stays of one mutation of ``obj``."""
    ids = parts(obj)
    calls: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.startswith("webhook.") and module != START and (every or carries(frame, ids)):
            calls.append(module)

    handlers.mutate_with(karta, POLICY, obj, engine)  # the per-definition work, done once
    sys.setprofile(profile)
    try:
        handlers.mutate_with(karta, POLICY, obj, engine)
    finally:
        sys.setprofile(None)
    return [m for i, m in enumerate(calls) if i == 0 or calls[i - 1] != m]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", nargs="*", default=[], help="print these samples' stays")
    ap.add_argument("--all", action="store_true", help="record every call, not only the object's")
    args = ap.parse_args()
    registry = load_registry()
    engine = Engine()
    totals = [0, 0, 0]
    worst = (0, "")
    n = 0
    print(f"{'sample':64} {'stays':>5} {'modules':>7} {'climbs':>6}")
    for path in sorted(SAMPLES.glob("*/*.yaml")):
        for _, obj in read_documents(path):
            karta = registry.lookup(GVK.of(obj)) if isinstance(obj, dict) else None
            if karta is None:
                continue
            stays = flow(karta, obj, engine, args.all)
            climbs = sum(1 for a, b in itertools.pairwise(stays) if rank(b) < rank(a))
            name = f"{path.parent.name}/{path.stem}"
            print(f"{name:64} {len(stays):5} {len(set(stays)):7} {climbs:6}")
            if any(t in str(path) for t in args.trace):
                print("    " + " > ".join(s.removeprefix("webhook.") for s in stays))
            totals = [totals[0] + len(stays), totals[1] + len(set(stays)), totals[2] + climbs]
            worst = max(worst, (climbs, name))
            n += 1
    print(f"{n} samples: {totals[0]} stays, {totals[1]} module visits, {totals[2]} climbs")
    print(f"most climbs: {worst[0]} ({worst[1]})")
    engine.close()


if __name__ == "__main__":
    main()
