"""Every bound the webhook enforces, in one place: deadlines in seconds, sizes in bytes or counts.

An admission webhook is only as good as its worst minute, and anyone who can reach its Service,
write a Karta or create a workload can try to make that minute bad. Each limit here is a
deadline or a size bound, chosen from what the API server itself accepts (so that no object it
would store is refused or left unmutated) and from the webhook configurations' timeout (so that
an answer always arrives in time). Hitting a limit is always an error that says which one,
never a silent skip.
"""

from __future__ import annotations

from typing import Final

# --------------------------------------------------------------------------- requests

#: The API server's limit on a request body (``--max-request-bytes``' default, 3 MiB).
API_REQUEST_BYTES: Final = 3 * 1024 * 1024
#: Our cap on an AdmissionReview body: a little above two objects at the API server's limit
#: (an UPDATE carries the object and its old version).
MAX_BODY: Final = 7 * 1024 * 1024
#: Oversized bodies up to this size are read (and dropped) so that their 413 reaches the client.
DRAIN_LIMIT: Final = 4 * MAX_BODY
#: The API server's JSON decoder accepts nesting this deep (``sigs.k8s.io/json``); so do we.
MAX_JSON_DEPTH: Final = 10_000

# --------------------------------------------------------------------------- deadlines

#: ``timeoutSeconds`` of both webhook configurations (the API server waits this long).
WEBHOOK_TIMEOUT_SECONDS: Final = 5
#: One wall-clock budget for checking a Karta on /validate, comfortably inside the webhook's
#: timeout so that the denial, not the API server's timeout, is what ``kubectl`` shows.
VALIDATE_BUDGET: Final = WEBHOOK_TIMEOUT_SECONDS * 0.6
#: Concurrent /validate checks per worker process; more wait briefly, then are told to retry,
#: so definitions being checked can never take the threads /mutate needs.
VALIDATE_CONCURRENCY: Final = 1
#: Request threads per worker that may wait for a validation slot; past them /validate answers
#: 429 at once (the API server's client retries), so /mutate keeps THREADS - 2 threads free.
VALIDATE_WAITERS: Final = 1
#: How long a /mutate request waits, in a worker that has not yet read every source of policy
#: (policy objects, namespaces, Kartas), for them; then it is denied, never admitted without
#: the policy in force.
SOURCES_WAIT: Final = WEBHOOK_TIMEOUT_SECONDS * 0.6
#: Bound on one evaluation of a batch of expressions in the sandbox.
EVAL_TIMEOUT: Final = 2.0
#: Compiling never runs an expression, but a sandbox child may have to be started first.
COMPILE_TIMEOUT: Final = 5.0

# --------------------------------------------------------------------------- jq

#: Results one expression may give before it counts as runaway. No object the API server
#: accepts has more elements than this, so a path over a long list is never cut short (a JobSet
#: with 3,000 replicated jobs is mutated completely); only a generator that multiplies is.
MAX_RESULTS: Final = API_REQUEST_BYTES // 2
#: A jq expression of a definition, in bytes of text; real ones are well under a kilobyte.
MAX_EXPRESSION_BYTES: Final = 16 * 1024
#: String interpolations nested inside each other (``"\\("\\(...)")"``).
MAX_INTERPOLATION_DEPTH: Final = 32
#: Address space of one sandbox child: libjq parsing a 3 MiB object needs well under this.
SANDBOX_MEMORY: Final = 256 * 1024 * 1024
#: Nesting a sandbox child sees (libjq parses at most ~5,000 levels); deeper parts read as null.
SANDBOX_DEPTH: Final = 2_000
#: Bytes of one sandbox reply (the locations and values of a batch).
SANDBOX_REPLY_BYTES: Final = 64 * 1024 * 1024
#: Compiled programs a sandbox child keeps.
SANDBOX_PROGRAMS: Final = 64

# --------------------------------------------------------------------------- memory

#: Request threads per worker (``serve --threads``): the worker's poller does all waiting on
#: clients, so threads only run complete requests; each has its sandbox child.
THREADS: Final = 4
#: Peak resident memory of one worker serving a 3 MiB object on every thread (measured: 105
#: MiB with 4 threads), with a margin.
WORKER_PEAK_MIB: Final = 128
#: Peak resident memory of one sandbox child evaluating a 3 MiB object (measured: 77 MiB; its
#: address space is capped at SANDBOX_MEMORY), with a margin.
CHILD_PEAK_MIB: Final = 96


#: Memory of one definition loaded in the master before the workers fork, shared with them
#: (bench/bench_memory.py: 24 to 28 KiB each at 500 to 2,000 copies of the JobSet's), with a
#: margin.
DEFINITION_SHARED_KIB: Final = 32
#: What one definition can cost each worker besides: a reload that changes it (or every
#: definition, the worst case) reads it again in each worker (about 45 KiB each); a cluster's
#: Karta is read by each worker's watch likewise. With a margin.
DEFINITION_WORKER_KIB: Final = 56


