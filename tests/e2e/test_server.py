"""``karta-webhook serve`` for real: gunicorn, TLS, two workers, over sockets on 127.0.0.1.

One server for the whole module (it takes a second or two to start). The client verifies the
certificate against the CA for ``karta-webhook.karta-system.svc``, as the API server does when
it calls the Service, while connecting to 127.0.0.1. Tests that change files on disk (the
certificate, the policy) run last.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from helpers import (
    JOBSET,
    JOBSET_KARTA,
    POLICY,
    assert_denied_with_field_paths,
    broken_karta,
    load,
    patch_of,
    review,
)
from running import (
    NAMESPACE,
    SERVER_NAME,
    SERVICE,
    Server,
    free_port,
    serve_env,
    serving,
)

from webhook.server import metrics
from webhook.server.certs import cert_fingerprint, write_certs


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve")
    with serving(tmp, POLICY, ["--workers=2", "--validate-timeout=1"]) as server:
        yield server


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy=bad-policy.yaml"], "invalid policy"),
        (
            ["--tls-cert=bad.crt", "--tls-key=bad.crt"],
            "--tls-cert bad.crt: no PEM certificate in it",
        ),
    ],
)
def test_bad_input_fails_startup_with_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "bad-policy.yaml").write_text("rules: [{name: x, bogus: 1}]\n")
    (tmp_path / "bad.crt").write_text("garbage\n")
    env = serve_env()
    cmd = [sys.executable, "-m", "webhook", "serve", "--no-kube", f"--port={free_port()}", *args]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def schedulers(r: dict[str, Any]) -> set[str]:
    return {op["value"] for op in patch_of(r) if op["path"].endswith("/schedulerName")}


# --------------------------------------------------------------------------------- probes, mutate


def test_probes(srv: Server) -> None:
    assert srv.request("GET", "/healthz") == (200, b"ok\n")
    status, body = srv.request("GET", "/readyz")
    assert status == 200 and json.loads(body)["definitions"] >= 20


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # TLS 1.1 on purpose
def test_tls_below_1_2_is_refused(srv: Server) -> None:
    ctx = ssl.create_default_context(cafile=str(srv.ca))
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    with socket.create_connection(("127.0.0.1", srv.port), 5) as raw, pytest.raises(ssl.SSLError):
        ctx.wrap_socket(raw, server_hostname=SERVER_NAME)


def test_mutate_labels_every_template_and_reinvocation_is_empty(srv: Server) -> None:
    obj = load(JOBSET)
    r = srv.admit("/mutate", review(obj))
    assert r["allowed"] is True
    patched = jsonpatch.apply_patch(obj, patch_of(r))
    templates = [rj["template"]["spec"]["template"] for rj in patched["spec"]["replicatedJobs"]]
    assert len(templates) == 2
    for tpl in templates:
        assert tpl["spec"]["schedulerName"] == "kai-scheduler"
        assert tpl["metadata"]["labels"]["kai.scheduler/queue"] == "research"
        assert tpl["metadata"]["annotations"]["example.com/owner"] == "trainer"
    again = srv.admit("/mutate", review(patched))
    assert again["allowed"] is True and "patch" not in again


def _answers_by_record(srv: Server, requests: list[bytes]) -> list[tuple[bytes, int]]:
    """Send ``requests`` one after another on one TLS connection; for each, its answer and
    how many TLS records it came in (counted on the wire, under the TLS layer)."""
    raw = socket.create_connection(("127.0.0.1", srv.port), 10)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = srv.context().wrap_bio(incoming, outgoing, server_hostname=SERVER_NAME)
    try:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                raw.sendall(outgoing.read())
                data = raw.recv(1 << 16)
                assert data, "closed during the handshake"
                incoming.write(data)
        raw.sendall(outgoing.read())
        out = []
        for request in requests:
            tls.write(request)
            raw.sendall(outgoing.read())
            wire, answer, records = b"", b"", 0
            while not _complete(answer):
                data = raw.recv(1 << 16)
                assert data, f"closed before the answer was complete: {answer[:200]!r}"
                wire += data
                while len(wire) >= 5 and len(wire) >= 5 + int.from_bytes(wire[3:5], "big"):
                    size = 5 + int.from_bytes(wire[3:5], "big")
                    record, wire = wire[:size], wire[size:]
                    incoming.write(record)
                    before = len(answer)
                    with contextlib.suppress(ssl.SSLWantReadError):
                        while chunk := tls.read(1 << 16):
                            answer += chunk
                    records += len(answer) > before  # a session ticket carries no answer
            assert not wire, "bytes after the answer"
            out.append((answer, records))
        return out
    finally:
        raw.close()


def _complete(answer: bytes) -> bool:
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    assert length is not None, head
    return len(body) >= int(length.group(1))


def test_an_answer_is_one_tls_record(srv: Server) -> None:
    """The answer's head and body go out in one write: one TLS record (and one TCP segment)
    for a small answer, not one for the head and one for the body."""
    body = json.dumps(review(load(JOBSET))).encode()
    mutate = (
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    probe = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    answers = _answers_by_record(srv, [probe, mutate, probe, mutate])
    for answer, records in answers:
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
        assert records == 1, answer[:300]
    assert b'"patch":"' in answers[1][0] and answers[2][0].endswith(b"ok\n")
    conn = srv.connect(timeout=5)  # a head without a body goes out as well
    try:
        conn.request("HEAD", "/healthz")
        head = conn.getresponse()
        assert head.status == 200 and head.read() == b""
    finally:
        conn.close()


def _plain(path: bytes, body: bytes, extra: bytes = b"") -> bytes:
    """A POST as the API server sends it (only the fields it sends), with ``extra`` fields."""
    return (
        b"POST %s?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kube-apiserver-admission\r\n"
        b"Content-Length: %d\r\nAccept: application/json, */*\r\n%s"
        b"Content-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n%s"
    ) % (path, len(body), extra, body)


def test_the_direct_path_answers_as_gunicorn_does(srv: Server) -> None:
    """The API server's requests are answered without gunicorn's parser and response (the
    worker's direct path); any other field sends the same request through gunicorn. Both
    give the same bytes but the Date, on one connection kept alive throughout."""
    rv = review(load(JOBSET))
    rv["request"]["uid"] = "fixed"
    karta = review(load(JOBSET_KARTA), resource="kartas")
    karta["request"]["uid"] = "fixed"
    cases = [
        (b"/mutate", json.dumps(rv).encode()),
        (b"/mutate", b"{not json"),
        (b"/validate", json.dumps(karta).encode()),
        (b"/validate", b"[]"),
    ]
    requests = []
    for path, body in cases:
        requests += [_plain(path, body), _plain(path, body, b"X-Via: gunicorn\r\n")]
    answers = _answers_by_record(srv, requests)
    undated = [re.sub(rb"\r\nDate: [^\r]*\r\n", b"\r\n", a) for a, _ in answers]
    for (path, _), direct, general in zip(cases, undated[::2], undated[1::2], strict=True):
        assert direct == general, (path, direct[:300], general[:300])
        assert b"\r\nConnection: keep-alive\r\n" in direct
    assert undated[0].startswith(b"HTTP/1.1 200 OK\r\nServer: gunicorn\r\n")
    assert b'"patch":"' in undated[0] and undated[2].startswith(b"HTTP/1.1 400 ")
    # "Connection: close" is gunicorn's to act on: answered, then the connection closes
    [(closing, _)] = _answers_by_record(srv, [_plain(b"/mutate", b"{}", b"Connection: close\r\n")])
    assert b"\r\nConnection: close\r\n" in closing


def test_big_bodies(srv: Server) -> None:
    obj = load(JOBSET)
    obj["metadata"]["annotations"] = {"example.com/blob": "x" * (4 << 20)}  # ~4 MiB: served
    r = srv.admit("/mutate", review(obj), timeout=30)
    assert patch_of(r)
    status, body = srv.request("POST", "/mutate", b" " * (8 << 20), timeout=30)
    assert status == 413 and b"\n" in body and b"Traceback" not in body


def test_garbage_is_400(srv: Server) -> None:
    status, body = srv.request("POST", "/mutate", b"{not json")
    assert status == 400 and body.decode().count("\n") == 1
    status, _ = srv.request("POST", "/validate", json.dumps({"kind": "AdmissionReview"}).encode())
    assert status == 400


# --------------------------------------------------------------------------------- validate


def test_validate_allows_a_catalog_karta(srv: Server) -> None:
    r = srv.admit("/validate", review(load(JOBSET_KARTA), resource="kartas"))
    assert r["allowed"] is True


def test_validate_denies_an_invalid_karta_with_field_paths(srv: Server) -> None:
    r = srv.admit("/validate", review(broken_karta(), resource="kartas"))
    assert_denied_with_field_paths(r)


def test_endless_validation_does_not_block_mutate(srv: Server) -> None:
    k = load(JOBSET_KARTA)
    k["metadata"]["name"] = "endless"
    child = k["spec"]["structureDefinition"]["childComponents"][0]
    child["scaleDefinition"]["replicasPath"] = "def f: f; f"
    result: dict[str, Any] = {}

    def run() -> None:
        t = time.monotonic()
        result["response"] = srv.admit("/validate", review(k, resource="kartas"), timeout=30)
        result["seconds"] = time.monotonic() - t

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.3)  # the validation is evaluating the endless expression now
    start = time.monotonic()
    r = srv.admit("/mutate", review(load(JOBSET)))
    mutate_seconds = time.monotonic() - start
    t.join(30)
    assert patch_of(r)
    assert "response" in result, "validation did not answer"
    assert result["response"]["allowed"] is False
    assert "timed out" in result["response"]["status"]["message"]
    assert mutate_seconds < result["seconds"]


# --------------------------------------------------------------------------------- connections


def test_idle_tls_connections_do_not_starve_requests(srv: Server) -> None:
    ctx = ssl.create_default_context(cafile=str(srv.ca))
    idle = []
    try:
        for _ in range(20):
            raw = socket.create_connection(("127.0.0.1", srv.port), 5)
            idle.append(ctx.wrap_socket(raw, server_hostname=SERVER_NAME))  # handshake done
        start = time.monotonic()
        r = srv.admit("/mutate", review(load(JOBSET)), timeout=5)
        assert patch_of(r) and time.monotonic() - start < 5
        # and the idle connections still work afterwards
        idle[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        idle[0].settimeout(5)
        assert idle[0].recv(1024).startswith(b"HTTP/1.1 200")
    finally:
        for s in idle:
            s.close()


# --------------------------------------------------------------------------------- metrics, logs


def _sample(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


def _counted(text: str) -> bool:
    req = "karta_webhook_requests_total"
    return (
        _sample(text, req, webhook="mutate", kind="JobSet", outcome="patched") >= 3
        and _sample(text, req, webhook="mutate", kind="JobSet", outcome="unchanged") >= 1
        and _sample(text, req, webhook="mutate", outcome="bad_request") >= 1
        and _sample(text, req, webhook="validate", kind="Karta", outcome="denied") >= 2
        and _sample(text, req, webhook="validate", kind="Karta", outcome="allowed") >= 1
        and _sample(text, "karta_webhook_patch_operations_total", kind="JobSet") > 0
        and _sample(text, "karta_webhook_request_duration_seconds_count", webhook="mutate") >= 5
        # the CPU per admission, derived: the handling's share of the workers' CPU
        and 0
        < _sample(text, "karta_webhook_request_cpu_seconds_total", webhook="mutate")
        < _sample(text, "karta_webhook_server_cpu_seconds_total")
        and _sample(text, "karta_webhook_definitions_loaded") >= 20
    )


def test_metrics_count_the_requests(srv: Server) -> None:
    # Workers write what they counted every FLUSH_EVERY seconds: a scrape answered by one
    # worker has the other's requests by then.
    deadline = time.monotonic() + 10 * metrics.FLUSH_EVERY
    while True:
        status, body = srv.request("GET", "/metrics")
        assert status == 200
        if _counted(body.decode()) or time.monotonic() > deadline:
            break
        time.sleep(metrics.FLUSH_EVERY / 5)
    assert _counted(body.decode()), body.decode()


def test_one_json_log_line_per_admission(srv: Server) -> None:
    rv = review(load(JOBSET))
    srv.admit("/mutate", rv)
    uid = rv["request"]["uid"]
    deadline = time.monotonic() + 5
    while True:
        lines = [ln for ln in srv.log.read_text().splitlines() if uid in ln]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert entry["webhook"] == "mutate" and entry["kind"] == "JobSet"
    assert entry["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert entry["namespace"] == "research" and entry["name"] == "trainer"
    assert entry["operation"] == "CREATE" and entry["outcome"] == "patched"
    assert entry["ops"] > 0 and entry["ms"] >= 0 and entry["ts"]


# --------------------------------------------------------------------------------- reload (last)


def _peer_fingerprint(srv: Server) -> str:
    conn = srv.connect()
    try:
        conn.connect()
        der = conn.sock.getpeercert(binary_form=True)
    finally:
        conn.close()
    return hashlib.sha256(der).hexdigest()


def test_new_certificate_is_served_to_new_connections(srv: Server) -> None:
    old = _peer_fingerprint(srv)
    assert old == cert_fingerprint(srv.certs / "tls.crt")
    keep = srv.connect()
    keep.request("GET", "/healthz")
    assert keep.getresponse().read() == b"ok\n"
    paths = write_certs(srv.certs, SERVICE, NAMESPACE)  # same CA, new key and certificate
    new = cert_fingerprint(paths.cert)
    assert new != old
    deadline = time.monotonic() + 5
    while (seen := _peer_fingerprint(srv)) != new and time.monotonic() < deadline:
        time.sleep(0.1)
    assert seen == new
    keep.request("GET", "/healthz")  # an open connection keeps working
    assert keep.getresponse().read() == b"ok\n"
    keep.close()


def test_policy_change_reaches_the_next_mutate(srv: Server) -> None:
    obj = load(JOBSET)
    assert schedulers(srv.admit("/mutate", review(obj))) == {"kai-scheduler"}
    srv.policy.write_text(POLICY.replace("kai-scheduler", "other-scheduler"))
    deadline = time.monotonic() + 6
    while True:
        # two in a row: both workers have reloaded (each checks once a second)
        got = [schedulers(srv.admit("/mutate", review(obj))) for _ in range(4)]
        if all(g == {"other-scheduler"} for g in got) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert all(g == {"other-scheduler"} for g in got), got


def _stale_everywhere(srv: Server, want: list[str]) -> tuple[int, dict[str, Any]]:
    """/readyz until four answers in a row (both workers, each looking once a second) name
    ``want`` as the stale sources; the last answer."""
    deadline = time.monotonic() + 10
    while True:
        answers = [srv.request("GET", "/readyz") for _ in range(4)]
        if all(json.loads(b)["staleSources"] == want for _, b in answers):
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    status, body = answers[-1]
    return status, json.loads(body)


def _reload_gauge(srv: Server, source: str) -> float:
    status, body = srv.request("GET", "/metrics")
    assert status == 200
    pattern = rf'^karta_webhook_config_last_reload_successful\{{source="{source}"\}} (\S+)$'
    found = re.search(pattern, body.decode(), re.M)
    assert found, body.decode()
    return float(found.group(1))


def _gauges(srv: Server, want: dict[str, float]) -> dict[str, float]:
    """The reload gauges of ``want``'s sources, read until they are ``want`` (each worker
    publishes its own once a second, and /readyz can be answered by one that has looked
    while the other has not yet) or 10 s have passed."""
    deadline = time.monotonic() + 10
    while True:
        got = {source: _reload_gauge(srv, source) for source in want}
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_a_failed_reload_is_a_stale_source_still_ready(srv: Server) -> None:
    """A serving certificate or a policy that no longer loads: the last good one serves on,
    /readyz stays 200 and names the source, the gauge of that source reads 0; both mended,
    nothing is stale and the gauges read 1."""
    cert, policy = srv.certs / "tls.crt", srv.policy
    good_cert, good_policy = cert.read_bytes(), policy.read_text()
    assert _reload_gauge(srv, "certificates") == 1
    try:
        cert.write_text("garbage\n")
        status, body = _stale_everywhere(srv, ["certificates"])
        assert status == 200 and body["ready"] is True and body["staleSources"] == ["certificates"]
        assert _gauges(srv, {"certificates": 0, "policy": 1}) == {"certificates": 0, "policy": 1}
        assert _peer_fingerprint(srv) == cert_fingerprint_of(good_cert)  # the last good one
        policy.write_text("rules: [{name: x, bogus: 1}]\n")
        status, body = _stale_everywhere(srv, ["certificates", "policy"])
        assert status == 200 and body["staleSources"] == ["certificates", "policy"]
        assert _gauges(srv, {"policy": 0}) == {"policy": 0}
    finally:
        cert.write_bytes(good_cert)
        policy.write_text(good_policy)
    status, body = _stale_everywhere(srv, [])
    assert status == 200 and body["staleSources"] == []
    assert _gauges(srv, {"certificates": 1, "policy": 1}) == {"certificates": 1, "policy": 1}


def cert_fingerprint_of(pem: bytes) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem.decode())).hexdigest()
