"""Regular expressions whose running time the data cannot blow up.

libjq runs ``test``, ``match``, ``capture``, ``scan``, ``splits``, ``sub``, ``gsub`` and
``split/2`` with Oniguruma, a backtracking engine: a pattern such as ``(a+)+$`` takes time
exponential in the length of the string it meets, and the string is the workload author's.
Where a definition keeps a regex (a status mapping, an instance id; never a write path, see
:mod:`webhook.validation.writeshape`), :func:`problems` refuses what can backtrack catastrophically:

* a pattern that is not a constant string (the data would choose it), or the ``x`` flag (its
  comments and spacing would hide the structure read here);
* backreferences (``\\1``, ``\\k<name>``) and subexpression calls (``\\g<name>``);
* a repeated group that holds another repetition (``(a+)+``, ``(a*b?)*``, ``(x{1,9}){2,}``);
* an alternation under a repetition whose branches are not plain strings with distinct first
  characters (``(a|ab)*``, ``(\\w|\\d)+``; ``(get|put)+`` is fine);
* more than :data:`MAX_UNBOUNDED` unbounded repetitions in one pattern (each adjacent pair
  that can match the same text multiplies the work by the string's length).

The reading is conservative: a false refusal costs a rewritten pattern (an atomic group
``(?>...)`` or a possessive ``a*+`` is never refused), a false acceptance costs the webhook.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from webhook.jq.syntax import IDENT, OP, STRING, Token, TokenizeError, tokenize

__all__ = ["MAX_UNBOUNDED", "pattern_problems", "problems"]

#: At most this many unbounded repetitions (``*``, ``+``, ``{n,}``) in one pattern.
MAX_UNBOUNDED: Final = 3
#: Regex builtins and the position of their pattern and flags arguments (None: no flags).
_REGEX_CALLS: Final[dict[str, tuple[int, int | None]]] = {
    "test": (0, 1),
    "match": (0, 1),
    "capture": (0, 1),
    "scan": (0, 1),
    "splits": (0, 1),
    "split": (0, 1),  # only the two-argument form is a regex
    "sub": (0, 2),
    "gsub": (0, 2),
    "_match_impl": (0, 1),
}
_UNBOUNDED: Final = 1 << 30
#: Groups nested deeper than this are refused (the reading recurses per level).
_MAX_GROUP_DEPTH: Final = 32


def problems(expr: str) -> list[str]:
    """Why the regular expressions of ``expr`` could be made to run for too long ([] when
    they cannot, or when it has none)."""
    try:
        tokens = tokenize(expr)
    except TokenizeError:
        return []  # reported by the syntax screen
    out: list[str] = []
    _calls(tokens, out)
    return list(dict.fromkeys(out))


def _calls(tokens: Sequence[Token], out: list[str]) -> None:
    for i, t in enumerate(tokens):
        for inner in t.interpolations:
            _calls(inner, out)
        if t.kind != IDENT or t.text not in _REGEX_CALLS:
            continue
        if i > 0 and tokens[i - 1].kind == OP and tokens[i - 1].text == "{":
            continue  # an object key ({test: 1})
        args = _arguments(tokens, i + 1)
        name = t.text
        if args is None:
            if name != "split":
                out.append(f"{name!r} without a constant pattern: the data would choose it")
            continue
        if name == "split" and len(args) < 2:
            continue  # split/1 splits on a plain string
        at, flags_at = _REGEX_CALLS[name]
        pattern = _constant(args[at]) if len(args) > at else None
        if pattern is None:
            out.append(f"{name!r}: the pattern must be a constant string, not computed")
            continue
        flags = ""
        if flags_at is not None and len(args) > flags_at:
            value = _constant(args[flags_at])
            if value is None and not (
                len(args[flags_at]) == 1 and args[flags_at][0].text == "null"
            ):
                out.append(f"{name!r}: the flags must be a constant string")
                continue
            flags = value or ""
        if "x" in flags:
            out.append(f"{name!r}: the extended-syntax flag 'x' is not allowed")
            continue
        shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
        out.extend(f"{name}({shown!r}): {p}" for p in pattern_problems(pattern, "i" in flags))


def _arguments(tokens: Sequence[Token], i: int) -> list[list[Token]] | None:
    """The ``;``-separated arguments of a call whose ``(`` is at ``i``; None without one."""
    if i >= len(tokens) or tokens[i].kind != OP or tokens[i].text != "(":
        return None
    args: list[list[Token]] = [[]]
    depth = 0
    for t in tokens[i + 1 :]:
        if t.kind == OP and t.text in "([{":
            depth += 1
        elif t.kind == OP and t.text in ")]}":
            if depth == 0:
                return args
            depth -= 1
        elif t.kind == OP and t.text == ";" and depth == 0:
            args.append([])
            continue
        args[-1].append(t)
    return None  # pragma: no cover - tokenize balances brackets


def _constant(arg: list[Token]) -> str | None:
    if len(arg) == 1 and arg[0].kind == STRING and arg[0].value is not None:
        return arg[0].value
    return None


# --------------------------------------------------------------------------- patterns


@dataclass(slots=True)
class _Item:
    """One atom of a sequence and its repetition."""

    lo: int = 1
    hi: int = 1
    #: a group's branches (None: a single character, class or escape)
    branches: list[list[_Item]] | None = None
    #: the literal character, when the atom is one
    char: str | None = None
    atomic: bool = False  # (?>...) or a possessive quantifier: never backtracks into


@dataclass(slots=True)
class _Reading:
    problems: list[str] = field(default_factory=list)
    unbounded: int = 0


class _Parser:
    def __init__(self, src: str, found: _Reading) -> None:
        self.s = src
        self.i = 0
        self.found = found
        self.depth = 0

    def bad(self, why: str) -> None:
        self.found.problems.append(why)

    def alternation(self) -> list[list[_Item]]:
        branches = [self.sequence()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            branches.append(self.sequence())
        return branches

    def sequence(self) -> list[_Item]:
        items: list[_Item] = []
        while self.i < len(self.s) and self.s[self.i] not in "|)":
            item = self.atom()
            if item is None:
                continue
            self.quantifier(item)
            items.append(item)
        return items

    def atom(self) -> _Item | None:
        c = self.s[self.i]
        self.i += 1
        if c == "\\":
            return self.escape()
        if c == "[":
            self.char_class()
            return _Item()
        if c == "(":
            return self.group()
        if c in "^$":
            return None  # anchors match no text
        if c in "*+?":
            self.bad(f"quantifier {c!r} with nothing to repeat")
            return None
        return _Item(char=None if c == "." else c)

    def escape(self) -> _Item | None:
        if self.i >= len(self.s):
            self.bad("trailing backslash")
            return None
        c = self.s[self.i]
        self.i += 1
        if c.isdigit() and c != "0":
            self.bad(f"backreference \\{c} (backtracks without bound)")
            return _Item()
        if c == "k":
            self.bad("named backreference \\k (backtracks without bound)")
            return _Item()
        if c == "g":
            self.bad("subexpression call \\g (recursion)")
            return _Item()
        if c in "AzZbBG":
            return None  # anchors
        if c in "xuopPh" and self.i < len(self.s) and self.s[self.i] == "{":
            end = self.s.find("}", self.i)
            self.i = end + 1 if end >= 0 else len(self.s)
        return _Item(char=None if c.isalpha() else c)

    def char_class(self) -> None:
        depth = 1
        if self.i < len(self.s) and self.s[self.i] == "^":
            self.i += 1
        if self.i < len(self.s) and self.s[self.i] == "]":
            self.i += 1
        while self.i < len(self.s) and depth:
            c = self.s[self.i]
            self.i += 2 if c == "\\" else 1
            if c == "[":
                depth += 1
            elif c == "]":
                depth -= 1
        if depth:
            self.bad("unterminated character class")

    def group(self) -> _Item | None:
        if self.depth >= _MAX_GROUP_DEPTH:
            self.bad(f"groups nested more than {_MAX_GROUP_DEPTH} deep")
            self.i = len(self.s)
            return None
        atomic = False
        if self.s.startswith("?#", self.i):  # a comment
            end = self.s.find(")", self.i)
            self.i = end + 1 if end >= 0 else len(self.s)
            return None
        if self.s.startswith("?", self.i):
            self.i += 1
            if self.s.startswith(">", self.i):
                atomic = True
                self.i += 1
            elif self.s.startswith(("<=", "<!"), self.i):
                self.i += 2
            elif self.s[self.i : self.i + 1] in ("<", "'", "P"):
                close = ">" if self.s[self.i] in "<P" else "'"
                end = self.s.find(close, self.i + 1)
                self.i = end + 1 if end >= 0 else len(self.s)
            elif self.s.startswith("(", self.i):
                self.bad("conditional group (?(...)...)")
            else:  # (?:, (?=, (?!, options (?imx-imx) or (?imx-imx:...)
                while self.i < len(self.s) and self.s[self.i] not in ":)=!":
                    self.i += 1
                if self.s.startswith(")", self.i):
                    self.i += 1
                    return None  # an option switch
                self.i += 1
        self.depth += 1
        branches = self.alternation()
        self.depth -= 1
        if self.i >= len(self.s) or self.s[self.i] != ")":
            self.bad("unbalanced parenthesis")
        else:
            self.i += 1
        return _Item(branches=branches, atomic=atomic)

    def quantifier(self, item: _Item) -> None:
        if self.i >= len(self.s):
            return
        c = self.s[self.i]
        if c in "*+?":
            self.i += 1
            item.lo, item.hi = (0 if c != "+" else 1), (1 if c == "?" else _UNBOUNDED)
        elif c == "{":
            end = self.s.find("}", self.i)
            body = self.s[self.i + 1 : end] if end >= 0 else ""
            lo, sep, hi = body.partition(",")
            if end < 0 or not (lo.isdigit() or (sep and not lo)) or (hi and not hi.isdigit()):
                return  # a literal "{"
            self.i = end + 1
            item.lo = int(lo or 0)
            item.hi = int(hi) if hi else (_UNBOUNDED if sep else item.lo)
        else:
            return
        if self.i < len(self.s) and self.s[self.i] in "?+":
            if self.s[self.i] == "+":
                item.atomic = True  # possessive
            self.i += 1
        if item.hi >= _UNBOUNDED and not item.atomic:
            self.found.unbounded += 1


def pattern_problems(pattern: str, ignore_case: bool = False) -> list[str]:
    """Why ``pattern`` could backtrack catastrophically on some input ([] when it cannot)."""
    found = _Reading()
    p = _Parser(pattern, found)
    top = p.alternation()
    while p.i < len(pattern):  # a stray ")": Oniguruma refuses it; keep reading
        p.bad("unbalanced parenthesis")
        p.i += 1
        top.extend(p.alternation())
    for branch in top:
        _nesting(branch, False, ignore_case, found)
    if found.unbounded > MAX_UNBOUNDED:
        found.problems.append(
            f"{found.unbounded} unbounded repetitions; at most {MAX_UNBOUNDED} are allowed "
            "(adjacent ones multiply the backtracking by the string's length)"
        )
    return list(dict.fromkeys(found.problems))


def _nesting(items: Iterable[_Item], repeated: bool, ignore_case: bool, found: _Reading) -> None:
    """Report repetitions and alternations inside a repeated group."""
    for it in items:
        if it.branches is None:
            if repeated and it.hi > 1 and not it.atomic:
                found.problems.append(
                    "nested repetition: a repeated group holds another repetition "
                    "(backtracks exponentially)"
                )
            continue
        inside = (repeated or it.hi > 1) and not it.atomic
        if inside and repeated and it.hi > 1:
            found.problems.append(
                "nested repetition: a repeated group holds another repetition "
                "(backtracks exponentially)"
            )
        if inside and len(it.branches) > 1 and not _disjoint(it.branches, ignore_case):
            found.problems.append(
                "alternation under a repetition whose branches can match the same text "
                "(backtracks exponentially); use plain words with distinct first letters"
            )
        for branch in it.branches:
            _nesting(branch, inside, ignore_case, found)


def _disjoint(branches: Sequence[Sequence[_Item]], ignore_case: bool) -> bool:
    """Every branch a non-empty plain string, no two starting with the same character."""
    firsts: set[str] = set()
    for b in branches:
        if not b or any(i.char is None or i.branches is not None or i.hi != 1 for i in b):
            return False
        first = b[0].char or ""
        first = first.lower() if ignore_case else first
        if first in firsts:
            return False
        firsts.add(first)
    return True
