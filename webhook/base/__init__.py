"""The bottom layer: limits, errors, names, GVK, JSON text, documents, typed reads.

Imports nothing of webhook but itself.
"""
