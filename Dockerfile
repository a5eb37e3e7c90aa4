# syntax=docker/dockerfile:1
# karta-webhook image. On a machine with podman and Debian's archive, hack/build-image.sh makes
# the base and builds this; elsewhere:
#   docker build -t ghcr.io/karta-webhook/karta-webhook:0.2.0 .
# BASE_IMAGE is any image with Python 3.11+ at `python3` and its `venv` module: the default
# pulled python:3.11-slim, or hack/build-image.sh's localhost/karta-base:bookworm (Debian
# minbase made with mmdebstrap; no registry needed).
#
# The application lives in a virtual environment under /opt/karta-webhook (bin/ on PATH), in
# two layers: the dependencies at constraints.txt's versions (rebuilt only when that file
# changes), then the project itself (seconds). pip, setuptools, compilers, caches, sources and
# tests stay in the build stages; /opt/karta-webhook/share/ lists what the image holds.

ARG BASE_IMAGE=python:3.11-slim

# The build tools: a virtual environment of its own with pip and setuptools, which never
# reaches the final image.
FROM ${BASE_IMAGE} AS tools
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/build \
 && /opt/build/bin/python -m pip install --quiet --upgrade 'pip==25.1.1' 'setuptools==80.9.0'

# The dependencies, at the versions the test suite runs with (the runtime part of
# constraints.txt is the closure of `pip install .`), into a venv without pip. The kubernetes
# client's asyncio copy (kubernetes/aio, 68 MB) and aiohttp with what only it needs (13 MB) are
# never imported by the webhook, which uses the synchronous client: they are removed, as are
# the dependencies' own tests. Every module is compiled once here (the root is read-only at
# run time, so nothing compiled at start would be kept).
FROM tools AS deps
COPY constraints.txt /tmp/constraints.txt
RUN sed '/^# What the test extras add/,$d' /tmp/constraints.txt > /tmp/runtime.txt \
 && python3 -m venv --without-pip /opt/karta-webhook \
 && /opt/build/bin/python -m pip --python /opt/karta-webhook/bin/python install --quiet \
      --no-deps --only-binary=:all: -r /tmp/runtime.txt \
 && site="$(/opt/karta-webhook/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && rm -rf "$site/kubernetes/aio" \
 && /opt/build/bin/python -m pip --python /opt/karta-webhook/bin/python uninstall --quiet -y \
      aiohttp aiohttp-retry aiosignal aiohappyeyeballs attrs frozenlist multidict propcache yarl \
 && find "$site" -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} + \
 && find "$site" -name 'test_*.py' -delete \
 && /opt/karta-webhook/bin/python -m compileall -q -j 0 "$site" > /dev/null

# The project: built as a wheel with the tools' setuptools, installed into a copy of that
# environment; what the install added (the files changed since the stamp) is gathered under
# /stage for a layer of its own, with the lists of what the image holds: Python distributions
# and, on a Debian base, packages. Sources stay here (only what the package needs is in the
# build context, see .dockerignore).
FROM deps AS code
COPY pyproject.toml README.md /src/
COPY webhook /src/webhook
COPY catalog /src/catalog
RUN /opt/build/bin/python -m pip wheel --quiet --no-deps --no-build-isolation -w /wheels /src \
 && touch /tmp/stamp \
 && /opt/build/bin/python -m pip --python /opt/karta-webhook/bin/python install --quiet \
      --no-deps --no-index /wheels/*.whl \
 && mkdir -p /opt/karta-webhook/share \
 && /opt/karta-webhook/bin/python -c 'import importlib.metadata as m; print("\n".join(sorted(f"{d.name}=={d.version}" for d in m.distributions())))' \
      > /opt/karta-webhook/share/pip-list.txt \
 && { dpkg-query -W -f='${Package}=${Version}\n' 2>/dev/null || true; } \
      > /opt/karta-webhook/share/dpkg-list.txt \
 && mkdir /stage && cd / \
 && find opt/karta-webhook -cnewer /tmp/stamp \( -type f -o -type l \) -print0 \
      | tar --null -cf - -T - | tar -xf - -C /stage

# The image: everything but the two application layers first (cached across rebuilds), then
# the dependencies, then the project.
FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="karta-webhook" \
      org.opencontainers.image.description="Kubernetes admission webhooks driven by Karta workload definitions" \
      org.opencontainers.image.source="https://github.com/karta-webhook/karta-webhook" \
      org.opencontainers.image.licenses="Apache-2.0"
# A home for the non-root user (dev certificates when `serve` runs without TLS flags) and the
# Prometheus multiprocess directory. In the cluster /tmp is an emptyDir (read-only root fs).
RUN install -d -o 65532 -g 65532 -m 0750 /var/lib/karta-webhook \
 && install -d -o 65532 -g 65532 -m 0750 /tmp/metrics
ENV PATH=/opt/karta-webhook/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/karta-webhook \
    PROMETHEUS_MULTIPROC_DIR=/tmp/metrics
WORKDIR /var/lib/karta-webhook
USER 65532:65532
# 8443: the webhook (HTTPS); 9090: /metrics with --metrics-port 9090 (as the chart runs it).
EXPOSE 8443 9090
# No curl in the image: probe with Python. The serving certificate is not checked (the
# container may be serving a certificate for the Service name, not for 127.0.0.1).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import ssl, urllib.request; urllib.request.urlopen('https://127.0.0.1:8443/healthz', context=ssl._create_unverified_context(), timeout=3)"]
ENTRYPOINT ["karta-webhook"]
CMD ["serve", "--host=0.0.0.0"]
COPY --from=deps /opt/karta-webhook /opt/karta-webhook
COPY --from=code /stage/ /
