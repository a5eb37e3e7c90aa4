# syntax=docker/dockerfile:1
# karta-webhook image: docker build -t ghcr.io/karta-webhook/karta-webhook:0.2.0 .
#
# Two stages: the builder installs the project and its dependencies under /install; the final
# image gets only that tree (no pip cache, no build tools, no sources) and runs as 65532.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the package needs (see .dockerignore): pyproject.toml, webhook/, catalog/.
COPY . .
# `jq` ships manylinux wheels for amd64 and arm64; on other platforms it builds libjq from
# source and needs: apt-get install -y build-essential autoconf automake libtool.
RUN pip install --prefix=/install .

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="karta-webhook" \
      org.opencontainers.image.description="Kubernetes admission webhooks driven by Karta workload definitions" \
      org.opencontainers.image.source="https://github.com/karta-webhook/karta-webhook" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /install /usr/local
# A home for the non-root user (dev certificates when `serve` runs without TLS flags) and the
# Prometheus multiprocess directory. In the cluster /tmp is an emptyDir (read-only root fs).
RUN install -d -o 65532 -g 65532 -m 0750 /var/lib/karta-webhook \
 && install -d -o 65532 -g 65532 -m 0750 /tmp/metrics
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/karta-webhook \
    PROMETHEUS_MULTIPROC_DIR=/tmp/metrics
WORKDIR /var/lib/karta-webhook
USER 65532:65532
EXPOSE 8443
# No curl in slim images: probe with Python. The serving certificate is not checked (the
# container may be serving a certificate for the Service name, not for 127.0.0.1).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import ssl, urllib.request; urllib.request.urlopen('https://127.0.0.1:8443/healthz', context=ssl._create_unverified_context(), timeout=3)"]
ENTRYPOINT ["karta-webhook"]
CMD ["serve", "--host=0.0.0.0"]
