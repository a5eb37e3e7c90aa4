"""The HTTP server: the app and routes, access control, running gunicorn, TLS reload,
certificates, metrics, logs.

Imports webhook.cluster (which it starts in each worker) and below, and its own
transport/.
"""
