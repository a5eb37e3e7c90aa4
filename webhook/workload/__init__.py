"""A workload as its definition sees it: the locator (a definition compiled once, that finds
where an object keeps its pods), the describe rendering, the status category, GPUs.

Imports webhook.karta, webhook.jq and webhook.base.
"""
