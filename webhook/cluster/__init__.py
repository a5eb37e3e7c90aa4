"""Cluster I/O: API calls, list/watch, the Lease, Karta and CRD sync, the webhook
configuration keeper, Karta status, live samples, read-only access for describe.

Imports webhook.admission and below; webhook.server starts it.
"""
