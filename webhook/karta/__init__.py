"""The Karta definition: its model, the field tables, instructions, status definitions,
locations, samples, which policy fields a definition carries, and the pod spec a fragmented
definition implies.

Imports webhook.jq and webhook.base.
"""
