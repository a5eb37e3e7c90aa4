"""A workload as its definition sees it: resolution, the describe rendering, the status
category, GPUs.

Imports webhook.karta, webhook.jq and webhook.base.
"""
