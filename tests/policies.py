"""Policies at the edges of the bounds (docs/policy-bounds.md), shared by the tests and
``bench/bench_policy_bounds.py``: the largest ones a policy may be, and the alias-amplified
file that is far past them.
"""

from __future__ import annotations

from typing import Any

from webhook.base.limits import MAX_ANNOTATION_VALUE_BYTES, MAX_POLICY_RULES
from webhook.karta.fields import POLICY_ENTRIES as MAX_POLICY_ENTRIES


def _spread(total: int, parts: int) -> list[int]:
    """``total`` split over ``parts`` as evenly as it goes."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def most_entries() -> dict[str, Any]:
    """Every count at its bound: the most rules, each matching everything, the most labels,
    annotations, nodeSelector keys and tolerations over them, each rule setting
    ``schedulerName`` and ``priorityClassName`` with ``overwrite`` (each rule rewrites them),
    every key distinct (each one an op on every pod template). Values render per instance
    where they can within the byte bound: each rule's first label is ``$(instance)``, so it
    is rendered and checked on every template."""
    n = MAX_POLICY_RULES
    labels = _spread(MAX_POLICY_ENTRIES["labels"], n)
    annotations = _spread(MAX_POLICY_ENTRIES["annotations"], n)
    selectors = _spread(MAX_POLICY_ENTRIES["nodeSelector"], n)
    tolerations = _spread(MAX_POLICY_ENTRIES["tolerations"], n)
    rules = []
    for i in range(n):
        rule: dict[str, Any] = {
            "name": f"r{i}",
            "overwrite": True,
            "schedulerName": f"s{i}",
            "priorityClassName": f"p{i}",
        }
        if labels[i]:
            rule["labels"] = {f"l{i}x{j}": "v" if j else "$(instance)" for j in range(labels[i])}
        if annotations[i]:
            rule["annotations"] = {f"a{i}x{j}": "v" for j in range(annotations[i])}
        if selectors[i]:
            rule["nodeSelector"] = {f"n{i}x{j}": "v" for j in range(selectors[i])}
        if tolerations[i]:
            rule["tolerations"] = [
                {"key": f"t{i}x{j}", "operator": "Exists", "effect": "NoSchedule"}
                for j in range(tolerations[i])
            ]
        rules.append(rule)
    return {"rules": rules}


def most_bytes() -> dict[str, Any]:
    """The bytes bound reached with the largest values: annotations of
    :data:`~webhook.base.limits.MAX_ANNOTATION_VALUE_BYTES` each, one rule each, as many as
    the bound on what a policy may add to a pod template lets in."""
    value = "x" * (MAX_ANNOTATION_VALUE_BYTES - 8)
    return {
        "rules": [{"name": f"r{i}", "annotations": {f"example.com/a{i}": value}} for i in range(7)]
    }


def amplified(rules: int = 1000, labels: int = 950) -> str:
    """About 50 KB of YAML that aliases expand to ``rules`` rules of ``labels`` labels each
    (1,000 x 950: under the YAML reader's node bound)."""
    body = ", ".join(f"k{i:03d}.e.io/l{i:03d}: v{i:03d}" for i in range(labels))
    lines = ["rules:", "- name: r0", f"  labels: &L {{{body}}}"]
    lines += [f"- {{name: r{i}, labels: *L}}" for i in range(1, rules)]
    return "\n".join(lines) + "\n"
