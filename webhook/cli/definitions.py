"""``validate`` and ``test``: checking Karta definitions (structure, jq, safety, schemas,
samples) and running their test suites (:mod:`webhook.cli.suite`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from webhook.admission.handlers import validate
from webhook.admission.review import request_for
from webhook.base.documents import document_files, read_documents
from webhook.base.errors import InputError
from webhook.cli import console, suite
from webhook.cli.console import EXIT_FINDING, EXIT_OK
from webhook.jq.engine import Engine
from webhook.karta.loading import samples_dir
from webhook.karta.model import is_karta, not_a_karta
from webhook.karta.samples import SampleIndex
from webhook.schema.draft import draft

# --------------------------------------------------------------------------- validate


def cmd_validate(args: argparse.Namespace) -> int:
    """validate -f FILE|- [--samples DIR]... [--require-samples] [--crd FILE]...: check every
    Karta in FILE (structure, jq, safety, against the root kind's schema, and against the
    sample objects of its root kind)."""
    dirs = [Path(d) for d in args.samples] if args.samples else [samples_dir()]
    for d in dirs if args.samples else []:
        if not d.exists():
            raise InputError(f"{d}: no such directory (--samples)")
    schemas = suite.read_crd_files(args.crd or [])
    code = EXIT_OK
    if args.file != "-" and Path(args.file).is_dir():
        # A catalog folder: every file is checked; one that cannot be read is named, the
        # others are checked all the same (exit 1).
        docs = []
        for f in document_files([Path(args.file)]):
            try:
                docs.extend(read_documents(f))
            except InputError as e:
                print(f"INVALID {e}")
                code = EXIT_FINDING
    else:
        docs = read_documents(args.file)
    if not docs:
        console.err(f"{args.file}: no documents")
        return EXIT_FINDING
    index = SampleIndex.load(dirs)
    for w in index.warnings:
        console.err(f"warning: {w}")
    engine = Engine()
    for source, doc in docs:
        if not is_karta(doc):
            print(f"INVALID {source}: not a Karta ({not_a_karta(doc)})")
            code = EXIT_FINDING
            continue
        result = validate(
            request_for(doc),
            index,
            (),
            engine,
            require_samples=args.require_samples,
            source=source,
            schemas=schemas,
        )
        assert result.report is not None  # a Karta on CREATE is always checked
        print("\n".join(result.report.lines()))
        if getattr(args, "explain", False):
            print("\n".join(f"  explain: {e}" for e in result.report.explained))
        if not result.response.allowed:
            code = EXIT_FINDING
    return code


# --------------------------------------------------------------------------- test


def cmd_test(args: argparse.Namespace) -> int:
    """test PATH [-o table|json]: run the test suites (karta-test.yaml) in PATH; exit 1 when a
    check fails, 2 when a suite cannot be used."""
    base = Path(args.path)
    suites = [suite.load_suite(p) for p in suite.find_suites(base)]
    engine = Engine()
    rows: list[suite.Row] = []
    for s in suites:
        rows.extend(suite.run_suite(s, engine, label=_suite_label(s, base, len(suites))))
    if args.output == "json":
        console.print_json(suite.as_json(rows))
    else:
        print(suite.as_table(rows))
    failed = [r for r in rows if not r.passed]
    if getattr(args, "update", False) and failed:
        failed = _update(failed)
    return EXIT_FINDING if failed else EXIT_OK


def _update(failed: list[suite.Row]) -> list[suite.Row]:
    """``test --update``: write the computed mutated object of each failing ``mutated`` check
    to the file its expectation came from; the failures left (others, and inline ones)."""
    left = []
    for r in failed:
        target, actual = r.computed if r.computed is not None else (None, None)
        if target is None:
            left.append(r)
            if r.computed is not None:
                console.err(
                    f"{r.test}/{r.case}: mutated is given inline: not updated (give it as a file)"
                )
            continue
        target.write_text(console.dump_yaml([actual]))
        console.err(f"{r.test}/{r.case}: updated {target}")
    return left


def _suite_label(s: suite.Suite, base: Path, count: int) -> str:
    """A suite's name in the table: its own, or its directory below PATH when there are
    several without names of their own."""
    if count == 1 or s.name != s.path.parent.name:
        return s.name
    try:
        return str(s.path.parent.relative_to(base)) if base.is_dir() else s.name
    except ValueError:
        return s.name


def cmd_init(args: argparse.Namespace) -> int:
    """init --crd FILE [--kind K]: print a draft definition of the CRD's kind (its storage
    version, else the first it serves); exit 2 when no CRD (or no CRD of K) is there."""
    index = suite.read_crd_files([args.crd])
    entries = [e for e in (index or ()) if args.kind in (None, e.kind)]
    kinds = sorted({e.kind for e in entries})
    if not entries:
        raise InputError(f"{args.crd}: no CustomResourceDefinition of kind {args.kind} (--kind)")
    if len(kinds) > 1:
        raise InputError(f"{args.crd}: CRDs of {', '.join(kinds)}: name one with --kind")
    e = entries[0]
    print(draft(e.schema, e.group, e.version, e.kind), end="")
    return EXIT_OK
