"""Admission: the handlers both webhooks and the CLI call, the rulebook a definition is judged
by (its schema, one Karta per kind, the vet before use), the AdmissionReview codec, the
definition registry, the state a request sees and its reloads from files, the webhook
configurations, Karta conditions.

Imports every core package (mutation, validation and below); nothing of the server,
the cluster or the CLI.
"""
