"""The AdmissionReview v1 codec (webhook.admission.review), framework-free."""

from __future__ import annotations

import base64
import json

import pytest
from helpers import review

from webhook.admission import review as admission
from webhook.base.gvk import GVK


def test_decode_reads_what_the_api_server_sends() -> None:
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "n"}}
    req = admission.decode(json.dumps(review(obj, "UPDATE", resource="jobs")).encode())
    assert req.operation == "UPDATE" and req.kind == GVK("batch", "v1", "Job")
    assert req.name == "j" and req.namespace == "n" and req.user == "alice"
    assert req.object == obj and req.old_object == obj and req.dry_run is False
    assert req.resource["resource"] == "jobs"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{", "body is not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"apiVersion": "v1", "kind": "Pod"}', "expected apiVersion"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
            "request.uid is missing",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",'
            b' "request": {"uid": "u", "operation": "PATCH"}}',
            "request.operation 'PATCH'",
        ),
    ],
)
def test_decode_names_what_is_wrong(body: bytes, reason: str) -> None:
    with pytest.raises(admission.BadReview) as e:
        admission.decode(body)
    assert reason in str(e.value) and "\n" not in str(e.value)


def test_encode_an_allowed_patch_with_warnings_and_audit() -> None:
    ops = [{"op": "add", "path": "/a", "value": "b"}]
    resp = admission.Response("u1", patch=ops, warnings=["x\ny  " + "w" * 300], audit={"k": "v"})
    out = json.loads(admission.encode(resp))
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    r = out["response"]
    assert r["uid"] == "u1" and r["allowed"] is True and r["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(r["patch"])) == ops
    [w] = r["warnings"]  # one line, within the API server's 256 characters
    assert len(w) <= 256 and "\n" not in w and w.startswith("x y ")
    assert r["auditAnnotations"] == {"k": "v"} and "status" not in r


def test_encode_a_denial_carries_its_status() -> None:
    resp = admission.Response("u2", allowed=False, code=422, reason="Invalid", message="no")
    r = json.loads(admission.encode(resp))["response"]
    assert r["allowed"] is False and "patch" not in r
    assert r["status"] == {"code": 422, "reason": "Invalid", "message": "no"}


def test_request_for_is_a_create_as_the_api_server_would_send() -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}}
    req = admission.request_for(obj)
    assert req.operation == "CREATE" and req.kind == GVK("", "v1", "Pod")
    assert req.name == "p" and req.namespace == "n" and req.object is obj
