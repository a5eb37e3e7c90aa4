"""/mutate latency while clients keep /validate busy (the isolation goal: /mutate p99 under
100 ms while 16 clients send admitted Kartas to /validate).

Starts ``karta-webhook serve`` on loopback (``tests/e2e/running.py``), runs ``--clients``
threads that post every bundled catalog definition to /validate back to back on kept-alive
connections, and meanwhile times a /mutate of the JobSet sample every 20 ms, each on a new
TLS connection (the worst case: it also needs a free request thread to accept it). Prints
/mutate p50/p99/max and how the /validate calls were answered (checked, or 429 busy: past
the one running check and its one waiter per worker, /validate answers busy at once).

Run: ``python bench/bench_validate_load.py [--seconds 10] [--clients 16]``. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "e2e")]

import running  # noqa: E402
from helpers import JOBSET, POLICY, load, review  # noqa: E402


def karta_review(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "run.ai", "version": "v1alpha1", "kind": "Karta"},
            "resource": {"group": "run.ai", "version": "v1alpha1", "resource": "kartas"},
            "operation": "CREATE",
            "name": doc["metadata"]["name"],
            "object": doc,
            "userInfo": {"username": "bench"},
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=16)
    args = ap.parse_args()
    kartas = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "catalog").glob("*.yaml"))]
    with tempfile.TemporaryDirectory(prefix="karta-bench-validate-") as tmp:
        srv = running.start(Path(tmp), POLICY)
        try:
            stop = time.monotonic() + args.seconds
            counts = {"checked": 0, "busy": 0, "other": 0}
            lock = threading.Lock()

            def client(i: int) -> None:
                conn = srv.connect(timeout=30)
                k = 0
                while time.monotonic() < stop:
                    body = json.dumps(karta_review(kartas[(i + k) % len(kartas)]))
                    k += 1
                    conn.request("POST", "/validate", body=body,
                                 headers={"Content-Type": "application/json"})  # fmt: skip
                    r = json.loads(conn.getresponse().read())["response"]
                    code = (r.get("status") or {}).get("code")
                    key = "busy" if code == 429 else "checked" if r["allowed"] else "other"
                    with lock:
                        counts[key] += 1
                conn.close()

            threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
            for t in threads:
                t.start()
            time.sleep(min(1.0, args.seconds / 5))
            body = json.dumps(review(load(JOBSET))).encode()
            lat: list[float] = []
            while time.monotonic() < stop:
                t0 = time.monotonic()
                conn = srv.connect(timeout=30)
                conn.request("POST", "/mutate", body=body,
                             headers={"Content-Type": "application/json"})  # fmt: skip
                conn.getresponse().read()
                conn.close()
                lat.append((time.monotonic() - t0) * 1000)
                time.sleep(0.02)
            for t in threads:
                t.join()
        finally:
            srv.stop()
    lat.sort()
    p99 = lat[max(0, int(len(lat) * 0.99) - 1)]
    print(
        f"/mutate with {args.clients} /validate clients: n={len(lat)} "
        f"p50={statistics.median(lat):.1f} ms p99={p99:.1f} ms max={lat[-1]:.1f} ms"
    )
    print(f"/validate answers: {counts}")
    print(f"goal: /mutate p99 < 100 ms: {'✓' if p99 < 100 else '✗'}")


if __name__ == "__main__":
    main()
