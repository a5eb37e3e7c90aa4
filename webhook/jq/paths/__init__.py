"""Plain jq paths, natively: parsing them and walking them as libjq's ``path()`` would.

Nearly every path a definition writes through is "plain" (``.spec.replicatedJobs[].template``).
libjq re-parses the whole object for every call, which dominates admission latency, so
:func:`parse_plain` recognises plain paths and :func:`walk` evaluates them on the already
decoded object in place. Results and error messages are those of libjq's ``path(EXPR)``
(libjq 1.8, as bundled with the ``jq`` Python package), checked against libjq by
``tests/jq/test_jqpath.py``. A path it gives is a location
(:data:`webhook.base.pointers.Path_`); JSON Pointers of locations are :mod:`webhook.base.pointers`'s.

No libjq import here: this package must be usable where libjq is only available in a sandboxed
child process. Its modules, bottom up:

* ``steps``: the steps of a plain path (:class:`Key`, :class:`Index`, :class:`Iterate`,
  :class:`Guard`);
* ``parse``: recognising plain paths from jq's tokens;
* ``messages``: libjq's error messages (kind names, dumps, truncation);
* ``walk``: the walk of a path, step by step, with libjq's errors;
* ``runs``: paths of keys and iterations walked level by level, several at once.
"""

from __future__ import annotations

from webhook.jq.paths.messages import escape, trunc
from webhook.jq.paths.parse import chain_expression, parse_guarded, parse_plain
from webhook.jq.paths.runs import GuardedRun, Run, segments, walk_objects, walk_shared
from webhook.jq.paths.steps import GStep, Guard, Index, Iterate, Key, Step
from webhook.jq.paths.walk import WalkError, walk

__all__ = [
    "GStep",
    "Guard",
    "GuardedRun",
    "Index",
    "Iterate",
    "Key",
    "Run",
    "Step",
    "WalkError",
    "chain_expression",
    "parse_guarded",
    "parse_plain",
    "segments",
    "walk",
    "walk_objects",
    "walk_shared",
]

#: The message helpers under the names :mod:`webhook.jq.native.ops` imports them by.
_escape = escape
_trunc = trunc
