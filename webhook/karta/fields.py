"""What the webhook knows about Karta fields, as two tables: the jq fields of a definition and
the pod fields a policy can inject.

Everything that needs to know about a definition's jq expressions derives it from
:data:`COMPONENT_FIELDS` and :data:`NESTED_FIELDS`: parsing (where a field sits in a component),
the list of expressions (every one screened and compiled), validation (how each is evaluated and
judged) and resolution (which ones a mutation, or a describe, needs). Likewise every place that
writes to a pod template derives it from :data:`INJECTABLES`: the policy's rule fields, where a
value lives below a template, a pod spec or a fragmented definition, and which syntax it must
have. A new Karta field is one row of the first table; a new injectable pod field one row of
the second.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from functools import partial
from typing import Any, Literal

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

#: How an expression is evaluated: its locations (jq ``path()``) or its values.
Mode = Literal["paths", "values"]
#: What an expression runs on: the workload object, or one of its pods.
Subject = Literal["workload", "pod"]


class Role(StrEnum):
    """A jq field by its JSON name (``phaseDefinition.path`` where the name alone is ambiguous)."""

    INSTANCE_ID = "instanceIdPath"
    POD_TEMPLATE_SPEC = "podTemplateSpecPath"
    POD_SPEC = "podSpecPath"
    METADATA = "metadataPath"
    SCHEDULER_NAME = "schedulerNamePath"
    LABELS = "labelsPath"
    ANNOTATIONS = "annotationsPath"
    RESOURCES = "resourcesPath"
    RESOURCE_CLAIMS = "resourceClaimsPath"
    POD_AFFINITY = "podAffinityPath"
    NODE_AFFINITY = "nodeAffinityPath"
    CONTAINERS = "containersPath"
    CONTAINER = "containerPath"
    PRIORITY_CLASS_NAME = "priorityClassNamePath"
    IMAGE = "imagePath"
    REPLICAS = "replicasPath"
    MIN_REPLICAS = "minReplicasPath"
    MAX_REPLICAS = "maxReplicasPath"
    PHASE = "phaseDefinition.path"
    CONDITIONS = "conditionsDefinition.path"
    STATUS_EXPRESSION = "byExpression.expression"
    SUSPEND_ACTION = "suspendAction.path"
    TYPE_KEY = "componentTypeSelector.keyPath"
    INSTANCE_SELECTOR = "componentInstanceSelector.idPath"
    REPLICA_KEY = "replicaSelector.keyPath"
    GROUP_BY_KEY = "groupByKeyPaths"
    FILTER = "filters"


class Need(IntEnum):
    """Who needs a field evaluated: planning a mutation needs the least, a describe more, and
    validation evaluates everything that runs on the workload."""

    MUTATE = 0
    DESCRIBE = 1
    CHECK = 2


#: The ``specDefinition`` patterns; upstream allows one per component.
TEMPLATE, POD_SPEC, FRAGMENTED = "podTemplateSpecPath", "podSpecPath", "fragmentedPodSpecDefinition"


@dataclass(frozen=True)
class Field:
    """One jq field of a Karta component."""

    role: Role
    #: JSON field names from the component to the field; () for fields inside lists (status
    #: matchers, suspend actions, pod groups), which the typed model parses
    at: tuple[str, ...]
    mode: Mode = "values"
    subject: Subject = "workload"
    need: Need = Need.CHECK
    #: the ``specDefinition`` pattern the field belongs to
    pattern: str | None = None
    #: its results are the component's instances (one per pod template)
    primary: bool = False
    #: the webhook writes at its locations
    write: bool = False
    #: a location without a value counts (it is created there) when its parent object exists
    created: bool = False
    #: required when the object that holds it is given
    required: bool = False
    #: only the root component's is used (the workload's status)
    root_only: bool = False

    @property
    def name(self) -> str:
        """The JSON field path below the component, as in error messages."""
        return ".".join(self.at) if self.at else self.role.value


# --------------------------------------------------------------------------- injectables


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

# --------------------------------------------------------------------------- the jq fields

#: Fragmented fields in the order of upstream's CRD.
FRAGMENTS: tuple[Role, ...] = (
    Role.SCHEDULER_NAME,
    Role.LABELS,
    Role.ANNOTATIONS,
    Role.RESOURCES,
    Role.RESOURCE_CLAIMS,
    Role.POD_AFFINITY,
    Role.NODE_AFFINITY,
    Role.CONTAINERS,
    Role.CONTAINER,
    Role.PRIORITY_CLASS_NAME,
    Role.IMAGE,
)
#: Read-only fragments that tell a pod's GPUs, most precise first.
GPU_FRAGMENTS: tuple[Role, ...] = (Role.CONTAINERS, Role.CONTAINER, Role.RESOURCES)
#: Fragments the webhook writes through (every injectable's that has one); the others are
#: read-only and may be computed, like upstream's ``resourcesPath: {requests: .spec.resources}``.
WRITE_FRAGMENTS: tuple[Role, ...] = tuple(i.fragment for i in INJECTABLES if i.fragment)
#: the injectables a fragmented definition can locate, in the order of ``WRITE_FRAGMENTS``
FRAGMENT_INJECTABLES: tuple[Injectable, ...] = tuple(i for i in INJECTABLES if i.fragment)

_SPEC = ("specDefinition",)
_FRAG = (*_SPEC, FRAGMENTED)


def _fragment(role: Role) -> Field:
    written = role in WRITE_FRAGMENTS
    return Field(
        role,
        (*_FRAG, role.value),
        "paths" if written else "values",
        need=Need.MUTATE if written else Need.DESCRIBE if role in GPU_FRAGMENTS else Need.CHECK,
        pattern=FRAGMENTED,
        primary=True,
        write=written,
        created=written,
    )


#: Every jq field at a fixed place in a component, in the order they are listed.
COMPONENT_FIELDS: tuple[Field, ...] = (
    Field(Role.INSTANCE_ID, ("instanceIdPath",), need=Need.MUTATE),
    Field(
        Role.POD_TEMPLATE_SPEC,
        (*_SPEC, TEMPLATE),
        "paths",
        need=Need.MUTATE,
        pattern=TEMPLATE,
        primary=True,
        write=True,
    ),
    Field(
        Role.POD_SPEC,
        (*_SPEC, POD_SPEC),
        "paths",
        need=Need.MUTATE,
        pattern=POD_SPEC,
        primary=True,
        write=True,
    ),
    # Not a pattern of its own (never counted as one): it pairs with podSpecPath.
    Field(
        Role.METADATA,
        (*_SPEC, "metadataPath"),
        "paths",
        need=Need.MUTATE,
        pattern=POD_SPEC,
        write=True,
        created=True,
    ),
    *(_fragment(r) for r in FRAGMENTS),
    Field(Role.REPLICAS, ("scaleDefinition", "replicasPath"), need=Need.DESCRIBE),
    Field(Role.MIN_REPLICAS, ("scaleDefinition", "minReplicasPath"), need=Need.DESCRIBE),
    Field(Role.MAX_REPLICAS, ("scaleDefinition", "maxReplicasPath"), need=Need.DESCRIBE),
    Field(
        Role.PHASE,
        ("statusDefinition", "phaseDefinition", "path"),
        need=Need.DESCRIBE,
        required=True,
        root_only=True,
    ),
    Field(
        Role.CONDITIONS,
        ("statusDefinition", "conditionsDefinition", "path"),
        need=Need.DESCRIBE,
        required=True,
        root_only=True,
    ),
    # Optional since upstream added ``matchLabels`` beside it (one of the two is required;
    # :mod:`webhook.validation.structure` says so).
    Field(Role.TYPE_KEY, ("podSelector", "componentTypeSelector", "keyPath"), subject="pod"),
    Field(
        Role.INSTANCE_SELECTOR,
        ("podSelector", "componentInstanceSelector", "idPath"),
        subject="pod",
        required=True,
    ),
    Field(
        Role.REPLICA_KEY,
        ("podSelector", "replicaSelector", "keyPath"),
        subject="pod",
        required=True,
    ),
)

#: jq fields inside lists of the model (one per matcher, action, pod-group member).
NESTED_FIELDS: dict[Role, Field] = {
    f.role: f
    for f in (
        Field(Role.STATUS_EXPRESSION, (), need=Need.DESCRIBE, root_only=True),
        Field(Role.SUSPEND_ACTION, (), "paths"),
        Field(Role.GROUP_BY_KEY, (), subject="pod"),
        Field(Role.FILTER, (), subject="pod"),
    )
}

BY_ROLE: dict[Role, Field] = {f.role: f for f in COMPONENT_FIELDS} | NESTED_FIELDS
