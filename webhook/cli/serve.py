"""``karta-webhook serve``: its flags, checking them and the input files, then handing over
to :mod:`webhook.server.run` (gunicorn)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webhook.base.limits import EVAL_TIMEOUT, LIVE_SAMPLES, MAX_LIVE_SAMPLES, THREADS

EXIT_INPUT = 2


def _err(msg: str) -> None:
    print(f"karta-webhook: {msg}", file=sys.stderr)


def add_parser(sub: Any, catalog: Callable[[argparse.ArgumentParser], None]) -> None:
    """The ``serve`` subcommand on ``sub`` (``catalog`` adds the shared ``--catalog``)."""
    s = sub.add_parser("serve", help="run the admission webhooks (gunicorn, TLS)")
    s.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; the manifests pass 0.0.0.0 in a pod)",
    )
    s.add_argument("--port", type=int, default=8443)
    s.add_argument("--tls-cert", metavar="FILE")
    s.add_argument("--tls-key", metavar="FILE")
    catalog(s)
    s.add_argument("--policy", metavar="FILE")
    s.add_argument("--workers", type=int, default=2, metavar="N")
    s.add_argument(
        "--threads",
        type=int,
        default=THREADS,
        metavar="N",
        help="request threads per worker (each with a sandbox child)",
    )
    s.add_argument(
        "--certs-dir",
        default="certs",
        metavar="DIR",
        help="where a development CA and certificate are made when no --tls-cert is given",
    )
    s.add_argument(
        "--validate-timeout",
        type=float,
        default=EVAL_TIMEOUT,
        metavar="SECONDS",
        help="bound on each evaluation of a Karta's jq by the validating webhook",
    )
    s.add_argument(
        "--handshake-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="a connection must finish its TLS handshake this soon after connecting",
    )
    s.add_argument(
        "--request-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="a request (headers and body) must arrive this soon after its first byte",
    )
    s.add_argument(
        "--max-connections",
        type=int,
        default=1000,
        metavar="N",
        help="TLS connections per worker (and 4x as many still sending their ClientHello); "
        "past it the oldest without an answered request, else the least recently used idle "
        "one, is closed",
    )
    s.add_argument(
        "--client-ca",
        metavar="FILE",
        help="require callers of the webhooks to present a certificate signed by this CA",
    )
    s.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve /metrics (and /healthz, /readyz) on this port, plain HTTP, not on --port",
    )
    s.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="cluster to watch Kartas in and keep the webhook rules of (default: in-cluster)",
    )
    s.add_argument(
        "--no-kube",
        action="store_true",
        help="no cluster: serve the catalog and --catalog definitions only",
    )
    s.add_argument(
        "--live-samples",
        type=int,
        default=LIVE_SAMPLES,
        metavar="N",
        help="live objects of a Karta's root kind the validating webhook reads from the "
        f"cluster and checks the definition against (default {LIVE_SAMPLES}, 0: none)",
    )
    s.add_argument(
        "--manage-webhooks",
        type=_true_or_false,
        default=True,
        metavar="true|false",
        help="the leader keeps the rules and caBundle of the webhook configurations "
        "(default true); false leaves them to GitOps, cert-manager or you",
    )
    s.set_defaults(func=cmd_serve)


def _true_or_false(text: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def _ports_problem(args: argparse.Namespace) -> str | None:
    """A port out of range, or one another process listens on: one line naming the flag
    (gunicorn would print a traceback, or retry for 5 s before saying so)."""
    import errno
    import socket

    for flag, port in (("--port", args.port), ("--metrics-port", args.metrics_port)):
        if port is None:
            continue
        if not 0 <= port <= 65535:
            return f"{flag} {port}: a port is 0 (any free one) to 65535"
        if port == 0:
            continue
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
                s.bind((args.host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return f"{flag} {port}: {args.host}:{port} is in use by another process"
            if e.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(
                e, socket.gaierror
            ):
                return f"--host {args.host}: not an address of this machine ({e.strerror or e})"
            return f"{flag} {port}: cannot listen on {args.host}:{port}: {e.strerror or e}"
    return None


def _tls_problem(args: argparse.Namespace) -> str | None:
    """The given certificate and key, read as the server will (see
    :func:`webhook.server.certs.serving_pair_problem`)."""
    if not args.tls_cert:
        return None
    from webhook.server.certs import serving_pair_problem

    return serving_pair_problem(Path(args.tls_cert), Path(args.tls_key))


def _prepare_metrics_dir() -> None:
    """Point ``prometheus_client`` at a directory shared by gunicorn's worker processes.

    This must run before anything imports ``prometheus_client`` (it picks single- or
    multiprocess mode once, at import; :mod:`webhook.server.app` imports it), so it lives here and
    not in the server. A given ``PROMETHEUS_MULTIPROC_DIR`` is emptied of an earlier run's
    files; otherwise (or when it cannot be made or written: metrics never stop the server) a
    temporary one is made and removed when this (master) process exits, also when startup
    fails. Forked workers inherit the hook but skip it.
    """
    import atexit
    import os
    import shutil
    import tempfile

    prom_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if prom_dir:
        try:
            Path(prom_dir).mkdir(parents=True, exist_ok=True)
            for stale in Path(prom_dir).glob("*.db"):
                stale.unlink(missing_ok=True)
            tempfile.TemporaryFile(dir=prom_dir).close()  # writable: the workers' files go here
            return
        except OSError as e:  # metrics are never worth not serving: a directory of our own
            _err(
                f"serve: PROMETHEUS_MULTIPROC_DIR={prom_dir} is unusable ({e.strerror or e}); "
                "metrics go to a temporary directory instead"
            )
    try:
        made = tempfile.mkdtemp(prefix="karta-webhook-metrics-")
    except OSError as e:
        _err(
            f"serve: no directory for metrics ({e}); each worker's /metrics shows its own "
            "requests only"
        )
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        return
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = made
    master = os.getpid()

    def remove() -> None:
        if os.getpid() == master:  # forked workers inherit the hook
            shutil.rmtree(made, ignore_errors=True)

    atexit.register(remove)


def _early_probes(args: argparse.Namespace, cert: Path, key: Path) -> Any:
    """:class:`~webhook.server.early.EarlyProbes` on the server's ports; None (logged) when
    they cannot listen: the load goes on, and gunicorn reports the ports."""
    from webhook.server.early import EarlyProbes
    from webhook.server.run import log

    try:
        return EarlyProbes(args.host, args.port, cert, key, args.metrics_port)
    except (OSError, ValueError) as e:
        log.warning(
            "the probes are not answered while loading", extra={"fields": {"error": str(e)}}
        )
        return None


def cmd_serve(args: argparse.Namespace) -> int:
    """serve [--host H] [--port P] [--tls-cert F --tls-key F] [--catalog DIR]... [--policy F] [--workers N].

    Without TLS flags a development CA and certificate for localhost are made (or reused) in
    ``--certs-dir``. The definitions and the policy are loaded here, before gunicorn forks its
    workers, so a bad file is exit 2 with its message rather than a crashing worker; the
    probes are answered while they load (:mod:`webhook.server.early`).
    """
    if bool(args.tls_cert) != bool(args.tls_key):
        _err("serve: --tls-cert and --tls-key go together")
        return EXIT_INPUT
    if args.workers < 1 or args.threads < 1:
        _err("serve: --workers and --threads must be at least 1")
        return EXIT_INPUT
    if not args.no_kube and args.kubeconfig and not Path(args.kubeconfig).is_file():
        _err(f"serve: {args.kubeconfig}: no such file (--kubeconfig)")
        return EXIT_INPUT
    if not (args.handshake_timeout > 0 and args.request_timeout > 0):
        _err("serve: --handshake-timeout and --request-timeout must be more than 0 seconds")
        return EXIT_INPUT
    if args.max_connections < 1:
        _err("serve: --max-connections must be at least 1")
        return EXIT_INPUT
    if args.metrics_port is not None and args.metrics_port == args.port:
        _err("serve: --metrics-port must differ from --port")
        return EXIT_INPUT
    if not 0 <= args.live_samples <= MAX_LIVE_SAMPLES:
        _err(f"serve: --live-samples must be between 0 and {MAX_LIVE_SAMPLES}")
        return EXIT_INPUT
    problem = _ports_problem(args) or _tls_problem(args)
    if problem:
        _err(f"serve: {problem}")
        return EXIT_INPUT
    _prepare_metrics_dir()
    if args.tls_cert:
        cert, key = Path(args.tls_cert), Path(args.tls_key)
    else:
        from webhook.server.run import dev_certificate

        cert, key = dev_certificate(Path(args.certs_dir), args.port)
    # Checking thousands of --catalog definitions takes minutes (the bundled catalog loads in
    # about a second): the probes are answered meanwhile (/healthz 200, /readyz 503), so the
    # liveness probe never restarts a loading container. Started before the heavy imports.
    early = _early_probes(args, cert, key) if args.catalog else None
    from webhook.admission.rulebook import definition_vet
    from webhook.admission.state import State
    from webhook.karta.loading import samples_dir
    from webhook.karta.samples import SampleIndex
    from webhook.server import logs
    from webhook.server import run as serving

    logs.configure_logging()
    try:
        # A --catalog definition is used only once it passes /validate's checks (one
        # rulebook); a bad file is exit 2 with its message.
        vet = definition_vet(SampleIndex.load([samples_dir()])) if args.catalog else None
        state = State(args.catalog or [], args.policy, watch_cluster=not args.no_kube, vet=vet)
    finally:
        if early is not None:
            early.stop()
    worker_start = (
        []
        if args.no_kube
        else [
            serving.cluster_start(
                args.kubeconfig,
                cert,
                live_samples=args.live_samples,
                manage_webhooks=args.manage_webhooks,
            )
        ]
    )
    if not args.no_kube and (args.kubeconfig or os.environ.get("KUBERNETES_SERVICE_HOST")):
        from webhook.cluster.wiring import namespace_problem

        missing = namespace_problem(args.kubeconfig)
        if missing:
            _err(f"serve: {missing}")
            return EXIT_INPUT
    if not args.no_kube and not args.manage_webhooks:
        serving.log.info(
            "--manage-webhooks=false: the webhook configurations are left as they are "
            "(no rule or caBundle writes); keep them in line yourself",
            extra={"fields": {"event": "webhooks.unmanaged"}},
        )
    try:
        return serving.run(
            state,
            host=args.host,
            port=args.port,
            certfile=cert,
            keyfile=key,
            workers=args.workers,
            threads=args.threads,
            validate_timeout=args.validate_timeout,
            worker_start=worker_start,
            handshake_timeout=args.handshake_timeout,
            request_timeout=args.request_timeout,
            max_connections=args.max_connections,
            client_ca=args.client_ca,
            metrics_port=args.metrics_port,
        )
    except (OSError, ValueError) as e:  # e.g. certificate files that do not load
        _err(f"serve: {e}")
        return EXIT_INPUT
