"""The jq engine: the syntax and safety screen, plain paths walked natively, the engine
that evaluates batches (natively or in the libjq sandbox), the regex screen. Locations and
their JSON Pointers are webhook.base.pointers's: callers above come here only to evaluate.

Imports only webhook.base (and its own subpackage native/).
"""
