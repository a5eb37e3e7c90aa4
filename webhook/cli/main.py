"""The ``karta-webhook`` command: argument parsing, reading files, printing, exit codes.

Every subcommand calls the same functions the HTTP handlers call. Exit codes: 0 success,
1 a finding (an invalid definition, a document with no definition), 2 unusable input (a file
that cannot be read or parsed, a bad policy or catalog) — always with a message naming the file
and the problem, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import yaml

from webhook import __version__
from webhook.admission.handlers import definition_vet, mutate_object, validate
from webhook.admission.registry import Registry, load_catalogs, load_registry
from webhook.admission.review import request_for
from webhook.base import jsontext
from webhook.base.depth import run_deep
from webhook.base.documents import document_files, read_documents
from webhook.base.errors import InputError, KartaError
from webhook.base.gvk import GVK
from webhook.cli import serve as serve_cmd
from webhook.cli import suite
from webhook.jq.engine import Engine
from webhook.karta.loading import samples_dir
from webhook.karta.model import is_karta, not_a_karta
from webhook.karta.samples import SampleIndex
from webhook.mutation.policy import EMPTY
from webhook.mutation.policyfile import load_policy
from webhook.workload import render as describe
from webhook.workload.resolve import resolve

EXIT_OK, EXIT_FINDING, EXIT_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors are input errors: exit 2, one line
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\n")


def _err(msg: str) -> None:
    print(f"karta-webhook: {msg}", file=sys.stderr)


def _dump_yaml(docs: Sequence[Any]) -> str:
    text: str = yaml.safe_dump_all(
        docs, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    return text


def _print_json(value: Any) -> None:
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


def _registry(args: argparse.Namespace) -> Registry:
    """The bundled catalog with the ``--catalog`` directories on top. A definition there that
    cannot be read or fails ``/validate``'s checks is named on stderr and left out; the others
    are used, the command does its work, and it exits 1 (:func:`main`)."""
    extra = args.catalog or []
    vet = definition_vet(SampleIndex.load([samples_dir()])) if extra else None
    loaded = load_catalogs(extra, vet=vet)
    for e in loaded.rejected:
        _err(f"error: {e}\n  (not loaded; the other definitions are)")
    args.rejected_definitions = len(loaded.rejected)
    return Registry(loaded.kartas)


# --------------------------------------------------------------------------- mutate


def cmd_mutate(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy) if args.policy else EMPTY
    registry = _registry(args)
    docs = read_documents(args.file)
    engine = Engine()
    mutated: list[Any] = []
    patches: list[list[dict[str, Any]]] = []
    code = EXIT_OK
    for source, doc in docs:
        m = mutate_object(registry, policy, doc, engine) if isinstance(doc, dict) else None
        if m is None:
            if isinstance(doc, dict):
                what = f"no definition for {GVK.of(doc) or 'an object without apiVersion/kind'}"
                code = max(code, EXIT_FINDING)
            else:  # a bare string, number or list: not a document to mutate at all
                what = f"not a Kubernetes object (a {type(doc).__name__})"
                code = EXIT_INPUT
            _err(f"{source}: {what}; left as is")
            mutated.append(doc)
            patches.append([])
            continue
        for w in m.warnings:
            _err(f"{source}: warning: {w}")
        patches.append(m.ops)
        mutated.append(jsonpatch.apply_patch(doc, m.ops, in_place=True) if m.ops else doc)
    if args.output == "patch":
        _print_json(patches[0] if len(patches) == 1 else patches)
    elif args.output == "json":
        _print_json(
            mutated[0]
            if len(mutated) == 1
            else {"apiVersion": "v1", "kind": "List", "items": mutated}
        )
    else:
        sys.stdout.write(_dump_yaml(mutated))
    return code


# --------------------------------------------------------------------------- describe


def cmd_describe(args: argparse.Namespace) -> int:
    """describe -f FILE: the workload tree of manifests; describe KIND/NAME or KIND: live
    workloads in a cluster (see :mod:`webhook.cli.livedescribe`)."""
    if args.target is not None:
        if args.file:
            raise InputError("describe: give either KIND[/NAME] or -f FILE, not both")
        return _describe_live(args)
    if not args.file:
        raise InputError("describe: give KIND[/NAME] (a live workload) or -f FILE (manifests)")
    if args.all_namespaces or args.namespace or args.kubeconfig or args.context:
        raise InputError("describe: -n, -A, --kubeconfig and --context apply to KIND[/NAME]")
    registry = _registry(args)
    docs = read_documents(args.file)
    engine = Engine()
    views: list[dict[str, Any]] = []
    texts: list[str] = []
    code = EXIT_OK
    for source, doc in docs:
        if not isinstance(doc, dict):  # a bare string, number or list: nothing to describe
            _err(f"{source}: not a Kubernetes object (a {type(doc).__name__})")
            code = EXIT_INPUT
            continue
        karta = registry.lookup(GVK.of(doc))
        if karta is None:
            _err(
                f"{source}: no definition for {GVK.of(doc) or 'an object without apiVersion/kind'}"
            )
            code = max(code, EXIT_FINDING)
            continue
        w = resolve(karta, doc, engine)
        views.append(describe.as_json(w))
        texts.append(describe.as_text(w))
    if args.output in ("json", "yaml"):
        out: Any = None
        if len(docs) == 1 and views:
            out = views[0]
        elif views or len(docs) != 1:
            out = {"items": views, "count": len(views)}
        if out is not None:
            _print_data(out, args.output)
    elif texts:
        print("\n\n".join(texts))
    return code


def _describe_live(args: argparse.Namespace) -> int:
    """describe KIND/NAME [-n NS] | KIND [-n NS | -A]: exit 1 for a missing object or a kind
    without definition, 2 for an unknown kind, an unusable kubeconfig, or a cluster that cannot
    be reached or forbids the reads."""
    from webhook.cli import livedescribe, livedescribe_text
    from webhook.cluster.reads import Cluster, ClusterError, NotFound, connect

    kind, _, name = str(args.target).partition("/")
    if not kind or (args.target.count("/") > 1) or ("/" in args.target and not name):
        raise InputError(f"describe: {args.target!r}: want KIND/NAME or KIND")
    if name and args.all_namespaces:
        raise InputError("describe: -A lists every workload of a kind; give KIND, not KIND/NAME")
    try:
        api, default_ns = connect(args.kubeconfig, args.context)
        cluster = Cluster(api, default_ns)
        namespace = args.namespace or default_ns
        engine = Engine()
        registry = _registry(args)
        if name:
            data = livedescribe.describe_one(cluster, kind, name, namespace, registry, engine)
            text = livedescribe_text.as_text(data)
        else:
            ns = None if args.all_namespaces else namespace
            data = livedescribe.describe_all(cluster, kind, ns, registry, engine)
            text = livedescribe_text.list_text(data, args.all_namespaces)
            for w in data["warnings"]:
                _err(f"warning: {w}")
            if not data["items"] and args.output == "text":
                where = "" if args.all_namespaces else f" in namespace {namespace}"
                _err(f"no {data['kind']} found{where}")
                return EXIT_OK
    except ClusterError as e:
        _err(str(e))
        return EXIT_FINDING if e.finding else EXIT_INPUT
    except NotFound as e:
        _err(f"not found: {e}")
        return EXIT_FINDING
    if args.output == "text":
        print(text)
    else:
        _print_data(data, args.output)
    return EXIT_OK


def _print_data(value: Any, output: str) -> None:
    """``-o json`` or ``-o yaml`` of one value."""
    if output == "json":
        _print_json(value)
    else:
        sys.stdout.write(_dump_yaml([value]))


# --------------------------------------------------------------------------- certs


def cmd_certs(args: argparse.Namespace) -> int:
    from webhook.server.certs import write_certs

    paths = write_certs(Path(args.out), args.service, args.namespace, days=args.days)
    print(f"wrote {paths.ca_cert}, {paths.cert}, {paths.key}")
    return EXIT_OK


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
        _err(f"{args.file}: no documents")
        return EXIT_FINDING
    index = SampleIndex.load(dirs)
    for w in index.warnings:
        _err(f"warning: {w}")
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
        _print_json(suite.as_json(rows))
    else:
        print(suite.as_table(rows))
    return EXIT_FINDING if any(not r.passed for r in rows) else EXIT_OK


def _suite_label(s: suite.Suite, base: Path, count: int) -> str:
    """A suite's name in the table: its own, or its directory below PATH when there are
    several without names of their own."""
    if count == 1 or s.name != s.path.parent.name:
        return s.name
    try:
        return str(s.path.parent.relative_to(base)) if base.is_dir() else s.name
    except ValueError:
        return s.name


# --------------------------------------------------------------------------- manifests


def cmd_manifests(args: argparse.Namespace) -> int:
    """manifests [--namespace NS] [--ca-bundle FILE] [--url URL]: the webhook configurations
    for the bundled catalog, with the rules the server's keeper would compute."""
    from webhook.admission.manifests import check_webhook_url, webhook_configurations
    from webhook.server.certs import CertError, read_ca_bundle, service_dns_names

    url = check_webhook_url(args.url) if args.url is not None else None
    try:  # the Service's namespace: what the API server will accept as one
        service_dns_names("karta-webhook", args.namespace)
    except CertError as e:
        raise InputError(f"--namespace {args.namespace!r}: {e}") from None
    ca = None
    if args.ca_bundle:
        try:
            ca = read_ca_bundle(Path(args.ca_bundle))
        except CertError as e:
            raise InputError(f"--ca-bundle {e}") from e
    operations = load_policy(args.policy).operations if args.policy else ("CREATE",)
    docs: list[Any] = webhook_configurations(
        load_registry().kinds(),
        namespace=args.namespace,
        ca_bundle=ca,
        operations=operations,
        url=url,
    )
    sys.stdout.write(_dump_yaml(catalog_kartas() if args.catalog else docs))
    return EXIT_OK


