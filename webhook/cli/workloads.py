"""``mutate`` and ``describe``: workloads from manifests (``-f FILE``) with the policy applied or
as their workload tree, and ``describe KIND[/NAME]`` of live workloads in a cluster (through
:mod:`webhook.cli.livedescribe`)."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
from typing import Any

import jsonpatch

from webhook.admission.handlers import mutate_object
from webhook.admission.rulebook import schema_for
from webhook.base.documents import read_documents
from webhook.base.errors import InputError
from webhook.base.gvk import GVK
from webhook.cli import console
from webhook.cli.console import EXIT_FINDING, EXIT_INPUT, EXIT_OK
from webhook.cli.suitefile import read_crd_files
from webhook.jq.engine import Engine
from webhook.mutation.policy import EMPTY, Policy
from webhook.mutation.policyobject import load_policies
from webhook.mutation.scope import NamespaceMeta, namespace_meta, namespaces_of
from webhook.schema.crds import SchemaIndex
from webhook.schema.defaulting import apply_defaults
from webhook.workload import render as describe
from webhook.workload.locator import resolve

# --------------------------------------------------------------------------- mutate


def cmd_mutate(args: argparse.Namespace) -> int:
    policy = load_policies(args.policy) if args.policy else EMPTY
    registry = console.registry(args)
    docs = read_documents(args.file)
    namespaces = _namespaces(args.namespaces) if getattr(args, "namespaces", None) else {}
    namespaces.update(namespaces_of([doc for _, doc in docs]))
    if getattr(args, "crd", None):
        docs = _defaulted(docs, read_crd_files(args.crd))
    engine = Engine()
    explained = (  # before the documents are patched in place below
        [
            _explain(registry, policy, doc, engine, namespaces) if isinstance(doc, dict) else []
            for _, doc in docs
        ]
        if args.output == "explain"
        else None
    )
    mutated: list[Any] = []
    patches: list[list[dict[str, Any]]] = []
    code = EXIT_OK
    for source, doc in docs:
        if _is_namespace(doc):  # what the policy reads, not a workload: printed as it is
            mutated.append(doc)
            patches.append([])
            continue
        m = (
            mutate_object(registry, policy, doc, engine, namespaces=namespaces)
            if isinstance(doc, dict)
            else None
        )
        if m is None:
            if isinstance(doc, dict):
                what = f"no definition for {GVK.of(doc) or 'an object without apiVersion/kind'}"
                code = max(code, EXIT_FINDING)
            else:  # a bare string, number or list: not a document to mutate at all
                what = f"not a Kubernetes object (a {type(doc).__name__})"
                code = EXIT_INPUT
            console.err(f"{source}: {what}; left as is")
            mutated.append(doc)
            patches.append([])
            continue
        for w in m.warnings:
            console.err(f"{source}: warning: {w}")
        patches.append(m.ops)
        mutated.append(jsonpatch.apply_patch(doc, m.ops, in_place=True) if m.ops else doc)
    if explained is not None:
        console.print_json(explained[0] if len(explained) == 1 else explained)
    elif args.output == "patch":
        console.print_json(patches[0] if len(patches) == 1 else patches)
    elif args.output == "json":
        console.print_json(
            mutated[0]
            if len(mutated) == 1
            else {"apiVersion": "v1", "kind": "List", "items": mutated}
        )
    else:
        sys.stdout.write(console.dump_yaml(mutated))
    return code


def _defaulted(docs: list[tuple[str, Any]], schemas: SchemaIndex | None) -> list[tuple[str, Any]]:
    """Each workload defaulted from its kind's schema (a CRD's among ``schemas``, else a
    built-in kind's), as ``test`` defaults its cases; others as they are."""
    out = []
    for source, doc in docs:
        found = schema_for(GVK.of(doc), schemas) if isinstance(doc, dict) else None
        if found is not None and found.schema is not None and not _is_namespace(doc):
            try:
                doc = apply_defaults(found.schema, doc)
            except InputError as e:
                raise InputError(f"{source}: {e}") from e
        out.append((source, doc))
    return out


