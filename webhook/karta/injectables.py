"""The pod fields a policy rule sets, one entry each (:data:`INJECTABLES`): everything about a
field lives on its entry (its JSON name, kind, where it lives below a template, a pod spec or
a fragmented definition, its syntax check, rendered maximum, entries bound, the admission
plugin that derives fields from it on a Pod, its schema in the policy CRDs). A new injectable
pod field is one entry here (docs/policy.md, "Which fields a definition can carry").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from webhook.base.limits import MAX_ANNOTATION_VALUE_BYTES
from webhook.base.names import (
    DNS_SUBDOMAIN_MAX,
    LABEL_VALUE_MAX,
    annotation_value_errors,
    dns_subdomain_errors,
    label_value_errors,
    priority_class_name_errors,
    qualified_name_errors,
    scheduler_name_errors,
)
from webhook.karta.roles import Role


@dataclass(frozen=True)
class Injectable:
    """A pod field a policy rule sets, and where a definition says it lives."""

    #: the rule's field in the policy (``labels``, ``schedulerName``)
    key: str
    #: one entry of it, in messages (``label``, ``schedulerName``)
    noun: str
    #: a map of keys (labels, annotations, nodeSelector) or one value (schedulerName); a list
    #: (tolerations) is neither: see ``is_list``
    is_map: bool
    #: where it lives below a PodTemplateSpec
    in_template: tuple[str, ...]
    #: how many leading steps of ``in_template`` must already exist (a template's ``spec`` is
    #: never created; its ``metadata`` may be)
    template_base: int
    #: where it lives below a PodSpec; None when it lives in the pod's metadata
    in_pod_spec: tuple[str, ...] | None
    #: where it lives below an ObjectMeta; None when it lives in the pod spec
    in_metadata: tuple[str, ...] | None
    #: the fragmented field that locates it; None when upstream's format has none (then a
    #: fragmented definition carries it only at the pod spec its paths imply,
    #: :mod:`webhook.karta.podspec`: never a guessed location)
    fragment: Role | None
    #: syntax of a key (maps) and of a value: the problems, [] when fine; None: free text
    check_key: Callable[[str], list[str]] | None
    check_value: Callable[[str], list[str]] | None
    #: the rule field's schema in the policy CRDs (manifests and chart are tested equal to it)
    schema: Mapping[str, Any]
    #: the longest a rendered value can be and still be written (the API server's syntax
    #: bound; annotations' values are free text, bounded in bytes)
    rendered_max: int
    #: entries of a map or list field over all the rules of a policy; None for one value
    max_entries: int | None
    #: on a Pod CREATE, the admission plugin that derives fields from this one before the
    #: webhooks run, and those fields (below ``spec``): removed when the plan sets this one,
    #: so the plugin's check of the patched Pod agrees (:mod:`webhook.mutation.podadmission`)
    derives: tuple[str, tuple[str, ...]] | None
    #: how a value that fails ``check_value`` is called in a warning (only with a check)
    invalid: str = ""
    #: values that count as not set: without ``overwrite`` they are replaced all the same. A
    #: zero value is unset for every field (Go's zero value: ``""`` is what the API server and
    #: controllers read as no value; ``null``, ``{}`` and ``[]`` are handled as absent by the
    #: planners), so an empty string never keeps a policy's value out
    unset: tuple[str, ...] = ("",)
    #: a list of objects (tolerations): each entry is appended unless one with the same
    #: identity (:func:`webhook.mutation.policy.toleration_identity`) is there
    is_list: bool = False


_STRING: Mapping[str, Any] = {"type": "string"}
_STRING_MAP: Mapping[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_TOLERATIONS: Mapping[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "key": {"type": "string"},
            "operator": {"type": "string"},
            "value": {"type": "string"},
            "effect": {"type": "string"},
            "tolerationSeconds": {"type": "integer", "format": "int64"},
        },
    },
}

INJECTABLES: tuple[Injectable, ...] = (
    Injectable(
        key="labels",
        noun="label",
        is_map=True,
        in_template=("metadata", "labels"),
        template_base=0,
        in_pod_spec=None,
        in_metadata=("labels",),
        fragment=Role.LABELS,
        check_key=qualified_name_errors,
        check_value=label_value_errors,
        invalid="is not a valid label value",
        schema=_STRING_MAP,
        rendered_max=LABEL_VALUE_MAX,
        max_entries=256,
        derives=None,
    ),
    Injectable(
        key="annotations",
        noun="annotation",
        is_map=True,
        in_template=("metadata", "annotations"),
        template_base=0,
        in_pod_spec=None,
        in_metadata=("annotations",),
        fragment=Role.ANNOTATIONS,
        check_key=qualified_name_errors,
        # free text, bounded in size (a value with variables is bounded at load with each
        # variable at its longest, and checked again once rendered)
        check_value=annotation_value_errors,
        invalid=f"is longer than {MAX_ANNOTATION_VALUE_BYTES:,} bytes",
        schema=_STRING_MAP,
        rendered_max=MAX_ANNOTATION_VALUE_BYTES,
        max_entries=256,
        derives=None,
    ),
    Injectable(
        key="schedulerName",
        noun="schedulerName",
        is_map=False,
        in_template=("spec", "schedulerName"),
        template_base=1,
        in_pod_spec=("schedulerName",),
        in_metadata=None,
        fragment=Role.SCHEDULER_NAME,
        check_key=None,
        check_value=scheduler_name_errors,
        invalid="is not a valid scheduler name",
        # The API server defaults every built-in pod spec (Pods, Deployments' and Jobs'
        # templates) to the default scheduler before any webhook sees it, so that value says
        # nothing about what the user wants; a policy's scheduler replaces it.
        unset=("", "default-scheduler"),
        schema=_STRING,
        rendered_max=DNS_SUBDOMAIN_MAX,
        max_entries=None,
        derives=None,
    ),
    Injectable(
        key="priorityClassName",
        noun="priorityClassName",
        is_map=False,
        in_template=("spec", "priorityClassName"),
        template_base=1,
        in_pod_spec=("priorityClassName",),
        in_metadata=None,
        fragment=Role.PRIORITY_CLASS_NAME,
        check_key=None,
        check_value=priority_class_name_errors,
        invalid="is not a valid priority class name",
        schema=_STRING,
        rendered_max=DNS_SUBDOMAIN_MAX,
        max_entries=None,
        # the Priority plugin fills the Pod's priority (and preemption policy) from its class
        derives=("Priority", ("priority", "preemptionPolicy")),
    ),
    Injectable(
        key="nodeSelector",
        noun="nodeSelector",
        is_map=True,
        in_template=("spec", "nodeSelector"),
        template_base=1,
        in_pod_spec=("nodeSelector",),
        in_metadata=None,
        fragment=None,  # upstream's fragmented format has no nodeSelector path: implied
        # at the pod spec the other paths end in (webhook.karta.podspec)
        check_key=qualified_name_errors,
        check_value=label_value_errors,
        invalid="is not a valid label value",
        schema=_STRING_MAP,
        rendered_max=LABEL_VALUE_MAX,
        max_entries=64,
        derives=None,
    ),
    Injectable(
        key="tolerations",
        noun="toleration",
        is_map=False,
        in_template=("spec", "tolerations"),
        template_base=1,
        in_pod_spec=("tolerations",),
        in_metadata=None,
        fragment=None,  # nor a tolerations path
        check_key=None,
        # each toleration is checked in full when the policy loads; only its value may hold
        # variables, and a rendered value is checked as a label value (as the API server does)
        check_value=label_value_errors,
        invalid="is not a valid toleration value",
        is_list=True,
        schema=_TOLERATIONS,
        rendered_max=LABEL_VALUE_MAX,
        max_entries=64,
        derives=None,
    ),
    Injectable(
        key="runtimeClassName",
        noun="runtimeClassName",
        is_map=False,
        in_template=("spec", "runtimeClassName"),
        template_base=1,
        in_pod_spec=("runtimeClassName",),
        in_metadata=None,
        fragment=None,  # upstream's fragmented format has no path for it: implied
        check_key=None,
        check_value=partial(dns_subdomain_errors, what="runtimeClassName"),
        invalid="is not a valid runtime class name",
        schema=_STRING,
        rendered_max=DNS_SUBDOMAIN_MAX,
        max_entries=None,
        # the RuntimeClass plugin sets the Pod's overhead from its class (and refuses a Pod
        # whose overhead is not its class's)
        derives=("RuntimeClass", ("overhead",)),
    ),
)
#: the injectables' keys, in table order (the policy's rule fields, the README's table)
INJECTABLE_KEYS: tuple[str, ...] = tuple(i.key for i in INJECTABLES)
#: entries of each map and list field over all the rules of a policy
POLICY_ENTRIES: Mapping[str, int] = {
    i.key: i.max_entries for i in INJECTABLES if i.max_entries is not None
}
