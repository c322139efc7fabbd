"""The confluent-kafka value types and constants kafeed's stages use, named once here.

Import this module inside the function that needs it (as ``from kafeed.kafka.types import
TopicPartition``): it loads confluent_kafka, which a plain ``import kafeed`` does not.
Clients are not here: they come from :class:`kafeed.kafka.KafkaClients`.
"""

from __future__ import annotations

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    AcknowledgeType,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicCollection,
    TopicPartition,
    libversion,
)
from confluent_kafka import __version__ as client_version
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "AcknowledgeType",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AlterConfigOpType",
    "ConfigEntry",
    "ConfigResource",
    "IsolationLevel",
    "KafkaError",
    "KafkaException",
    "Message",
    "NewTopic",
    "OffsetSpec",
    "ResourcePatternType",
    "ResourceType",
    "TopicCollection",
    "TopicPartition",
    "client_version",
    "libversion",
]
