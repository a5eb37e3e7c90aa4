"""``/mutate`` latency while the server is attacked, and the memory its processes take.

Starts ``karta-webhook serve`` on 127.0.0.1 (2 workers, 4 threads, the default limits) and
runs each attack for a bounded time from a separate process, on loopback only:

* ``slow-headers``: TLS connections that send their headers one byte a second;
* ``slow-bodies``: TLS connections that send full headers, then their body a byte a second;
* ``stalled-handshakes``: TCP connections that send half a ClientHello and stop;
* ``silent-tcp``: TCP connections that never send anything (more than the connection bound
  of both workers together; the kernel holds them, TCP_DEFER_ACCEPT);
* ``over-the-bound``: 11,000 connections, each sending half a ClientHello: more than both
  workers hold, so they must close the oldest to admit new ones;
* ``oversized-bodies``: clients sending 8 MiB bodies (over the 7 MiB cap) back to back.

Each attacker re-opens a connection as soon as the server closes one, so the attack keeps
its strength for the whole period (the attacker runs on the same cores as the server). The
connections the server cut per second, by reason, are printed with each attack. Meanwhile this process plays the API server: a JobSet
review every 20 ms on a kept-alive connection (``keep-alive``), and every fifth one on a new
connection, TLS handshake included (``new conn``). Printed per attack: p50/p99 of both, the
number of failed calls, and the peak RSS of the gunicorn workers and of the jq sandbox
children (sampled from ``/proc`` every 100 ms; per process, and all processes together).
Every attack gets a fresh server, so memory one leaves behind does not count for the next.

Run: ``python bench/bench_hostile.py [--seconds S] [--only NAME ...]``. Goal: ``/mutate`` p99
under 100 ms during every attack on a 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import selectors
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "e2e")]

from helpers import JOBSET, POLICY, load, review  # noqa: E402
from running import SERVER_NAME, Server, raise_fd_limit  # noqa: E402
from serverrun import Calls, Memory, measure, pct, sampled_server  # noqa: E402

SLOW, STALLED, SILENT, OVERSIZED = 300, 300, 2500, 4
#: More than both workers hold together: 2 x (1000 + 4 x 1000 waiting for their ClientHello).
OVER = 11000


# --------------------------------------------------------------------------------- attackers


def _tls(port: int, ctx: ssl.SSLContext) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", port), 5)
    return ctx.wrap_socket(raw, server_hostname=SERVER_NAME)


def _closed(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return socket.socket.recv(sock, 65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _reopening(n: int, open_one: Callable[[], socket.socket], poke: Callable[[Any], None] | None,
               stop: Any) -> None:  # fmt: skip
    """Keep ``n`` connections open: re-open each one the server closes; ``poke`` each once a
    second (a trickled byte)."""
    socks: list[socket.socket | None] = [None] * n
    sel = selectors.DefaultSelector()
    last_poke = 0.0
    while not stop.is_set():
        for i, s in enumerate(socks):
            if s is None and not stop.is_set():
                try:
                    s = socks[i] = open_one()
                    sel.register(s.fileno(), selectors.EVENT_READ, i)
                except OSError:
                    continue
        for key, _ in sel.select(0.2):
            s = socks[key.data]
            if s is not None and _closed(s):
                sel.unregister(key.fd)
                s.close()
                socks[key.data] = None
        if poke is not None and time.monotonic() - last_poke >= 1.0:
            last_poke = time.monotonic()
            for s in socks:
                if s is not None:
                    with contextlib.suppress(OSError, ValueError):
                        poke(s)
    for s in socks:
        if s is not None:
            s.close()


def attack(name: str, port: int, ca: str, stop: Any) -> None:
    ctx = ssl.create_default_context(cafile=ca)
    if name == "slow-headers":

        def open_slow_head() -> socket.socket:
            s = _tls(port, ctx)
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: karta-webhook\r\nX-Slow: ")
            return s

        _reopening(SLOW, open_slow_head, lambda s: s.send(b"a"), stop)
    elif name == "slow-bodies":

        def open_slow_body() -> socket.socket:
            s = _tls(port, ctx)
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n{")
            return s

        _reopening(SLOW, open_slow_body, lambda s: s.send(b" "), stop)
    elif name in ("stalled-handshakes", "over-the-bound"):
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        with contextlib.suppress(ssl.SSLWantReadError):
            ctx.wrap_bio(incoming, outgoing, server_hostname=SERVER_NAME).do_handshake()
        hello = outgoing.read()

        def open_stalled() -> socket.socket:
            s = socket.create_connection(("127.0.0.1", port), 5)
            s.sendall(hello[: len(hello) // 2])
            return s

        _reopening(STALLED if name == "stalled-handshakes" else OVER, open_stalled, None, stop)
    elif name == "silent-tcp":
        _reopening(SILENT, lambda: socket.create_connection(("127.0.0.1", port), 1), None, stop)
    elif name == "oversized-bodies":
        blob = b" " * (8 << 20)

        def flood() -> None:
            while not stop.is_set():
                try:
                    s = _tls(port, ctx)
                    s.settimeout(10)
                    s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                              % len(blob))  # fmt: skip
                    s.sendall(blob)
                    s.recv(4096)
                    s.close()
                except OSError:
                    time.sleep(0.01)

        threads = [threading.Thread(target=flood, daemon=True) for _ in range(OVERSIZED)]
        for t in threads:
            t.start()
        stop.wait()
        for t in threads:
            t.join(15)
    else:
        raise SystemExit(f"unknown attack {name}")


ATTACKS = [
    "slow-headers",
    "slow-bodies",
    "stalled-handshakes",
    "silent-tcp",
    "over-the-bound",
    "oversized-bodies",
]


# --------------------------------------------------------------------------------- the client


def cuts(srv: Server) -> dict[str, float]:
    """``karta_webhook_connections_cut_total`` by reason."""
    _, body = srv.plain("GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("karta_webhook_connections_cut_total{"):
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            out[reason] = float(line.rsplit(" ", 1)[1])
    return out


def run_one(name: str, seconds: float, ramp: float) -> tuple[Calls, Memory, dict[str, int]]:
    """A fresh server, ``name`` attacking it (``none``: nobody), measured for ``seconds``."""
    body = json.dumps(review(load(JOBSET))).encode()
    stop = mp.Event()
    proc = None
    with sampled_server("bench-hostile-", POLICY) as (srv, mem):
        try:
            srv.admit("/mutate", review(load(JOBSET)))  # warm up
            if name != "none":
                proc = mp.Process(target=attack, args=(name, srv.port, str(srv.ca), stop))
                proc.start()
                time.sleep(ramp)
            before, t = cuts(srv), time.monotonic()
            calls = measure(srv, body, seconds)
            after, t = cuts(srv), time.monotonic() - t
            if srv.proc.poll() is not None:
                raise SystemExit(f"the server exited:\n{srv.log.read_text()[-3000:]}")
        finally:
            stop.set()
            if proc is not None:
                proc.join(30)
                if proc.is_alive():
                    proc.kill()
    rate = {k: round((v - before.get(k, 0)) / t) for k, v in after.items()}
    return calls, mem, {k: v for k, v in rate.items() if v}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measured time per attack")
    ap.add_argument("--ramp", type=float, default=3.0, help="attack time before measuring")
    ap.add_argument("--only", nargs="*", choices=ATTACKS, help="these attacks only")
    args = ap.parse_args()
    raise_fd_limit(2 * OVER + 4096)
    mib = 1 << 20
    rows = []
    for name in ["none", *(args.only or ATTACKS)]:
        calls, mem, rate = run_one(name, args.seconds, args.ramp)
        rows.append((name, calls, mem))
        print(
            f"{name:20} keep-alive p50 {pct(calls.keep, 50):>6} p99 {pct(calls.keep, 99):>6}"
            f" | new conn p50 {pct(calls.new, 50):>6} p99 {pct(calls.new, 99):>6} ms"
            f" | failed {calls.failed} | peak RSS worker {mem.worker / mib:.0f} MiB,"
            f" sandbox child {mem.child / mib:.0f} MiB, all {mem.total / mib:.0f} MiB"
            f" | cut/s {rate or 0}",
            flush=True,
        )
    print()
    print("| attack | keep-alive p50 / p99 (ms) | new connection p50 / p99 (ms) | failed |"
          " peak RSS per worker / sandbox child / all (MiB) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    for name, calls, mem in rows:
        print(
            f"| {name} | {pct(calls.keep, 50)} / {pct(calls.keep, 99)} |"
            f" {pct(calls.new, 50)} / {pct(calls.new, 99)} | {calls.failed} |"
            f" {mem.worker / mib:.0f} / {mem.child / mib:.0f} / {mem.total / mib:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
