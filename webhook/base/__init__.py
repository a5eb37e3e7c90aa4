"""The bottom layer: limits, errors, names, GVK, JSON text, deep values (a deep thread,
pruning), documents, typed reads.

Imports nothing of webhook but itself.
"""
