"""A policy value as a template: the ``$(variable)`` s it may name, how it renders, and the
most bytes it can render to. ``$$`` is a literal ``$`` (as in Kubernetes env expansion).

The model that holds the templates: :mod:`webhook.mutation.policy`; checking them when a
policy is read: :mod:`webhook.mutation.policyvalues`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from webhook.base.limits import VARIABLE_BYTES

VARIABLES = ("workload.name", "workload.namespace", "workload.kind", "component", "instance")
#: The variables read from the namespace's and the workload's metadata (``KEY``: a label or
#: annotation key), decided per request by :func:`webhook.mutation.scope.narrow`: a key that is
#: missing makes the setting not applicable.
CONTEXT_VARIABLES = (
    "namespace.labels['KEY']",
    "namespace.annotations['KEY']",
    "workload.labels['KEY']",
    "workload.annotations['KEY']",
)
#: the variables whose value differs between the instances of one workload
INSTANCE_VARIABLES = ("component", "instance")
_CONTEXT_VAR = re.compile(r"(namespace|workload)\.(labels|annotations)\['([^']*)'\]")
_VAR = re.compile(r"\$\$|\$\(([^)]*)\)")

#: A template as (text, variable or None) pieces: what :func:`join` renders without a regex.
Pieces = tuple[tuple[str, str | None], ...]


def has_variables(template: str) -> bool:
    """Whether ``template`` is not its own value (it names a variable or holds ``$$``)."""
    return _VAR.search(template) is not None


def variables_in(template: str) -> list[str]:
    return [m.group(1) for m in _VAR.finditer(template) if m.group(0) != "$$"]


def context_variable(name: str) -> tuple[str, str, str] | None:
    """``("namespace", "labels", "k")`` for ``namespace.labels['k']``, None for any other name."""
    m = _CONTEXT_VAR.fullmatch(name)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def render(template: str, values: Mapping[str, str]) -> str:
    """Substitute ``$(variable)``; ``$$`` is a literal ``$``."""
    return join(pieces(template), values)


def pieces(template: str) -> Pieces:
    """``template`` as (text, variable or None) pieces (a rule's values are split once, when
    the policy loads)."""
    out: list[tuple[str, str | None]] = []
    text, at = "", 0
    for m in _VAR.finditer(template):
        text += template[at : m.start()]
        at = m.end()
        if m.group(0) == "$$":
            text += "$"
        else:
            out.append((text, m.group(1)))
            text = ""
    text += template[at:]
    if text or not out:
        out.append((text, None))
    return tuple(out)


def join(split: Pieces, values: Mapping[str, str]) -> str:
    """The template of :func:`pieces` ``split`` rendered with ``values``."""
    out = ""
    for text, var in split:  # a few pieces: concatenation is the cheapest way
        out += text + values[var] if var else text
    return out


def longest(template: str) -> int:
    """The most bytes ``template`` renders to: its text, each variable counted at
    :data:`~webhook.base.limits.VARIABLE_BYTES` (the longest Kubernetes name)."""
    if "$" not in template:
        return len(template.encode())
    return sum(len(t.encode()) + (VARIABLE_BYTES if v else 0) for t, v in pieces(template))
