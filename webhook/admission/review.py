"""AdmissionReview ``admission.k8s.io/v1`` codec, framework-free.

``decode`` turns request bytes into a :class:`Request` or raises :class:`BadReview` with a
one-line reason (the HTTP layer answers 400 with it); ``encode`` turns a :class:`Response` into
bytes. The body is parsed exactly once; the object is handed on as parsed, never copied.
"""

from __future__ import annotations

import functools
from binascii import b2a_base64  # what base64.b64encode calls, without its frame
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

import orjson

from webhook.base import jsontext
from webhook.base.gvk import GVK
from webhook.base.jsonvalue import JSON, JSONObject
from webhook.base.limits import MAX_JSON_DEPTH

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"

# orjson: the body is decoded once per request and is up to 3 MiB; the standard library's
# decoder alone costs more than the rest of the hot path (see bench/). jsontext leaves orjson
# only for bodies nested deeper than it reads, for its own iterative reader (any Python).
_loads = jsontext.loads
# Patches and responses: orjson writes 254 levels at most, a patch value (policy-given) may be
# deeper below the patch's own levels; jsontext then writes it without recursion.
_dumps = jsontext.dumps
#: The object sits two levels down in the review (``request.object``): an object as deep as the
#: API server accepts makes a review this deep.
_REVIEW_DEPTH = MAX_JSON_DEPTH + 2


class Status(TypedDict, total=False):
    """``response.status``: a ``metav1.Status`` as the API server reads it from a webhook."""

    code: int
    reason: str
    message: str


class ResponseBody(TypedDict):
    """``response`` of an ``AdmissionReview`` (``admission.k8s.io/v1``)."""

    uid: str
    allowed: bool
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]  # base64 of the JSON Patch
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]
    status: NotRequired[Status]


class ReviewResponse(TypedDict):
    """The ``AdmissionReview`` a webhook answers with."""

    apiVersion: str
    kind: str
    response: ResponseBody


class BadReview(ValueError):
    """The body is not a usable AdmissionReview; the message is the one-line reason."""


@dataclass(frozen=True)
class Request:
    uid: str
    operation: str
    kind: GVK | None  # the object's kind as the API server names it (request.kind)
    resource: Mapping[str, JSON]
    sub_resource: str
    name: str
    namespace: str
    object: Any
    old_object: Any
    dry_run: bool
    user: str = ""
    raw: Mapping[str, JSON] = field(default_factory=dict, repr=False)

    @functools.cached_property
    def object_kind(self) -> GVK | None:
        """The kind the object says it is (its ``apiVersion`` and ``kind``), else
        ``request.kind``; looked up once per request (the server, the handler and the metrics
        all ask)."""
        obj = self.object
        gvk = GVK.of(obj) if isinstance(obj, Mapping) else None
        return gvk or self.kind


@dataclass
class Response:
    uid: str
    allowed: bool = True
    patch: list[JSONObject] | None = None
    warnings: list[str] = field(default_factory=list)
    audit: dict[str, str] = field(default_factory=dict)
    code: int | None = None
    reason: str | None = None
    message: str | None = None


def decode(body: bytes) -> Request:
    try:
        review = _loads(body, max_depth=_REVIEW_DEPTH)
    except jsontext.DepthError:
        raise BadReview(
            f"body is nested deeper than {MAX_JSON_DEPTH} levels below the review's request "
            "(the API server's limit for an object)"
        ) from None
    except (orjson.JSONDecodeError, ValueError, UnicodeDecodeError) as e:
        raise BadReview(f"body is not JSON: {str(e).splitlines()[0]}") from None
    if not isinstance(review, dict):
        raise BadReview("body is not a JSON object")
    if review.get("kind") != KIND or review.get("apiVersion") != API_VERSION:
        raise BadReview(
            f"expected apiVersion {API_VERSION!r} kind {KIND!r}, got "
            f"{review.get('apiVersion')!r} {review.get('kind')!r}"
        )
    req = review.get("request")
    if not isinstance(req, dict):
        raise BadReview("AdmissionReview has no request")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing")
    operation = req.get("operation")
    if operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise BadReview(f"request.operation {operation!r} is not CREATE, UPDATE, DELETE or CONNECT")
    kind = req.get("kind")
    gvk = None
    if isinstance(kind, dict) and isinstance(kind.get("kind"), str):
        gvk = GVK(str(kind.get("group") or ""), str(kind.get("version") or ""), kind["kind"])
    user = req.get("userInfo")
    resource = req.get("resource")
    return Request(
        uid=uid,
        operation=operation,
        kind=gvk,
        resource=resource if isinstance(resource, dict) else {},
        sub_resource=str(req.get("subResource") or ""),
        name=str(req.get("name") or ""),
        namespace=str(req.get("namespace") or ""),
        object=req.get("object"),
        old_object=req.get("oldObject"),
        dry_run=bool(req.get("dryRun")),
        user=str(user.get("username") or "") if isinstance(user, dict) else "",
        raw=req,
    )


def request_for(obj: Any, operation: str = "CREATE", uid: str = "offline") -> Request:
    """The request the API server would send for ``obj`` (the CLI's way into the handlers)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    return Request(
        uid=uid,
        operation=operation,
        kind=GVK.of(obj),
        resource={},
        sub_resource="",
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        object=obj,
        old_object=None,
        dry_run=True,
    )


def encode(resp: Response) -> bytes:
    body: ResponseBody = {"uid": resp.uid, "allowed": resp.allowed}
    if resp.patch:
        body["patchType"] = "JSONPatch"
        body["patch"] = b2a_base64(_dumps(resp.patch), newline=False).decode()
    if resp.warnings:
        body["warnings"] = [_warning(w) for w in resp.warnings]
    if resp.audit:
        body["auditAnnotations"] = resp.audit
    if not resp.allowed or resp.code is not None:
        status: Status = {}
        if resp.code is not None:
            status["code"] = resp.code
        if resp.reason:
            status["reason"] = resp.reason
        if resp.message:
            status["message"] = resp.message
        body["status"] = status
    review: ReviewResponse = {"apiVersion": API_VERSION, "kind": KIND, "response": body}
    return _dumps(review)


def _warning(text: str) -> str:
    # The API server drops warnings over 256 characters or with control characters.
    text = " ".join(text.split())
    return text if len(text) <= 256 else text[:253] + "..."


def dumps(value: Any) -> bytes:
    """Compact JSON, with the same encoder as responses."""
    return _dumps(value)