def memory_limit_mib(workers: int, threads: int = THREADS, definitions: int = 0) -> int:
    """What a pod needs at most: every worker at its peak, and its sandbox children (one per
    request thread, one for validations) all at theirs; and ``definitions`` beyond the
    bundled catalog (``--catalog`` files and cluster Kartas), loaded once and shared, and each
    read again in every worker by a reload that changes them all. The manifests' limit is
    this for the bundled catalog alone."""
    children = threads + VALIDATE_CONCURRENCY
    per_definition_kib = DEFINITION_SHARED_KIB + workers * DEFINITION_WORKER_KIB
    extra = -(-definitions * per_definition_kib // 1024)  # rounded up
    return workers * (WORKER_PEAK_MIB + children * CHILD_PEAK_MIB) + extra


# --------------------------------------------------------------------------- caches

#: Text of parsed plain-path expressions kept, in bytes (definitions repeat on every request).
PLAIN_CACHE_BYTES: Final = 1024 * 1024
#: Escaped JSON Pointer keys kept, in bytes; longer keys are escaped every time.
POINTER_CACHE_BYTES: Final = 1024 * 1024
POINTER_CACHE_KEY: Final = 256
#: Kinds kept parsed (``apiVersion`` and ``kind`` of the objects reviewed), and the longest
#: ``apiVersion`` + ``kind`` kept, in characters: a valid one (a DNS subdomain, a version, a
#: kind name) is far shorter; longer ones, which only an attacker sends, are parsed each time,
#: so the cache holds at most about 200 KB.
GVK_CACHE_ENTRIES: Final = 512
GVK_CACHE_TEXT: Final = 400

# --------------------------------------------------------------------------- documents

#: Nesting of a YAML document (JSON documents may nest to :data:`MAX_JSON_DEPTH`).
YAML_MAX_DEPTH: Final = 256
#: Nodes of one YAML document with every alias expanded (a "billion laughs" stops here).
YAML_MAX_NODES: Final = 2_000_000

# --------------------------------------------------------------------------- policies

# A policy is input too: written by a platform team today, by namespaces' teams once policy
# objects come. Real platforms need dozens of rules and tens of labels; each bound below is
# about ten times that, and together they keep the worst policy within them inside the
# /mutate latency goal and the documented memory (bench/bench_policy_bounds.py). Every one is
# counted while the document is read (aliases expanded), so a policy past one is refused
# before any work in proportion to its size (docs/policy-bounds.md).

#: Rules of one policy.
MAX_POLICY_RULES: Final = 200
#: What one rule sets: each label, annotation, nodeSelector key and toleration counts one, so
#: do ``schedulerName`` and ``priorityClassName``.
MAX_RULE_SETTINGS: Final = 64
#: Entries of each map or list field over all the rules of a policy: each field's
#: ``max_entries`` (:data:`webhook.karta.fields.INJECTABLES`).
#: Values a rule's ``match`` lists (each kind, namespace, component and instance pattern, each
#: selector label and expression value), in one rule and over the rules: each is tried on
#: every request (an instance pattern on every pod template).
MAX_MATCH_VALUES: Final = 64
MAX_POLICY_MATCH_VALUES: Final = 512
#: Bytes of one annotation value, as written and as rendered (label values, names and keys
#: have the API server's own, shorter bounds).
MAX_ANNOTATION_VALUE_BYTES: Final = 4096
#: What a ``$(variable)`` is counted at when a value's rendered size is bounded: the longest
#: Kubernetes name (an object's, a DNS subdomain); a namespace or a kind is shorter.
VARIABLE_BYTES: Final = 253
#: Bytes every rule together may add to one pod template (keys and values, rendered at their
#: longest, as if every rule matched it): an eighth of the 256 KiB of annotations the API
#: server allows an object, so the workload keeps the rest for its own.
MAX_POLICY_ADDED_BYTES: Final = 32 * 1024
#: The API server's bound on one object's annotations, keys and values together
#: (``TotalAnnotationSizeLimitB`` of apimachinery's ``ValidateAnnotations``).
API_ANNOTATIONS_BYTES: Final = 256 * 1024
#: An int64 field's range (``tolerationSeconds``): what the API server's decoder accepts.
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

# --------------------------------------------------------------------------- validation

#: Constants of a definition's write paths tried as metadata values (``"evil"`` in
#: ``if .metadata.name == "evil" then ...``); each is one more evaluation per sample.
MAX_PROBE_VALUES: Final = 8
#: Field names and strings of those paths added as label and annotation keys of a probe.
MAX_PROBE_KEYS: Final = 32
#: A synthesised sample (no real one of the kind exists) has at most this many values.
MAX_SYNTHESISED_NODES: Final = 2000

# --------------------------------------------------------------------------- test suites

#: Test-suite files one ``karta-webhook test`` run reads (a directory is searched for them).
MAX_SUITE_FILES: Final = 1000
#: Cases (inputs) in one test-suite file.
MAX_SUITE_CASES: Final = 1000

# --------------------------------------------------------------------------- cluster

#: CRDs per list request of the CRD watch: a CRD can be hundreds of kilobytes, so a page of
#: 50 keeps the decoded page (the only moment a whole CRD is in memory) to tens of megabytes.
CRD_PAGE_SIZE: Final = 50
#: Live objects of a Karta's root kind /validate reads by default (``serve --live-samples``).
LIVE_SAMPLES: Final = 20
#: The most ``--live-samples`` may ask for: each object may be as large as the API server
#: accepts, and all of them are read and checked within the validation budget.
MAX_LIVE_SAMPLES: Final = 50
#: Bound on reading live objects, part of :data:`VALIDATE_BUDGET` (the check gets the rest).
LIVE_SAMPLES_TIMEOUT: Final = VALIDATE_BUDGET / 3
#: Errors quoted in a Karta's ``Validated`` condition, and the bound on its message.
STATUS_ERRORS: Final = 3
STATUS_MESSAGE_CHARS: Final = 2048
#: Bytes of the one list response that carries the live objects (larger: none are used).
LIVE_SAMPLES_BYTES: Final = 16 * 1024 * 1024
