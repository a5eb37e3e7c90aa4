"""Structural schemas: nodes, the built-in kinds' schemas, CRD reading, defaults and
samples synthesised from a schema.

Imports webhook.jq and webhook.base.
"""
