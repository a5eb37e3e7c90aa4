"""Memory the CRD watch keeps per CRD: the raw schemas versus what ``webhook.cluster.crdsync`` keeps.

A synthetic CRD shaped like the Kubeflow training CRDs: two served versions with the same
schema, four replica specs each holding a full PodTemplateSpec (the schema the ``kubernetes``
client's models describe), every node with a two-sentence description. Sizes are the bytes
of the JSON text and of the Python objects (every distinct dict, list, str and number,
counted once), as read and as kept after :func:`webhook.cluster.crdsync.slim_schema` (descriptions
dropped, equal sub-schemas shared).

Run: ``python bench/bench_crd_memory.py``.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from webhook.cluster.crdsync import slim_schema  # noqa: E402
from webhook.schema.builtin import model_schema  # noqa: E402

PROSE = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
    "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud."
)


def python_bytes(obj: Any, seen: set[int] | None = None) -> int:
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    n = sys.getsizeof(obj)
    if isinstance(obj, dict):
        n += sum(python_bytes(k, seen) + python_bytes(v, seen) for k, v in obj.items())
    elif isinstance(obj, list):
        n += sum(python_bytes(v, seen) for v in obj)
    return n


def described(node: Any) -> Any:
    if isinstance(node, list):
        return [described(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: {n: described(s) for n, s in v.items()} if k == "properties" else described(v)
        for k, v in node.items()
    }
    out["description"] = PROSE
    return out


def main() -> int:
    template = described(json.loads(json.dumps(model_schema("V1PodTemplateSpec"))))
    replica = {
        "type": "object",
        "properties": {"replicas": {"type": "integer"}, "template": template},
    }
    version = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    r: copy.deepcopy(replica) for r in ("chief", "master", "ps", "worker")
                },
            }
        },
    }
    text = json.dumps([version, version])
    read = json.loads(text)  # as the watch decodes it: two separate copies
    table: dict[Any, Any] = {}
    kept = [slim_schema(v, table) for v in read]
    print(f"JSON text of the schemas:     {len(text):>12,} bytes")
    print(f"as read (Python objects):     {python_bytes(read):>12,} bytes")
    print(f"as kept by webhook.cluster.crdsync:   {python_bytes(kept):>12,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
