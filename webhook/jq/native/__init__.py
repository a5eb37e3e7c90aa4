"""The native evaluator: the jq subset run in Python, identical to libjq on it
(checked against the real library by tests/jq/test_jqnative.py).

Imports webhook.base and webhook.jq's syntax and paths.
"""
