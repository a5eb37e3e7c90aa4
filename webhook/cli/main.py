"""The ``karta-webhook`` command: argument parsing and the exit code of each run.

Every subcommand calls the same functions the HTTP handlers call. The commands: ``mutate`` and
``describe`` in :mod:`webhook.cli.workloads`, ``validate`` and ``test`` in
:mod:`webhook.cli.definitions`, ``certs`` and ``manifests`` in :mod:`webhook.cli.install`,
``serve`` in :mod:`webhook.cli.serve`; the exit codes and printing they share in
:mod:`webhook.cli.console`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from webhook import __version__
from webhook.base.depth import run_deep
from webhook.base.errors import KartaError
from webhook.cli import console
from webhook.cli import serve as serve_cmd
from webhook.cli.console import EXIT_FINDING, EXIT_INPUT, EXIT_OK
from webhook.cli.definitions import cmd_init, cmd_test, cmd_validate
from webhook.cli.install import cmd_certs, cmd_manifests
from webhook.cli.workloads import cmd_describe, cmd_mutate


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors are input errors: exit 2, one line
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\n")


def build_parser(prog: str = "karta-webhook") -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description="Kubernetes admission webhooks driven by Karta workload definitions.",
        usage="%(prog)s [-h] [--version] "
        "{mutate,describe,certs,validate,init,test,serve,manifests} ...",
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
        "mutate",
        help="print workloads with the policy applied to every pod template",
        usage="%(prog)s [-h] -f FILE [--policy FILE] [--namespaces FILE] [--crd FILE]... "
        "[--catalog DIR]... [-o {yaml,json,patch,explain}]",
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
    m.add_argument(
        "--namespaces",
        metavar="FILE",
        help="Namespace objects (or a List of them, as kubectl get namespaces -o yaml prints) "
        "whose labels and annotations the policy's namespaceSelector and $(namespace.*) values "
        "read; Namespace documents among -f's are read too",
    )
    catalog(m)
    m.add_argument(
        "--crd",
        action="append",
        metavar="FILE",
        help="CustomResourceDefinition(s) (files, lists or directories; repeatable): each "
        "object is first defaulted from its kind's schema, as the API server stores it and "
        "as `test` does, so the output can serve as a test's expected result",
    )
    m.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json", "patch", "explain"),
        default="yaml",
        help="explain: each patch operation with the policy and rule that made it",
    )
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
    v.add_argument(
        "--explain",
        action="store_true",
        help="also print, for each path of the definition on each sample, what it matched "
        "(count and first locations or values)",
    )
    v.set_defaults(func=cmd_validate)

    i = sub.add_parser(
        "init", help="print a draft Karta definition from a kind's CRD, a comment on every guess"
    )
    i.add_argument("--crd", required=True, metavar="FILE", help="the kind's CRD (file or List)")
    i.add_argument("--kind", metavar="K", help="the kind, when the file holds several CRDs")
    i.set_defaults(func=cmd_init)

    t = sub.add_parser(
        "test",
        help="run definition test suites (karta-test.yaml): templates, GPUs, mutated objects",
    )
    t.add_argument("path", metavar="PATH", help="a karta-test.yaml, or a directory to search")
    t.add_argument("-o", "--output", choices=("table", "json"), default="table")
    t.add_argument(
        "--update",
        action="store_true",
        help="write each failing case's computed mutated object to its `mutated:` file "
        "(review the diff); exit 0 when every failure was one so written",
    )
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
        help="take the mutated operations (CREATE, UPDATE) from this policy, and add the "
        "gang's Pod webhook when one of its rules has gang",
    )
    mf.set_defaults(func=cmd_manifests)
    return p


#: Frames per nesting level of the deepest recursion over a document in the offline commands
#: (PyYAML's representer and emitter), so that any document the API server would accept can be
#: read, mutated and printed.
_FRAMES_PER_LEVEL = 8


def main(argv: Sequence[str] | None = None, *, prog: str = "karta-webhook") -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        if args.func is serve_cmd.cmd_serve:  # gunicorn wants the main thread (signals)
            return int(args.func(args))
        code = run_deep(lambda: int(args.func(args)), frames_per_level=_FRAMES_PER_LEVEL)
        if getattr(args, "rejected_definitions", 0):  # the rest was done: a finding
            code = max(code, EXIT_FINDING)
        return code
    except KartaError as e:
        console.err(str(e))
        return EXIT_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """``kubectl karta ...``: the same commands as ``karta-webhook``, installed as the console
    script ``kubectl-karta``, which kubectl runs as a plugin when it is on PATH (krew's
    convention). ``describe KIND/NAME`` then reads the cluster of kubectl's current context
    (``$KUBECONFIG``, else ``~/.kube/config``), as kubectl does."""
    return main(argv, prog="kubectl karta")
