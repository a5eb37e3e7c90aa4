"""The bottom layer: limits, errors, names, GVK, JSON text, JSON locations and pointers (reads
at a location, RFC 6901 pointers), a memo bounded in bytes, deep values (a deep thread,
pruning), documents, typed reads.

Imports nothing of webhook but itself.
"""
