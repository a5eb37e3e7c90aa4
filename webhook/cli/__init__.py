"""The commands (serve, mutate, describe, validate, test, certs, manifests) and the test
suites of definitions.

The top: imports anything below.
"""
