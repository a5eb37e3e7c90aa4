"""JSON as deep as the API server accepts (10,000 levels), without recursion: the codec of
webhook/base/jsontext.py, and the whole request path under a low recursion limit in every Python
this machine tests (tests/depth_probe.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from webhook.base import jsontext
from webhook.base.limits import MAX_JSON_DEPTH

PROBE = Path(__file__).resolve().parents[1] / "depth_probe.py"
#: Further interpreters to run the probe under (paths, ":"-separated): .ci/run sets it to the
#: newer CPythons it finds, each in a virtual environment with the project's dependencies.
EXTRA = [p for p in os.environ.get("KARTA_DEPTH_PYTHONS", "").split(":") if p]
DEEP = "[" * 1100 + "]" * 1100  # deeper than orjson reads (1,024)


def test_the_deepest_the_api_server_accepts_round_trips_and_one_more_level_is_refused() -> None:
    for text in (
        "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH,
        '{"a":' * MAX_JSON_DEPTH + "1" + "}" * MAX_JSON_DEPTH,
        '[1,{"a":"]","b":' * (MAX_JSON_DEPTH // 2) + "null" + "}]" * (MAX_JSON_DEPTH // 2),
    ):
        value = jsontext.loads(text.encode())
        assert jsontext.dumps(value) == text.encode()
        with pytest.raises(jsontext.DepthError, match=f"deeper than {MAX_JSON_DEPTH} levels"):
            jsontext.loads("[" + text + "]")
        with pytest.raises(jsontext.DepthError):
            jsontext.dumps([value])


def test_a_value_that_contains_itself_is_a_depth_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(jsontext.DepthError):
        jsontext.dumps(loop)


@pytest.mark.parametrize(
    "text",
    [
        f"[{DEEP}]",
        f' [1, "x]", {DEEP} , {{"k": [2]}},{DEEP},3 ]\n',
        f'{{"a": 1, "b\\"": {DEEP}, "c": {{"d": 2}}, "b\\"": 4}}',
        f'{{"k\\\\": {DEEP}, "k\\\\": {DEEP}}}',
        f'[{{"x": {DEEP}}}, "{"[" * 3000}"]',
    ],
)
def test_deep_documents_read_as_orjson_would_read_them_shallow(text: str) -> None:
    """Commas, keys and whitespace around the deep parts, brackets in strings, duplicate keys
    (the last wins, as at the API server): the same value as the standard library reads."""
    import json

    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, 20_000))  # the reference reader's (3.11 and 3.13)
    try:
        expected = json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
    finally:
        sys.setrecursionlimit(before)
    assert jsontext.dumps(jsontext.loads(text)) == expected.encode()


@pytest.mark.parametrize(
    "text",
    [
        f"[,{DEEP}]",
        f"[{DEEP},]",
        f"[1 {DEEP}]",
        f"[{DEEP} 1]",
        f"[{DEEP},,1]",
        f"[{DEEP}{DEEP}]",
        f"{{{DEEP}}}",
        f'{{"a" {DEEP}}}',
        f'{{"a":{DEEP} "b":1}}',
        f'{{"a":{DEEP},}}',
        f'{{"a"::{DEEP}}}',
        f'{{"a":1,,"b":{DEEP}}}',
        f"[{DEEP}]]",
        f"[{DEEP}",
        f"[{DEEP}]x",
        f'{{"a":{DEEP}]',
        f'{{"a\\":{DEEP}}}',
        f"[{DEEP}, NaN]",
        f"[{DEEP}, 01]",
        f'[{DEEP}, "\x01"]',
    ],
)
def test_deep_text_that_is_not_json_is_a_value_error_naming_where(text: str) -> None:
    with pytest.raises(ValueError, match=r"char \d+|column \d+") as e:
        jsontext.loads(text)
    assert not isinstance(e.value, jsontext.DepthError)


def test_long_runs_beside_a_deep_part_keep_their_order_and_values() -> None:
    import json

    items: list[Any] = [*range(50_000), {"deep": orjson.loads("[" * 900 + "]" * 900)}]
    value = [[*items, jsontext.loads(DEEP), *items, "é\u2028"]] * 2
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, 20_000))  # the reference writer's
    try:
        expected = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    finally:
        sys.setrecursionlimit(before)
    text = jsontext.dumps(value)
    assert text == expected
    back = jsontext.loads(text)
    assert jsontext.dumps(back) == expected
    assert back[1][:50_000] == list(range(50_000)) and back[1][-1] == "é\u2028"


def test_a_response_with_a_patch_value_deeper_than_orjson_writes_is_encoded() -> None:
    import base64

    from webhook.admission import review as admission

    deep = jsontext.loads(DEEP)
    patch = [{"op": "add", "path": "/spec/x", "value": deep}]
    out = jsontext.loads(admission.encode(admission.Response("u", patch=patch)))
    assert base64.b64decode(out["response"]["patch"]) == jsontext.dumps(patch)


@pytest.mark.parametrize("python", [sys.executable, *EXTRA])
def test_the_request_path_handles_the_deepest_objects_under_a_low_recursion_limit(
    python: str,
) -> None:
    """Decode, mutate (natively and in libjq), answer, and the sandbox child, under a recursion
    limit of 200: nothing recurses per level (from Python 3.12 the limit would not help C code)."""
    r = subprocess.run(
        [python, str(PROBE)], capture_output=True, text=True, timeout=300, env=dict(os.environ)
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "depth probe: ok" in r.stdout
