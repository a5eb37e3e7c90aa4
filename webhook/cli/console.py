"""What every command shares: the exit codes, messages on stderr, printing YAML and JSON,
and the catalog with the ``--catalog`` directories on top.

Exit codes: 0 success, 1 a finding (an invalid definition, a document with no definition), 2
unusable input (a file that cannot be read or parsed, a bad policy or catalog) — always with a
message naming the file and the problem, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import orjson
import yaml

from webhook.admission.registry import Registry, load_catalogs
from webhook.admission.rulebook import definition_vet
from webhook.base import jsontext
from webhook.karta.loading import samples_dir
from webhook.karta.samples import SampleIndex

EXIT_OK, EXIT_FINDING, EXIT_INPUT = 0, 1, 2


def err(msg: str) -> None:
    print(f"karta-webhook: {msg}", file=sys.stderr)


def dump_yaml(docs: Sequence[Any]) -> str:
    text: str = yaml.safe_dump_all(
        docs, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    return text


def print_json(value: Any) -> None:
    """Indented JSON; a document nested past what orjson indents is printed compact (the
    stdlib's indenting encoder is quadratic in the depth)."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        try:  # deeper than orjson writes: the iterative encoder (no recursion limit involved)
            text = jsontext.dumps(value).decode()
        except (ValueError, TypeError):  # a key or value JSON has no type for: said as text
            text = json.dumps(value, ensure_ascii=False, default=str)
    print(text)


def print_data(value: Any, output: str) -> None:
    """``-o json`` or ``-o yaml`` of one value."""
    if output == "json":
        print_json(value)
    else:
        sys.stdout.write(dump_yaml([value]))


def registry(args: argparse.Namespace) -> Registry:
    """The bundled catalog with the ``--catalog`` directories on top. A definition there that
    cannot be read or fails ``/validate``'s checks is named on stderr and left out; the others
    are used, the command does its work, and it exits 1 (:func:`webhook.cli.main.main`)."""
    extra = args.catalog or []
    vet = definition_vet(SampleIndex.load([samples_dir()])) if extra else None
    loaded = load_catalogs(extra, vet=vet)
    for e in loaded.rejected:
        err(f"error: {e}\n  (not loaded; the other definitions are)")
    args.rejected_definitions = len(loaded.rejected)
    return Registry(loaded.kartas)