def _explain(
    registry: Any, policy: Policy, doc: dict[str, Any], engine: Engine, namespaces: Any
) -> list[dict[str, Any]]:
    """Each rule's operations in order, with the policy and rule that made them: each rule is
    planned alone on the object as the rules before it left it (the planner is idempotent
    and keeps what is set, so that is what the rule adds), and the operations, applied in
    order, give the object ``mutate`` prints."""
    out: list[dict[str, Any]] = []
    if _is_namespace(doc) or registry.lookup(GVK.of(doc)) is None:
        return out
    current = copy.deepcopy(doc)
    for rule in policy.rules:
        alone = dataclasses.replace(policy, rules=(rule,))
        m = mutate_object(registry, alone, current, engine, namespaces=namespaces)
        if m is None or not m.ops:
            continue
        owner, _, name = rule.name.rpartition("/")
        for op in m.ops:
            out.append({"policy": owner or policy.source, "rule": name, **op})
        current = jsonpatch.apply_patch(current, m.ops, in_place=True)
    return out


def _is_namespace(doc: Any) -> bool:
    return (
        isinstance(doc, dict) and doc.get("apiVersion") == "v1" and doc.get("kind") == "Namespace"
    )


def _namespaces(path: str) -> dict[str, NamespaceMeta]:
    """``mutate --namespaces FILE``: its Namespace objects (a ``List``/``NamespaceList`` of
    them too) by name; anything else is an error naming the document."""
    out: dict[str, NamespaceMeta] = {}
    for source, doc in read_documents(path):
        items = (
            doc.get("items")
            if isinstance(doc, dict) and doc.get("kind") in ("List", "NamespaceList")
            else [doc]
        )
        if not isinstance(items, list):
            raise InputError(f"{source}: --namespaces: items must be a list of Namespaces")
        for i, item in enumerate(items):
            where = source if items == [doc] else f"{source} items[{i}]"
            # a List's items may leave kind and apiVersion to the list
            if isinstance(item, dict) and doc is not item and "kind" not in item:
                item = {**item, "apiVersion": "v1", "kind": "Namespace"}
            got = namespace_meta(item) if _is_namespace(item) else None
            if got is None:
                raise InputError(
                    f"{where}: --namespaces: not a Namespace with a name (apiVersion: v1, "
                    "kind: Namespace, metadata.name)"
                )
            out[got[0]] = got[1]
    return out


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
    registry = console.registry(args)
    docs = read_documents(args.file)
    engine = Engine()
    views: list[dict[str, Any]] = []
    texts: list[str] = []
    code = EXIT_OK
    for source, doc in docs:
        if not isinstance(doc, dict):  # a bare string, number or list: nothing to describe
            console.err(f"{source}: not a Kubernetes object (a {type(doc).__name__})")
            code = EXIT_INPUT
            continue
        karta = registry.lookup(GVK.of(doc))
        if karta is None:
            console.err(
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
            console.print_data(out, args.output)
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
        registry = console.registry(args)
        if name:
            data = livedescribe.describe_one(cluster, kind, name, namespace, registry, engine)
            text = livedescribe_text.as_text(data)
        else:
            ns = None if args.all_namespaces else namespace
            data = livedescribe.describe_all(cluster, kind, ns, registry, engine)
            text = livedescribe_text.list_text(data, args.all_namespaces)
            for w in data["warnings"]:
                console.err(f"warning: {w}")
            if not data["items"] and args.output == "text":
                where = "" if args.all_namespaces else f" in namespace {namespace}"
                console.err(f"no {data['kind']} found{where}")
                return EXIT_OK
    except ClusterError as e:
        console.err(str(e))
        return EXIT_FINDING if e.finding else EXIT_INPUT
    except NotFound as e:
        console.err(f"not found: {e}")
        return EXIT_FINDING
    if args.output == "text":
        print(text)
    else:
        console.print_data(data, args.output)
    return EXIT_OK
