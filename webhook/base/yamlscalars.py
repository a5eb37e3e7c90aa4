"""Plain YAML scalars as the API server and kubectl read them (sigs.k8s.io/yaml over go-yaml v2),
not as PyYAML's YAML 1.1 does; the rules are go-yaml v2's ``resolve`` and sigs.k8s.io/yaml's
conversion to JSON:

- booleans: ``y``/``Y``/``n``/``N`` too (PyYAML keeps them text), besides yes/no/on/off/true/false;
- integers: Go's ``ParseInt`` with base 0 after dropping ``_``: ``0x``/``0X``, ``0o``/``0O``,
  ``0b``/``0B``, a leading ``0`` for octal; out of 64 bits a decimal one is a float;
- floats: ``1e3``, ``1.5E3`` (PyYAML needs a dot and a signed exponent), integral ones read
  back from JSON as integers (``08`` is 8); ``.inf`` and ``.nan`` have no JSON form: an error,
  as the API server's JSON encoder makes one;
- text: sexagesimal ``1:20`` (PyYAML: 80), ``=`` (PyYAML: an error), timestamps;
- map keys become text as sigs.k8s.io/yaml writes them (``true``, ``12``, ``1.5``); a null key
  is an error.

:func:`install` puts these rules on a PyYAML loader class (:mod:`webhook.base.documents`).
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import yaml
from yaml.constructor import ConstructorError

_TRUE = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
_FALSE = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}
_NULL = {"", "~", "null", "Null", "NULL"}
_SPECIAL = {f"{s}{v}" for s in ("", "+", "-") for v in (".inf", ".Inf", ".INF")} | {
    ".nan",
    ".NaN",
    ".NAN",
}
#: go-yaml v2's float syntax (``yamlStyleFloat``), tried on the text without ``_``.
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
#: Go's ``ParseInt(s, 0, 64)`` syntax, on the text without ``_``.
_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
#: The tag the loader gives every plain scalar but merge keys (resolved by :func:`resolve`).
_PLAIN_TAG = "tag:karta-webhook,2026:plain"
_ANY = re.compile(r"(?s).*")


def resolve(text: str, *, key: bool = False) -> Any:
    """The value of a plain scalar: text, bool, int, float or None (inf/nan are a ValueError);
    a ``key`` keeps its float a float (``1e6`` is the key ``1e+06``)."""
    number = float if key else _json_number
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    if text in _NULL:
        return None
    if text in _SPECIAL:
        raise ValueError(f"{text} has no JSON value")
    first = text[:1]
    if first == ".":
        return number(float(text)) if _FLOAT.fullmatch(text) else text
    if not (first.isdigit() and first.isascii()) and first not in "+-":
        return text
    plain = text.replace("_", "")
    if len(plain) <= 70 and _INT.fullmatch(plain):  # 64 bits take at most 66 characters
        sign, digits = (plain[0], plain[1:]) if plain[0] in "+-" else ("", plain)
        base = 8 if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit() else 0
        value = int(sign + digits, base)
        if -(1 << 63) <= value < (1 << 64):
            return value
    if _FLOAT.fullmatch(plain) and math.isfinite(float(plain)):
        return number(float(plain))  # Go's ParseFloat refuses what is out of range: text
    return text  # a sexagesimal number, a timestamp, ...


def _json_number(f: float) -> float | int:
    """A float as the JSON the API server gets reads back: Go writes an integral one below
    1e21 without a fraction (``8``), so it is an integer."""
    return int(f) if f.is_integer() and abs(f) < 1e21 else f


def key_text(key: Any) -> str:
    """A map key as sigs.k8s.io/yaml writes it into JSON."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return _go_float32_g(key)
    raise ValueError(f"unsupported map key {key!r}")


def _go_float32_g(f: float) -> str:
    """Go's ``strconv.FormatFloat(f, 'g', -1, 32)``: the shortest digits that read back as the
    same float32, in exponent form when the exponent is below -4 or 6 and above."""
    if f == 0:
        return "0"
    (f32,) = struct.unpack("f", struct.pack("f", f))
    for digits in range(1, 10):
        text = f"{f32:.{digits - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == f32:
            break
    mantissa, exp = text.split("e")
    e = int(exp)
    if e < -4 or e >= 6:
        return f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    return f"{float(text):.{max(0, digits - 1 - e)}f}"


def _construct_scalar(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return resolve(str(loader.construct_scalar(node)))
    except ValueError as e:
        raise ConstructorError(None, None, str(e), node.start_mark) from None


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[str, Any]:
    loader.flatten_mapping(node)  # merge keys (<<)
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        try:
            if key_node.tag == _PLAIN_TAG:
                text = key_text(resolve(str(key_node.value), key=True))
            else:
                text = key_text(loader.construct_object(key_node, deep=True))
        except ValueError as e:
            raise ConstructorError(None, None, str(e), key_node.start_mark) from None
        out[text] = loader.construct_object(value_node, deep=True)
    return out


def install(loader: type[yaml.SafeLoader]) -> None:
    """Resolve ``loader``'s plain scalars and map keys as the API server does: every plain
    scalar that is not a merge key gets one tag, whose constructor applies :func:`resolve`."""
    merge = [
        (first, (tag, rx))
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
        for tag, rx in resolvers
        if tag == "tag:yaml.org,2002:merge"
    ]
    loader.yaml_implicit_resolvers = {}
    for first, item in merge:
        loader.yaml_implicit_resolvers.setdefault(first, []).append(item)
    loader.add_implicit_resolver(_PLAIN_TAG, _ANY, None)
    loader.add_constructor(_PLAIN_TAG, _construct_scalar)
    loader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
