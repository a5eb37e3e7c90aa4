"""The jq fields of a Karta definition by their JSON names (:class:`Role`): what the field
tables (:mod:`webhook.karta.fields`, :mod:`webhook.karta.injectables`) key on."""

from __future__ import annotations

from enum import StrEnum


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
