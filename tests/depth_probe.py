"""Objects as deep as the API server accepts, through everything on the request path, under a
recursion limit of 200 (run by tests/base/test_depth.py as a script, under each Python it tests).

From Python 3.12 C code recurses within a fixed limit that ``sys.setrecursionlimit`` does not
raise (cpython#107263), so nothing on the request path may recurse per level of an object: not
the JSON codec, not the walks of the mutation, not the sandbox child (started here by this same
interpreter). Prints one line per check and ``depth probe: ok`` at the end; any failure is a
traceback and a non-zero exit.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS), str(TESTS.parent)]  # this checkout's webhook, whatever is installed

from helpers import (  # noqa: E402
    ENGINE,
    JOBSET_KARTA,
    JOBSET_SAMPLE,
    REGISTRY,
    load,
    policy,
    review,
    sample,
)

from webhook.admission import handlers  # noqa: E402
from webhook.admission import review as admission  # noqa: E402
from webhook.admission.state import State  # noqa: E402
from webhook.base import jsontext  # noqa: E402
from webhook.base.limits import MAX_JSON_DEPTH, SANDBOX_DEPTH  # noqa: E402
from webhook.jq.sandbox import Sandbox  # noqa: E402
from webhook.server import app as server  # noqa: E402

LOW_LIMIT = 200


def nest(depth: int, leaf: Any = 1) -> Any:
    """``depth`` objects and lists, alternating, around ``leaf``."""
    out = leaf
    for i in range(depth):
        out = {"k": out, "n": i} if i % 2 else [i, out]
    return out


def depth_of(value: Any) -> int:
    """Nesting of ``value`` in containers, with an explicit stack."""
    deepest = 0
    todo = [(value, 1)]
    while todo:
        v, level = todo.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, level)
            todo.extend((c, level + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def main() -> None:
    kai = policy(schedulerName="kai-scheduler", labels={"kai.scheduler/queue": "research"})
    jobset = sample(*JOBSET_SAMPLE)
    jobset["spec"]["extra"] = nest(MAX_JSON_DEPTH - 2)  # the object: 10,000 levels
    dynamo = sample("nvidia.com-dynamographdeployment-v1alpha1", "agg.yaml")
    _, service = next(iter(dynamo["spec"]["services"].items()))
    service["config"] = nest(MAX_JSON_DEPTH - 4)
    assert depth_of(jobset) == depth_of(dynamo) == MAX_JSON_DEPTH
    review_depth = MAX_JSON_DEPTH + 2
    bodies = {
        "jobset CREATE": jsontext.dumps(review(jobset), max_depth=review_depth),
        "jobset UPDATE": jsontext.dumps(review(jobset, "UPDATE"), max_depth=review_depth),
        "dynamo CREATE (libjq)": jsontext.dumps(
            review(dynamo, resource="dynamographdeployments"), max_depth=review_depth
        ),
    }
    too_deep = {**jobset, "spec": {**jobset["spec"], "extra": [jobset["spec"]["extra"]]}}
    too_deep_body = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
    too_deep_body += b'{"uid":"u","operation":"CREATE","object":'
    too_deep_body += jsontext.dumps(too_deep, max_depth=MAX_JSON_DEPTH + 1) + b"}}"
    karta = load(JOBSET_KARTA)
    # deep where the Karta format is open (an unknown key elsewhere is refused)
    karta["spec"].setdefault("optimizationInstructions", {})["extra"] = nest(MAX_JSON_DEPTH - 3)
    karta_body = jsontext.dumps(review(karta, resource="kartas"), max_depth=review_depth)
    client = server.create_app(State([]), engine=ENGINE).test_client()
    sandbox = Sandbox(1)
    sandbox.start()
    ENGINE.warm()
    sys.setrecursionlimit(LOW_LIMIT)

    text = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert jsontext.dumps(jsontext.loads(text)) == text.encode()
    try:
        jsontext.loads("[" + text + "]")
        raise AssertionError("10,001 levels decoded")
    except jsontext.DepthError:
        pass
    print("codec: 10,000 levels decoded and encoded, 10,001 refused")

    for label, body in bodies.items():
        req = admission.decode(body)
        assert depth_of(req.object) == MAX_JSON_DEPTH
        r = handlers.mutate(req, REGISTRY, kai, ENGINE)
        assert r.failure is None and r.response.allowed, r.response.warnings
        ops = r.response.patch or []
        if req.operation == "CREATE":
            assert sum(op["path"].endswith("/schedulerName") for op in ops) >= 1, ops
        out = jsontext.loads(admission.encode(r.response))
        assert out["response"]["allowed"] is True
        print(f"{label}: decoded, mutated ({len(ops)} operations), answered")
        sys.stdout.flush()
    try:
        admission.decode(too_deep_body)
        raise AssertionError("an object of 10,001 levels was decoded")
    except admission.BadReview as e:
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in str(e), e
    print("an object of 10,001 levels: refused, saying so")

    # Through the HTTP app too: a Karta that deep on /validate, the JobSet on /mutate.
    for path, body in (("/validate", karta_body), ("/mutate", bodies["jobset CREATE"])):
        r = client.post(path, data=body, content_type="application/json")
        assert r.status_code == 200, r.get_data(as_text=True)[:2000]
        assert jsontext.loads(r.get_data())["response"]["allowed"] is True, (
            path,
            r.get_data()[:2000],
        )
    print("the app: /validate and /mutate answered")

    # The sandbox child: an input as deep as it reads, its values returned whole, an error
    # value as deep; deeper parts read as null.
    deep = nest(SANDBOX_DEPTH - 1)
    expected = jsontext.dumps(deep)
    [values, error, cut] = sandbox.run(
        [(".", "values"), ("error(.)", "values"), ("[paths] | length", "values")],
        {"a": deep},
        10.0,
    )
    assert "error" not in values, values
    assert jsontext.dumps(values["out"][0]["a"]) == expected
    assert error["error"] == jsontext.dumps({"a": deep}).decode()
    assert cut["out"][0] > SANDBOX_DEPTH, cut
    [pruned] = sandbox.run([(".", "values")], {"a": [deep]}, 10.0)
    assert depth_of(pruned["out"][0]) == SANDBOX_DEPTH, depth_of(pruned["out"][0])
    print(f"sandbox child: {SANDBOX_DEPTH} levels read, returned and raised; deeper cut")
    sandbox.close()
    ENGINE.close()
    print(f"depth probe: ok (Python {sys.version.split()[0]}, recursion limit {LOW_LIMIT})")


if __name__ == "__main__":
    main()
