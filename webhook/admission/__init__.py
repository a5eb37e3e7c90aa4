"""Admission: the handlers both webhooks and the CLI call, the AdmissionReview codec, the
definition registry, the webhook configurations, Karta conditions.

Imports every core package (mutation, validation and below); nothing of the server,
the cluster or the CLI.
"""
