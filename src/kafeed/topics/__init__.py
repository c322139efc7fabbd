"""Topic planning and administration."""

from kafeed.choices import DEFAULT_PER_PARTITION_MBPS, Compression
from kafeed.topics.admin import TopicAdmin
from kafeed.topics.describe import PartitionInfo, TopicInfo
from kafeed.topics.internal import KAFKA_OWN_TOPICS, deletion_cost, is_internal
from kafeed.topics.plan import (
    MAX_PARTITIONS,
    TopicPlan,
    TopicRequest,
    parse_retention,
    partitions_for,
    plan_topic,
    topic_request,
)

__all__ = [
    "DEFAULT_PER_PARTITION_MBPS",
    "KAFKA_OWN_TOPICS",
    "MAX_PARTITIONS",
    "Compression",
    "PartitionInfo",
    "TopicAdmin",
    "TopicInfo",
    "TopicPlan",
    "TopicRequest",
    "deletion_cost",
    "is_internal",
    "parse_retention",
    "partitions_for",
    "plan_topic",
    "topic_request",
]
