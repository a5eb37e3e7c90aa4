"""What the webhook knows about Karta fields, as two tables: the jq fields of a definition and
the pod fields a policy can inject.

Everything that needs to know about a definition's jq expressions derives it from
:data:`COMPONENT_FIELDS` and :data:`NESTED_FIELDS`: parsing (where a field sits in a component),
the list of expressions (every one screened and compiled), validation (how each is evaluated and
judged) and resolution (which ones a mutation, or a describe, needs). Likewise every place that
writes to a pod template derives it from :data:`INJECTABLES`: the policy's rule fields, where a
value lives below a template, a pod spec or a fragmented definition, and which syntax it must
have. A new Karta field is one row of the first table; a new injectable pod field one row of
the second (:mod:`webhook.karta.injectables`, re-exported here; the jq fields' names:
:mod:`webhook.karta.roles`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from webhook.karta.injectables import (
    INJECTABLE_KEYS as INJECTABLE_KEYS,
)
from webhook.karta.injectables import (
    INJECTABLES as INJECTABLES,
)
from webhook.karta.injectables import (
    POLICY_ENTRIES as POLICY_ENTRIES,
)
from webhook.karta.injectables import (
    Injectable as Injectable,
)
from webhook.karta.roles import Role as Role

#: How an expression is evaluated: its locations (jq ``path()``) or its values.
Mode = Literal["paths", "values"]
#: What an expression runs on: the workload object, or one of its pods.
Subject = Literal["workload", "pod"]


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
