"""karta-webhook: Kubernetes admission webhooks driven by Karta workload definitions."""

__version__ = "0.2.0"
