"""The jq engine: the syntax and safety screen, plain paths walked natively, the engine
that evaluates batches (natively or in the libjq sandbox) and its bounded memo, the regex
screen.

Imports only webhook.base (and its own subpackage native/).
"""
