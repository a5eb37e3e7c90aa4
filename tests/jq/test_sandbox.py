"""The sandbox pool never has more children than its size (issue 25 item 3): a storm of
concurrent callers whose expressions time out (each kills a child and starts a replacement),
mixed with good calls and with closes of the pool while children are in use or being
replaced. Counted by the pool's own record and by the process's children in /proc.

The storm runs in a fresh interpreter, so that its children are the pool's only ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STORM = r"""
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from webhook.jq.sandbox import Sandbox

SIZE = 4
pool = Sandbox(SIZE)
pool.start()
me = os.getpid()

def children():
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:  # zombies count too
            n += 1
    return n

most = {"proc": 0, "counted": 0}
done = threading.Event()

def watch():
    while not done.is_set():
        most["proc"] = max(most["proc"], children())
        most["counted"] = max(most["counted"], pool._count)
        time.sleep(0.002)

errors = []

def caller(k):
    for i in range(4):
        hostile = (k + i) % 2 == 0
        batch = [("def f: f; f", "values")] if hostile else [(".a", "values")]
        out = pool.run(batch, {"a": 1}, 0.3 if hostile else 20)
        if hostile and "timed out" not in out[0].get("error", ""):
            errors.append(out)
        if not hostile and out[0] != {"out": [1]} and "timed out" not in out[0].get("error", ""):
            errors.append(out)

def closer():
    for _ in range(3):
        time.sleep(0.25)
        pool.close()

w = threading.Thread(target=watch)
w.start()
threads = [threading.Thread(target=caller, args=(k,)) for k in range(12)]
threads.append(threading.Thread(target=closer))
for t in threads:
    t.start()
for t in threads[:-1]:
    t.join()
# a last storm, closed while its replacements are still being started off the request path
last = [threading.Thread(target=caller, args=(k,)) for k in range(8)]
for t in last:
    t.start()
for t in last:
    t.join()
pool.close()
threads[-1].join()
for _ in range(3000):  # the replacements finish in the background: wait for them
    if not any(t.name == "karta-sandbox" for t in threading.enumerate()):
        break
    time.sleep(0.01)
time.sleep(0.05)
done.set()
during = dict(most)
w.join()
print(json.dumps({
    "size": SIZE, "proc": during["proc"], "counted": during["counted"], "peak": pool.peak,
    "spawned": pool.spawned, "alive_after": pool.alive(), "proc_after": children(),
    "count_after": pool._count, "errors": errors[:3],
}))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_storm_of_timeouts_and_closes_never_grows_the_pool_past_its_size() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STORM, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    size = got["size"]
    assert got["errors"] == []
    assert got["spawned"] > size  # the storm did replace children
    assert got["peak"] <= size, got  # the pool's own record: children started, not reaped
    assert got["counted"] <= size, got
    assert got["proc"] <= size, got  # /proc: the process's children, zombies included
    # after a final close nothing is left: no child kept by a closed generation
    assert (got["alive_after"], got["proc_after"], got["count_after"]) == (0, 0, 0), got
