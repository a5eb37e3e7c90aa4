"""The Karta definition: its model, the field tables, instructions, status definitions,
locations, samples, and which policy fields a definition carries.

Imports webhook.jq and webhook.base.
"""
