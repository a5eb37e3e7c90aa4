"""Parse the jq subset of :mod:`webhook.jq.native.evaluate` into a small AST, from jq's tokens.

:func:`parse` returns None outside the subset (libjq then runs the expression) and past
``max_depth`` of nesting, so that no input can exhaust the parser's or evaluator's recursion.
The grammar, with libjq 1.8's precedence (lowest first; ``tests/jq/test_jqnative.py``)::

    pipe   := item ('|' item)*
    item   := alt ('as' $name '|' pipe)?          # the body takes the rest of the pipe
    alt    := or ('//' or)*                       # right associative
    or     := and ('or' and)*      and := cmp ('and' cmp)*
    cmp    := add (('=='|'!='|'<'|'<='|'>'|'>=') add)?     # non-associative
    add    := mul (('+'|'-') mul)*  mul := post (('*'|'/'|'%') post)*
    post   := primary ('.name' | '."s"' | '[' key? ']' | '.[' key? ']' | '?')*
    primary:= '.' | '.name' | '."s"' | '.[' key? ']' | number | -integer | string (with
              \\(pipe) interpolations) | $name | true | false | null | builtin | builtin(pipe;...)
            | '(' pipe ')' | '[' pipe? ']' | '{' entries '}' | 'if' pipe 'then' pipe
              ('elif' pipe 'then' pipe)* ('else' pipe)? 'end'
    key    := "string" | integer | -integer       # literal keys only
    entries:= (name | keyword | "string" | $name | '(' pipe ')') (':' alt ('|' alt)*)? , ...

``a?`` right after an index or iteration makes that step optional (libjq's INDEX_OPT /
EACH_OPT); anywhere else it is ``try a``. Builtins are :data:`BUILTINS`; what the grammar
leaves out (``..``, slices, ``reduce``, ...) is listed in docs/architecture.md.
"""

from __future__ import annotations

from typing import Final

from webhook.jq import syntax as jqsyntax
from webhook.jq.native.ast import (
    BUILTINS,
    INDEX,
    ITER,
    KEY,
    Alt,
    And,
    Bind,
    Binop,
    Call,
    Collect,
    Comma,
    Identity,
    If,
    Literal,
    Node,
    Object,
    Or,
    Parsed,
    Path,
    Pipe,
    Step,
    Try,
    Var,
    constant,
    nesting,
)
from webhook.jq.native.parse_literals import Reader, Refuse
from webhook.jq.syntax import FIELD, IDENT, KEYWORD, NUMBER, OP, STRING, VAR, TokenizeError

__all__ = ["Parsed", "parse"]

_COMPARISONS: Final = frozenset({"==", "!=", "<", "<=", ">", ">="})


def parse(expr: str, *, max_depth: int = 64) -> Parsed | None:
    """The AST of ``expr``, or None when it is outside the subset or nested deeper than
    ``max_depth`` (brackets, ``if``, interpolations, or operator nesting in the AST)."""
    try:
        toks = jqsyntax.tokenize(expr)
    except TokenizeError:
        return None
    if not toks or nesting(toks) > max_depth:
        return None
    p = _Parser(toks, max_depth, [], [1])
    try:
        node = p.parse_pipe()
        if p.i != len(toks):
            return None
    except (Refuse, RecursionError):
        return None
    return Parsed(node, p.slots[0])


