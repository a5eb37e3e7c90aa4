"""Applying the policy: the policy itself, planning the patch (the general path) and
the fast lane for whole pod templates.

Imports webhook.workload, webhook.karta, webhook.jq and webhook.base; never
webhook.validation (a sibling).
"""
