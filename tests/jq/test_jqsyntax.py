"""Tests for webhook.jq.syntax: the tokenizer and the safety screen (checked against libjq)."""

from __future__ import annotations

import random

import jq
import pytest

from webhook.jq.syntax import Token, TokenizeError, screen, tokenize

# --------------------------------------------------------------------------------------------
# screen: denials
# --------------------------------------------------------------------------------------------

DENIED: list[tuple[str, str]] = [
    ("env", "function 'env' is not allowed: reads the environment"),
    ("env.HOME", "function 'env' is not allowed: reads the environment"),
    ('"home: \\(env.HOME)"', "function 'env' is not allowed: reads the environment"),
    ('"a\\("b\\(env)c")d"', "function 'env' is not allowed"),  # nested interpolation
    ('@base64 "\\(env)"', "function 'env' is not allowed"),
    ('{"\\(env.HOME)": 1}', "function 'env' is not allowed"),
    ("$ENV.PATH", "variable '$ENV' is not allowed: reads the environment"),
    ("$ENV", "variable '$ENV' is not allowed"),
    ("{$ENV}", "variable '$ENV' is not allowed"),
    ("$__loc__", "variable '$__loc__' is not allowed"),
    ("$__loc__.line", "variable '$__loc__' is not allowed"),
    ("$__prog_args", "variable '$__prog_args' is not allowed"),
    ("$__prog_name", "variable '$__prog_name' is not allowed"),
    ("input", "function 'input' is not allowed"),
    ("[inputs]", "function 'inputs' is not allowed"),
    ("input_filename", "function 'input_filename' is not allowed"),
    ("input_line_number", "function 'input_line_number' is not allowed"),
    ("debug", "function 'debug' is not allowed"),
    ('debug("x")', "function 'debug' is not allowed"),
    ("stderr", "function 'stderr' is not allowed"),
    ("halt", "function 'halt' is not allowed"),
    ('"x" | halt_error', "function 'halt_error' is not allowed"),
    ("halt_error(1)", "function 'halt_error' is not allowed"),
    ('import "m" as m; .', "keyword 'import' is not allowed"),
    ('include "m"; .', "keyword 'include' is not allowed"),
    ("module {a: 1}; .", "keyword 'module' is not allowed"),
    ("m::f", "module-qualified name 'm::f' is not allowed"),
    ("modulemeta", "function 'modulemeta' is not allowed"),
    ("get_search_list", "function 'get_search_list' is not allowed"),
    ("get_prog_origin", "function 'get_prog_origin' is not allowed"),
    ("get_jq_origin", "function 'get_jq_origin' is not allowed"),
    ("builtins", "function 'builtins' is not allowed"),
    ("del(.a)", "function 'del' is not allowed"),
    ('delpaths([["a"]])', "function 'delpaths' is not allowed"),
    ('setpath(["a"]; 1)', "function 'setpath' is not allowed"),
    ("[paths]", "function 'paths' is not allowed"),
    ("[leaf_paths]", "function 'leaf_paths' is not allowed"),
    ("recurse", "function 'recurse' is not allowed"),
    ("recurse(.[]?)", "function 'recurse' is not allowed"),
    ("recurse_down", "function 'recurse_down' is not allowed"),
    ("walk(.)", "function 'walk' is not allowed"),
    ("repeat(.)", "function 'repeat' is not allowed"),
    ("range(10)", "function 'range' is not allowed"),
    ("[limit(3; range(0; 10))]", "function 'range' is not allowed"),
    ("..", "recursive descent operator '..' is not allowed"),
    ("..|.a", "recursive descent operator '..' is not allowed"),
    ("[..]", "recursive descent operator '..' is not allowed"),
    (".a = 1", "assignment operator '=' is not allowed"),
    (".a |= 1", "assignment operator '|=' is not allowed"),
    (".a += 1", "assignment operator '+=' is not allowed"),
    (".a -= 1", "assignment operator '-=' is not allowed"),
    (".a *= 1", "assignment operator '*=' is not allowed"),
    (".a /= 1", "assignment operator '/=' is not allowed"),
    (".a %= 1", "assignment operator '%=' is not allowed"),
    (".a //= 1", "assignment operator '//=' is not allowed"),
    ("def f: env; f", "function 'env' is not allowed"),  # inside a def body
    ("def env: 1; env", "function 'env' is not allowed"),  # user def shadowing: still denied
    ("map(select(input))", "function 'input' is not allowed"),  # in function args
    ("if env then 1 else 2 end", "function 'env' is not allowed"),
    ("try env catch 1", "function 'env' is not allowed"),
    ("reduce range(3) as $x (0; . + $x)", "function 'range' is not allowed"),
    ("{a: env}", "function 'env' is not allowed"),  # object value, not key
    ("{a: 1 | env}", "function 'env' is not allowed"),
    ("{(env | keys[0]): 1}", "function 'env' is not allowed"),  # computed key
    ("{a: [env]}", "function 'env' is not allowed"),
    # ``if`` branches may hold commas directly inside an object: not entry separators.
    ("{a: if true then 1, env, 2 else 3 end}", "function 'env' is not allowed"),
    ("{a: if true then 1 else 2 end, b: env}", "function 'env' is not allowed"),
    ("$ ENV", "variable '$ENV' is not allowed"),  # spaced form (accepted by older jq)
    ("1 # comment\n| env", "function 'env' is not allowed"),  # comment ends at newline
    ("1 # comment \\\\\n| env", "function 'env' is not allowed"),  # even backslashes end it
    ("1 # comment \\\r\r\n| env", "function 'env' is not allowed"),
]


