"""YAML read as the API server reads it (sigs.k8s.io/yaml over go-yaml v2), where PyYAML's YAML
1.1 differs (issue 50 item 4): each case is what kubectl sends for the plain scalar."""

from __future__ import annotations

import pytest

from webhook.base.documents import parse_documents
from webhook.base.errors import InputError


def read(text: str) -> object:
    [(_, doc)] = parse_documents(text, "f.yaml")
    return doc


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("1:20", "1:20"),  # sexagesimal: PyYAML 80
        ("190:20:30", "190:20:30"),
        ("-1:30", "-1:30"),
        ("1:20.5", "1:20.5"),  # sexagesimal float: PyYAML 80.5
        ("2024-01-01", "2024-01-01"),  # a timestamp stays text
        ("2001-12-14t21:59:43.10-05:00", "2001-12-14t21:59:43.10-05:00"),
        ("=", "="),  # PyYAML: no constructor for tag:yaml.org,2002:value
        ("y", True), ("Y", True), ("n", False), ("N", False),  # PyYAML: text
        ("yes", True), ("No", False), ("on", True), ("OFF", False), ("TRUE", True),
        ("yEs", "yEs"),
        ("0755", 493),  # octal, as PyYAML
        ("0o17", 15), ("0O17", 15), ("0X1F", 31), ("0B11", 3),  # PyYAML: text
        ("0x1F", 31), ("-0x1F", -31), ("0b101", 5), ("-0b11", -3), ("1_000", 1000),
        ("08", 8),  # not octal: a float, written 8
        ("1e3", 1000), ("1.5E3", 1500), ("1.0e+3", 1000),  # PyYAML: text for the first two
        (".5", 0.5), ("-1.25", -1.25), ("1.", 1),
        ("1e999", "1e999"),  # out of a float's range: Go's ParseFloat fails, text
        ("99999999999999999999", 100000000000000000000),  # past 64 bits: a float
        ("0xFFFFFFFFFFFFFFFFFF", "0xFFFFFFFFFFFFFFFFFF"),
        ("18446744073709551615", 18446744073709551615),  # uint64
        ("~", None), ("null", None), ("NULL", None), ("nil", "nil"), ("None", "None"),
        ("inf", "inf"), ("NaN", "NaN"), ("+", "+"), ("0b", "0b"),
    ],
)  # fmt: skip
def test_a_plain_scalar_reads_as_kubectl_reads_it(scalar: str, value: object) -> None:
    got = read(f"a: {scalar}\n")
    assert got == {"a": value} and type(got["a"]) is type(value)  # type: ignore[index]


@pytest.mark.parametrize("scalar", ["'1:20'", '"y"', "!!str 0755", "'~'"])
def test_quoted_or_tagged_text_stays_text(scalar: str) -> None:
    assert read(f"a: {scalar}\n") == {"a": scalar.strip("'\"").removeprefix("!!str ")}


@pytest.mark.parametrize("scalar", [".inf", "-.Inf", "+.INF", ".nan", ".NaN"])
def test_infinity_and_nan_are_errors_with_their_line(scalar: str) -> None:
    """JSON has no value for them: the API server's encoder refuses them too."""
    with pytest.raises(InputError, match=r"f.yaml: .*line 2, column 4.*no JSON value"):
        read(f"b: 1\na: {scalar}\n")


def test_map_keys_become_text_as_sigs_yaml_writes_them() -> None:
    assert read("yes: 1\nn: 2\n12: 3\n1.5: 4\n0x10: 5\n1e6: 6\n") == {
        "true": 1, "false": 2, "12": 3, "1.5": 4, "16": 5, "1e+06": 6,
    }  # fmt: skip


def test_a_null_key_is_an_error() -> None:
    with pytest.raises(InputError, match=r"line 1.*unsupported map key"):
        read("~: 1\n")


def test_merge_keys_still_merge() -> None:
    assert read("base: &b {x: 1}\nc:\n  <<: *b\n  z: 2\n")["c"] == {"x": 1, "z": 2}  # type: ignore[index]
