"""Which jq forms definitions use, and which expressions the native evaluator leaves to libjq.

Run: ``python hack/jq_survey.py [DIR ...]`` — the bundled catalog, plus every YAML file under
each DIR (e.g. a checkout of upstream definitions). For each set it prints the number of
distinct expressions (plain paths among them), how many expressions use each form, and the
expressions :func:`webhook.jq.native.evaluate.compile` refuses.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from webhook.base.documents import read_documents  # noqa: E402
from webhook.jq.native import ast  # noqa: E402
from webhook.jq.native.parse import parse as parse_jq  # noqa: E402
from webhook.jq.paths import parse_plain  # noqa: E402
from webhook.jq.syntax import IDENT, tokenize  # noqa: E402
from webhook.karta.loading import catalog_dir  # noqa: E402
from webhook.karta.model import jq_fields, parse  # noqa: E402


def expressions(files: list[Path]) -> set[str]:
    found: set[str] = set()
    for f in files:
        for label, doc in read_documents(f):
            try:
                found.update(j.expr for j in jq_fields(parse(doc, label)))
            except Exception:  # not a Karta this reader understands
                continue
    return found


def forms(expr: str, node: ast.Node) -> set[str]:
    """Structural forms from the AST; builtins by name as written (``map``, ``first``, ...
    are desugared in the AST)."""
    out = {t.text for t in tokenize(expr) if t.kind == IDENT and t.text in ast.BUILTINS}
    todo = [node]
    while todo:
        n = todo.pop()
        todo += ast.children(n)
        if isinstance(n, ast.Path):
            for s in n.steps:
                out.add({ast.KEY: ".key", ast.INDEX: "[N]", ast.ITER: "[]"}[s.kind])
                if s.opt:
                    out.add("[]?" if s.kind == ast.ITER else ".key?")
        elif isinstance(n, ast.Binop):
            out.add("comparison" if n.op in ("==", "!=", "<", "<=", ">", ">=") else "arithmetic")
        elif not isinstance(n, ast.Identity | ast.Var | ast.Call):
            out.add(type(n).__name__.lower())
    return out


def report(title: str, exprs: set[str]) -> None:
    plain = {e for e in exprs if parse_plain(e) is not None}
    counts: Counter[str] = Counter()
    refused = []
    for e in sorted(exprs - plain):
        parsed = parse_jq(e)
        if parsed is None:
            refused.append(e)
        else:
            counts.update(forms(e, parsed.node))
    print(f"{title}: {len(exprs)} distinct expressions, {len(plain)} plain paths")
    for form, n in counts.most_common():
        print(f"  {n:4d}  {form}")
    print(f"  refused (left to libjq): {len(refused)}")
    for e in refused:
        print(f"    {e!r}")


def main() -> None:
    report("catalog", expressions(sorted(catalog_dir().glob("*.yaml"))))
    for d in sys.argv[1:]:
        report(d, expressions(sorted(Path(d).rglob("*.yaml"))))


if __name__ == "__main__":
    main()