@pytest.mark.parametrize(("expr", "reason"), DENIED)
def test_screen_denies(expr: str, reason: str) -> None:
    reasons = screen(expr)
    assert any(reason in r for r in reasons), reasons


def test_screen_reports_all_offenders_deduplicated_in_order() -> None:
    assert screen("env | .a = input | env | $ENV | .. | .b |= 1 | .c = 2") == [
        "function 'env' is not allowed: reads the environment",
        "assignment operator '=' is not allowed",
        "function 'input' is not allowed: reads input beyond the object",
        "variable '$ENV' is not allowed: reads the environment",
        "recursive descent operator '..' is not allowed",
        "assignment operator '|=' is not allowed",
    ]


def test_screen_reasons_from_interpolations_keep_text_order() -> None:
    assert screen('"\\(input)" | env') == [
        "function 'input' is not allowed: reads input beyond the object",
        "function 'env' is not allowed: reads the environment",
    ]


# --------------------------------------------------------------------------------------------
# screen: look-alikes that must pass
# --------------------------------------------------------------------------------------------

ALLOWED: list[str] = [
    ".env",
    '."env"',
    '.["env"]',
    ".spec.input",
    ".spec.env[0].name",
    ".a.del.paths.range",
    "{env: .a}",
    "{env: 1, input: 2, del: 3}",
    '{"del": 1}',
    "{a: 1, env}",  # shorthand reads .env
    "{env}",
    "{import: 1, if: 2, end: 3}",
    "{a: if . then 1 else 2 end, env: 3}",
    '"env"',
    '"del(.a) and .. and $ENV and a = b"',
    '"x\\(.env)y"',
    '"\\("env")"',
    '.spec.template | select(.metadata.labels.app == "x")',
    ".a // 1",
    ".a == 1",
    ".a != 1",
    ".a <= 1",
    ".a >= 1",
    "$env",
    ". as $env | $env",
    ". as {env: $x} | $x",
    '.spec.containers | map(select(.name == "main")) | .[0]',
    "to_entries[] | .key",
    "def f: .a; f",
    "def f(g): g; f(.a)",
    '[.[] | splits(", ")]',
    'getpath(["a", "b"])',
    'error("x")',
    "[limit(3; .[])]",
    "[.[] | while(. < 10; . + 1)]",
    "until(. > 10; . + 1)",
    "reduce .[] as $x (0; . + $x)",
    "[foreach .[] as $x (0; . + $x)]",
    "label $out | .[] | if . then break $out else . end",
    "try .a catch .",
    ".a?",
    "1 # env, input, del(.a), .. and = in a comment",
    "1 # a comment continues after an odd backslash \\\n| env",
    "1 # also with CRLF \\\r\n| env",
    "@base64",
    '@json "v: \\(.a)"',
    ".[1:2]",
    "{a: .[1:2]}",
    "not",
    ".__loc__",
    "{__loc__: 1}",
]


@pytest.mark.parametrize("expr", ALLOWED)
def test_screen_allows(expr: str) -> None:
    assert screen(expr) == []


@pytest.mark.parametrize("expr", ALLOWED)
def test_allowed_examples_are_real_jq(expr: str) -> None:
    """Guard the fixtures themselves: each allowed example compiles in libjq."""
    jq.compile(expr, args={"env": 1})  # ``$env`` is a user variable, bound as --arg would


def test_comment_continuation_matches_libjq() -> None:
    """jq >= 1.7.1 continues a comment after an odd run of backslashes; the screen agrees."""
    assert jq.compile("1 # c \\\n + 100").input_value(None).all() == [1]
    assert jq.compile("1 # c \\\\\n + 100").input_value(None).all() == [101]
    assert jq.compile("1 # c \\\r\n + 100").input_value(None).all() == [1]
    assert jq.compile("1 # c \r + 100").input_value(None).all() == [1]


@pytest.mark.parametrize(
    "expr",
    ['"abc', '"\\(.a', '"\\(.a"', "1 ! 2", "(.a", ".a)", "[.a}", "{", '"\\q"', "$", "`"],
)
def test_screen_reports_untokenizable_text(expr: str) -> None:
    reasons = screen(expr)
    assert len(reasons) == 1 and reasons[0].startswith("cannot tokenize: "), reasons


def test_screen_never_raises_on_garbage() -> None:
    rng = random.Random(7)
    alphabet = [*'.[]{}()"\\$@#|,:;=+-*/%<>?!abenvi_01 \n', "\\(", "..", "env", "$ENV"]
    for _ in range(2000):
        expr = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        assert isinstance(screen(expr), list)


def test_tokenize_kinds() -> None:
    toks = tokenize('.a."b" | $x::y // @sh "\\(1)" | a::b(1e3) .. ?// # c')
    assert [(t.kind, t.text) for t in toks] == [
        ("field", ".a"),
        ("op", "."),
        ("string", '"b"'),
        ("op", "|"),
        ("var", "$x::y"),
        ("op", "//"),
        ("format", "@sh"),
        ("string", '"\\(1)"'),
        ("op", "|"),
        ("ident", "a::b"),
        ("op", "("),
        ("number", "1e3"),
        ("op", ")"),
        ("rec", ".."),
        ("op", "?//"),
    ]
    interp = toks[7].interpolations
    assert [[(t.kind, t.text) for t in inner] for inner in interp] == [[("number", "1")]]
    assert toks[2].value == "b" and toks[7].value is None


def test_tokenize_decodes_string_escapes() -> None:
    (tok,) = tokenize('"a\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00"')
    assert isinstance(tok, Token)
    assert tok.value == 'a"\\/\b\f\n\r\té\U0001f600'
    with pytest.raises(TokenizeError):
        tokenize('"\\x"')
