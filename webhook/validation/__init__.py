"""Checking a Karta definition: structure, jq, schema fields, the rules run on samples
and on write paths, the report.

Imports webhook.schema, webhook.karta, webhook.jq and webhook.base; never
webhook.mutation (a sibling).
"""
