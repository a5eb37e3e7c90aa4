"""The series the webhook exports: each metric's name, help text, labels and how worker
processes' values add up (``multiprocess_mode``).

Writing them without costing an admission (queued, flushed, failures counted) is
:mod:`webhook.server.metrics`, which every caller goes through. Like it, this module must be
imported after ``PROMETHEUS_MULTIPROC_DIR`` is set, when it is.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter(
    "karta_webhook_requests",
    "Admission requests answered, by webhook, object kind, operation and outcome.",
    ["webhook", "kind", "operation", "outcome"],
)
DURATION = Histogram(
    "karta_webhook_request_duration_seconds",
    "Time from reading an admission request to its encoded answer.",
    ["webhook"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
# The CPU budget of an admission, as an operator sees it in a cluster: divided by the rate of
# REQUESTS (of a webhook, or of all), the CPU seconds per admission of its handling, and of
# the whole server.
REQUEST_CPU = Counter(
    "karta_webhook_request_cpu_seconds",
    "CPU seconds of the thread that answered an admission request (a request thread, or the "
    "worker's poller for /mutate) from reading it to its encoded answer (decode, handler, "
    "encode, count, log), by webhook; over "
    "karta_webhook_requests_total of the webhook, the handling's CPU per admission.",
    ["webhook"],
)
SERVER_CPU = Counter(
    "karta_webhook_server_cpu_seconds",
    "CPU seconds of the processes that serve requests (each worker, every thread: TLS, HTTP, "
    "the poller, the handlers; not their jq sandbox children, nor gunicorn's master); over "
    "karta_webhook_requests_total, the server's CPU per admission.",
)
PATCH_OPS = Counter(
    "karta_webhook_patch_operations",
    "JSON Patch operations returned by the mutating webhook, by object kind.",
    ["kind"],
)
MUTATION_FAILURES = Counter(
    "karta_webhook_mutation_failures",
    "Workloads the policy could not be applied to in full (admitted under failureMode open, "
    "denied under closed), by object kind and reason.",
    ["kind", "reason"],
)
# livemax: the largest value among live processes (every worker holds the same definitions,
# give or take a reload in flight); a dead worker's value is dropped by mark_process_dead.
DEFINITIONS = Gauge(
    "karta_webhook_definitions_loaded",
    "Workload definitions (Kartas) currently loaded.",
    multiprocess_mode="livemax",
)

DEFINITIONS_REJECTED = Gauge(
    "karta_webhook_definitions_rejected",
    "Workload definitions not in use because they fail the checks of /validate (or cannot be "
    "read), by origin: file (a --catalog directory) or cluster (a Karta object, which then "
    "has Validated=False).",
    ["origin"],
    multiprocess_mode="livemax",
)

# Configuration health to alert on, as Prometheus' own prometheus_config_last_reload_*: per
# source (catalog, policy, certificates), 1 when its last load succeeded (the server then
# serves it), 0 when it failed (the last good version stays in force), and when that was.
# livemin: a source is failed when any live worker says so.
RELOAD_SUCCESS = Gauge(
    "karta_webhook_config_last_reload_successful",
    "Whether the last load of a configuration source (catalog, policy, certificates) "
    "succeeded: 1 yes, 0 no (the last good version is still served).",
    ["source"],
    multiprocess_mode="livemin",
)
# Set by the leader's gang controller while a rule has gang (docs/policy.md): 0 when the
# cluster does not serve scheduling.k8s.io/v1beta1 podgroups, so no PodGroup is written.
GANG_API = Gauge(
    "karta_webhook_gang_api_served",
    "Whether the cluster serves scheduling.k8s.io/v1beta1 PodGroups, as the leader last found "
    "while a policy rule has gang: 1 yes, 0 no (no PodGroup is written; the gang waits).",
    multiprocess_mode="livemin",
)
RELOAD_TIME = Gauge(
    "karta_webhook_config_last_reload_timestamp_seconds",
    "When a configuration source (catalog, policy, certificates) was last loaded, successfully "
    "or not.",
    ["source"],
    multiprocess_mode="livemax",
)

CONNECTIONS_CUT = Counter(
    "karta_webhook_connections_cut",
    "Connections the server closed or answered itself, by reason: handshake_timeout, "
    "request_timeout, handshake_failed, evicted (connection limit), too_large (body over the "
    "cap, 413), bad_request (framing not HTTP/1.1, 4xx).",
    ["reason"],
)
