"""The worker's transport: gunicorn's worker with an event-driven front, the poller's
connections and their HTTP framing, which worker takes the next connection.

Imports nothing of webhook outside itself.
"""