def catalog_kartas() -> list[dict[str, Any]]:
    """The bundled definitions as Karta objects to apply (``manifests --catalog``), each
    labelled as part of karta-webhook, in file order. In a cluster they take the place of the
    built-in copies (the cluster's definition wins for its kind), so ``kubectl get kartas``
    shows what the webhook uses and the leader writes their status conditions."""
    from webhook.admission.manifests import LABELS
    from webhook.karta.loading import catalog_dir

    out = []
    for path in sorted(catalog_dir().glob("*.yaml")):
        for _, doc in read_documents(path):
            if isinstance(doc, dict) and is_karta(doc):
                meta = doc.setdefault("metadata", {})
                meta["labels"] = {
                    **(meta.get("labels") or {}),
                    "app.kubernetes.io/part-of": LABELS["app.kubernetes.io/part-of"],
                }
                out.append(doc)
    return out


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="karta-webhook",
        description="Kubernetes admission webhooks driven by Karta workload definitions.",
    )
    p.add_argument("--version", action="version", version=f"karta-webhook {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def catalog(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--catalog",
            action="append",
            metavar="DIR",
            help="more definitions on top of the bundled catalog (repeatable; later wins)",
        )

    m = sub.add_parser(
        "mutate", help="print workloads with the policy applied to every pod template"
    )
    m.add_argument(
        "-f",
        "--file",
        required=True,
        metavar="FILE",
        help="workload manifest(s), YAML or JSON; - for stdin",
    )
    m.add_argument(
        "--policy", metavar="FILE", help="injection policy (YAML); none: nothing is injected"
    )
    catalog(m)
    m.add_argument("-o", "--output", choices=("yaml", "json", "patch"), default="yaml")
    m.set_defaults(func=cmd_mutate)

    d = sub.add_parser(
        "describe",
        help="print the workload tree: components, instances, replicas, GPUs, status "
        "(of manifests, or live from a cluster)",
    )
    d.add_argument(
        "target",
        nargs="?",
        metavar="KIND[/NAME]",
        help="a live workload (KIND/NAME), or every workload of KIND; KIND as kubectl takes "
        "it: kind, plural or short name, NAME.GROUP allowed",
    )
    d.add_argument("-f", "--file", metavar="FILE", help="workload manifest(s); - for stdin")
    d.add_argument(
        "-n", "--namespace", metavar="NS", help="live: the namespace (default: the context's)"
    )
    d.add_argument("-A", "--all-namespaces", action="store_true", help="live KIND: every namespace")
    d.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="live: kubeconfig (default: $KUBECONFIG, ~/.kube/config)",
    )
    d.add_argument("--context", metavar="NAME", help="live: kubeconfig context (default: current)")
    catalog(d)
    d.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    d.set_defaults(func=cmd_describe)

    c = sub.add_parser("certs", help="write a CA and a serving certificate for the webhook Service")
    c.add_argument("--out", required=True, metavar="DIR")
    c.add_argument("--service", required=True, metavar="NAME")
    c.add_argument("--namespace", required=True, metavar="NS")
    c.add_argument("--days", type=int, default=365, metavar="N")
    c.set_defaults(func=cmd_certs)

    v = sub.add_parser(
        "validate",
        help="check Karta definitions: structure, jq, safety, and against sample objects",
    )
    v.add_argument(
        "-f",
        "--file",
        required=True,
        metavar="FILE",
        help="Karta definition(s): a file, a directory of them (a catalog folder), - for stdin",
    )
    v.add_argument(
        "--samples",
        action="append",
        metavar="DIR",
        help="sample objects (recursively); default: the bundled catalog's samples",
    )
    v.add_argument(
        "--require-samples",
        action="store_true",
        help="a definition with no sample of its kind is invalid",
    )
    v.add_argument(
        "--crd",
        action="append",
        metavar="FILE",
        help="CustomResourceDefinition(s) as `kubectl get crd NAME -o yaml` prints them: "
        "files, lists or directories (repeatable); paths are checked against the root "
        "kind's schema, samples defaulted from it (built-in kinds need none)",
    )
    v.set_defaults(func=cmd_validate)

    t = sub.add_parser(
        "test",
        help="run definition test suites (karta-test.yaml): templates, GPUs, mutated objects",
    )
    t.add_argument("path", metavar="PATH", help="a karta-test.yaml, or a directory to search")
    t.add_argument("-o", "--output", choices=("table", "json"), default="table")
    t.set_defaults(func=cmd_test)

    serve_cmd.add_parser(sub, catalog)

    mf = sub.add_parser(
        "manifests", help="print the webhook configurations for the bundled catalog"
    )
    mf.add_argument("--namespace", default="karta-system", metavar="NS")
    mf.add_argument(
        "--ca-bundle",
        metavar="FILE",
        help="PEM certificates the API server trusts for the webhook (becomes caBundle)",
    )
    mf.add_argument(
        "--url",
        metavar="https://HOST:PORT",
        help="call a webhook run outside the cluster at this address (clientConfig.url) "
        "instead of the Service; for developing against a cluster",
    )
    mf.add_argument(
        "--catalog",
        action="store_true",
        help="print the bundled definitions as Karta objects instead (to apply, so that "
        "`kubectl get kartas` shows them with their status)",
    )
    mf.add_argument(
        "--policy",
        metavar="FILE",
        help="take the mutated operations (CREATE, UPDATE) from this policy",
    )
    mf.set_defaults(func=cmd_manifests)
    return p


#: Frames per nesting level of the deepest recursion over a document in the offline commands
#: (PyYAML's representer and emitter), so that any document the API server would accept can be
#: read, mutated and printed.
_FRAMES_PER_LEVEL = 8


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.func is serve_cmd.cmd_serve:  # gunicorn wants the main thread (signals)
            return int(args.func(args))
        code = run_deep(lambda: int(args.func(args)), frames_per_level=_FRAMES_PER_LEVEL)
        if getattr(args, "rejected_definitions", 0):  # the rest was done: a finding
            code = max(code, EXIT_FINDING)
        return code
    except KartaError as e:
        _err(str(e))
        return EXIT_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
