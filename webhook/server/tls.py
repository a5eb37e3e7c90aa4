"""The serving certificate (and the CA that signs callers' certificates), reloaded when their
files change."""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("karta_webhook")


class ClientCAError(ValueError):
    """The file given as the client CA does not load."""


class CertReloader:
    """A server TLS context (TLS >= 1.2) rebuilt when the certificate, key or client CA file
    changes.

    With ``client_ca``, a client that presents a certificate must present one that CA signed,
    or the handshake fails; a client without one is let through the handshake (kubelet probes
    present none) and it is for the HTTP side to refuse it what needs authentication
    (:mod:`webhook.server.access`). Only the given CA is trusted: no system store.

    :meth:`context` is gunicorn's ``ssl_context`` hook (its gthread worker calls it for every
    new connection); the context's ``sni_callback`` swaps in the newest context too, so a server
    that built its context once still hands new connections the new certificate. A pair that
    does not load (the key written, the certificate not yet, or garbage) is retried on the next
    connection while the last good context stays in use.

    :attr:`status` says whether the last load succeeded and when (wall-clock seconds), for
    the ``certificates`` source of the reload-health metrics and ``/readyz``; :meth:`poll`
    looks at the files now (the server's reload thread calls it, so a change is noticed, and
    a broken one reported, also while no connection comes).
    """

    def __init__(
        self, certfile: str | Path, keyfile: str | Path, client_ca: str | Path | None = None
    ) -> None:
        self.certfile = str(certfile)
        self.keyfile = str(keyfile)
        self.client_ca = str(client_ca) if client_ca is not None else None
        self._lock = threading.Lock()
        self._stamp: tuple[Any, ...] | None = None
        self._failed: tuple[Any, ...] | None = None
        self._ctx: ssl.SSLContext | None = None
        #: whether the last load of the files succeeded, and when
        self.status: tuple[bool, float] = (True, time.time())
        self.context()  # fail now, not on the first connection, if the files are unusable

    def _stamps(self) -> tuple[Any, ...]:
        out: list[tuple[int, int, int] | None] = []
        for p in (self.certfile, self.keyfile, self.client_ca):
            if p is None:
                continue
            try:
                st = os.stat(p)
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)

    def _build(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.options |= ssl.OP_NO_RENEGOTIATION
        ctx.load_cert_chain(self.certfile, self.keyfile)
        if self.client_ca is not None:
            try:
                ctx.load_verify_locations(cafile=self.client_ca)
            except (OSError, ssl.SSLError) as e:
                why = (e.strerror if isinstance(e, OSError) else None) or e
                raise ClientCAError(f"cannot load client CA {self.client_ca}: {why}") from None
            ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.set_alpn_protocols(["http/1.1"])
        ctx.sni_callback = self._sni
        return ctx

    def context(self) -> ssl.SSLContext:
        stamp = self._stamps()
        ctx = self._ctx
        if ctx is not None and (
            stamp == self._failed or (stamp == self._stamp and self._failed is None)
        ):
            return ctx
        with self._lock:
            if self._ctx is not None and stamp == self._failed:
                return self._ctx
            if self._ctx is not None and stamp == self._stamp:
                # the files are back as they were when they last loaded: that version serves
                self._failed, self.status = None, (True, time.time())
                return self._ctx
            try:
                new = self._build()
            except (OSError, ssl.SSLError, ValueError) as e:
                if self._ctx is None:
                    raise
                if stamp != self._failed:
                    log.error(
                        "new TLS certificate not loaded; serving the previous one",
                        extra={"fields": {"cert": self.certfile, "error": str(e)}},
                    )
                self._failed, self.status = stamp, (False, time.time())
                return self._ctx
            if self._ctx is not None:
                log.info("TLS certificate reloaded", extra={"fields": {"cert": self.certfile}})
            self._ctx, self._stamp, self._failed = new, stamp, None
            self.status = (True, time.time())
            return new

    def poll(self) -> tuple[bool, float]:
        """Look at the files now (loading them if they changed); :attr:`status` after it."""
        self.context()
        return self.status

    def _sni(self, sock: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _ctx: Any) -> None:
        new = self.context()
        if sock.context is not new:
            sock.context = new