class _Parser(Reader):
    # -- precedence levels

    def parse_pipe(self) -> Node:
        stages = [self.parse_comma()]
        while self.at(OP, "|"):
            self.i += 1
            stages.append(self.parse_comma())
        return stages[0] if len(stages) == 1 else self.mk(Pipe(tuple(stages)))

    def parse_comma(self) -> Node:
        items = [self.parse_item()]
        while self.at(OP, ","):
            self.i += 1
            items.append(self.parse_item())
        return items[0] if len(items) == 1 else self.mk(Comma(tuple(items)))

    def parse_item(self) -> Node:
        source = self.parse_alt()
        if not self.at(KEYWORD, "as"):
            return source
        self.i += 1
        var = self.peek()
        if var is None or var.kind != VAR or var.text.startswith("$__"):
            raise Refuse  # destructuring patterns, $__loc__
        self.i += 1
        self.expect(OP, "|")
        slot = self.slots[0]
        self.slots[0] += 1
        self.scope.append((var.text, slot))
        body = self.parse_pipe()
        self.scope.pop()
        return self.mk(Bind(source, slot, body))

    def parse_alt(self) -> Node:
        items = [self.parse_or()]
        while self.at(OP, "//"):
            self.i += 1
            items.append(self.parse_or())
        return items[0] if len(items) == 1 else self.mk(Alt(tuple(items)))

    def parse_or(self) -> Node:
        left = self.parse_and()
        while self.at(KEYWORD, "or"):
            self.i += 1
            left = self.mk(Or(left, self.parse_and()))
        return left

    def parse_and(self) -> Node:
        left = self.parse_cmp()
        while self.at(KEYWORD, "and"):
            self.i += 1
            left = self.mk(And(left, self.parse_cmp()))
        return left

    def parse_cmp(self) -> Node:
        left = self.parse_arith(("+", "-"))
        t = self.peek()
        if t is not None and t.kind == OP and t.text in _COMPARISONS:
            self.i += 1
            left = self.mk(Binop(t.text, left, self.parse_arith(("+", "-"))))
            t = self.peek()
            if t is not None and t.kind == OP and t.text in _COMPARISONS:
                raise Refuse  # non-associative: a syntax error in jq
        return left

    def parse_arith(self, ops: tuple[str, ...]) -> Node:
        tighter = ops == ("+", "-")
        left = self.parse_arith(("*", "/", "%")) if tighter else self.parse_post()
        while True:
            t = self.peek()
            if t is None or t.kind != OP or t.text not in ops:
                return left
            self.i += 1
            right = self.parse_arith(("*", "/", "%")) if tighter else self.parse_post()
            left = self.mk(Binop(t.text, left, right))

    # -- terms

    def parse_post(self) -> Node:
        base: Node | None = None
        steps: list[Step] = []
        t = self.peek()
        if t is not None and t.kind == FIELD:
            steps.append(Step(KEY, t.text[1:], False))
            self.i += 1
        elif t is not None and t.kind == OP and t.text == ".":
            self.i += 1
            if self.at(STRING):
                steps.append(Step(KEY, self.string_key(), False))
            elif self.at(OP, "["):
                steps.append(self.bracket())
        else:
            base = self.parse_primary()
        last_is_step = bool(steps)
        while True:
            t = self.peek()
            if t is None:
                break
            if t.kind == FIELD:
                steps.append(Step(KEY, t.text[1:], False))
                self.i += 1
            elif t.kind == OP and t.text == "." and self.at(STRING, k=1):
                self.i += 1
                steps.append(Step(KEY, self.string_key(), False))
            elif t.kind == OP and t.text == "." and self.at(OP, "[", k=1):
                self.i += 1
                steps.append(self.bracket())
            elif t.kind == OP and t.text == "[":
                steps.append(self.bracket())
            elif t.kind == OP and t.text == "?":
                self.i += 1
                if last_is_step and not steps[-1].opt:
                    s = steps[-1]
                    steps[-1] = Step(s.kind, s.key, True)
                else:
                    base = self.mk(Try(self.finish(base, steps)))
                    steps = []
                    last_is_step = False
                continue
            else:
                break
            last_is_step = True
        return self.finish(base, steps)

    def finish(self, base: Node | None, steps: list[Step]) -> Node:
        if steps:
            return self.mk(Path(base, tuple(steps)))
        return base if base is not None else Identity()

    def parse_primary(self) -> Node:
        t = self.peek()
        if t is None:
            raise Refuse
        if t.kind == NUMBER or (t.kind == OP and t.text == "-"):
            return Literal(self.number())
        if t.kind == STRING:
            return self.string()
        if t.kind == VAR:
            self.i += 1
            return Var(self.lookup(t.text))
        if t.kind == IDENT:
            self.i += 1
            return self.call(t.text)
        if t.kind == KEYWORD and t.text == "if":
            self.i += 1
            return self.parse_if()
        if t.kind == OP and t.text == "(":
            self.i += 1
            inner = self.parse_pipe()
            self.expect(OP, ")")
            return inner
        if t.kind == OP and t.text == "[":
            self.i += 1
            if self.at(OP, "]"):
                self.i += 1
                return Collect(None)
            body = self.parse_pipe()
            self.expect(OP, "]")
            return self.mk(Collect(body))
        if t.kind == OP and t.text == "{":
            self.i += 1
            return self.parse_object()
        raise Refuse

    def parse_if(self) -> Node:
        arms: list[tuple[Node, Node]] = []
        while True:
            cond = self.parse_pipe()
            self.expect(KEYWORD, "then")
            arms.append((cond, self.parse_pipe()))
            if self.at(KEYWORD, "elif"):
                self.i += 1
                continue
            break
        if self.at(KEYWORD, "else"):
            self.i += 1
            otherwise = self.parse_pipe()
        else:
            otherwise = Identity()
        self.expect(KEYWORD, "end")
        for cond, then in reversed(arms):
            otherwise = self.mk(If(cond, then, otherwise))
        return otherwise

    def parse_object(self) -> Node:
        entries: list[tuple[Node, Node]] = []
        while not self.at(OP, "}"):
            if entries:
                self.expect(OP, ",")
            t = self.peek()
            if t is None:
                raise Refuse
            key: Node
            short: Node | None = None
            if t.kind in (IDENT, KEYWORD):
                self.i += 1
                key = Literal(t.text)
                short = self.mk(Path(None, (Step(KEY, t.text, False),)))
            elif t.kind == VAR:
                self.i += 1
                key = Var(self.lookup(t.text))
                short = Var(self.lookup(t.text))
                if not self.at(OP, ":"):
                    key = Literal(t.text[1:])
            elif t.kind == STRING:
                key = self.string()
                if t.value is not None:
                    short = self.mk(Path(None, (Step(KEY, t.value, False),)))
            elif t.kind == OP and t.text == "(":
                self.i += 1
                key = self.parse_pipe()
                self.expect(OP, ")")
                if constant(key) and not (isinstance(key, Literal) and type(key.value) is str):
                    raise Refuse  # libjq folds it and rejects a non-string key at compile time
            else:
                raise Refuse
            if self.at(OP, ":"):
                self.i += 1
                stages = [self.parse_alt()]
                while self.at(OP, "|"):
                    self.i += 1
                    stages.append(self.parse_alt())
                value = stages[0] if len(stages) == 1 else self.mk(Pipe(tuple(stages)))
            elif short is not None:
                value = short
            else:
                raise Refuse
            entries.append((key, value))
        self.i += 1
        return self.mk(Object(tuple(entries)))

    def call(self, name: str) -> Node:
        if name in ("true", "false", "null"):
            return Literal({"true": True, "false": False, "null": None}[name])
        arities = BUILTINS.get(name)
        if arities is None:
            raise Refuse
        args: list[Node] = []
        if self.at(OP, "("):
            self.i += 1
            args.append(self.parse_pipe())
            while self.at(OP, ";"):
                self.i += 1
                args.append(self.parse_pipe())
            self.expect(OP, ")")
        if len(args) not in arities:
            raise Refuse
        return self.desugar(name, args)

    def desugar(self, name: str, args: list[Node]) -> Node:
        every = self.mk(Path(None, (Step(ITER, None, False),)))
        if name in ("first", "last") and not args:
            return self.mk(Path(None, (Step(INDEX, 0 if name == "first" else -1, False),)))
        if name == "values":
            return self.mk(Call("select", (self.mk(Binop("!=", Identity(), Literal(None))),)))
        if name == "map":
            return self.mk(Collect(self.mk(Pipe((every, args[0])))))
        if name in ("any", "all") and len(args) < 2:
            return self.mk(Call(name, (every, args[0] if args else Identity())))
        if name == "IN":  # libjq's own definition: def IN(s): any(s == .; .);
            return self.mk(Call("any", (self.mk(Binop("==", args[0], Identity())), Identity())))
        return self.mk(Call(name, tuple(args)))
