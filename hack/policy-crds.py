#!/usr/bin/env python3
"""Write the policy CRDs' rule fields and the chart's values schema's from the field table
(webhook.mutation.policycrd);
``--check``: only say which files differ (exit 1)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from webhook.mutation.policycrd import FILES, VALUES_SCHEMA, regenerate, values_schema  # noqa: E402

stale = []
for name in (*FILES, VALUES_SCHEMA):
    path = ROOT / name
    text = path.read_text()
    new = values_schema(text) if name == VALUES_SCHEMA else regenerate(text, name)
    if new != text:
        stale.append(name)
        if "--check" not in sys.argv:
            path.write_text(new)
print("\n".join(f"{'differs' if '--check' in sys.argv else 'written'}: {n}" for n in stale))
sys.exit(1 if stale and "--check" in sys.argv else 0)
