"""Topic planning and administration."""

from kafeed.choices import DEFAULT_PER_PARTITION_MBPS, Compression
from kafeed.topics.admin import PartitionInfo, TopicAdmin, TopicInfo, admin_client
from kafeed.topics.plan import TopicPlan, parse_retention, partitions_for, plan_topic

__all__ = [
    "DEFAULT_PER_PARTITION_MBPS",
    "Compression",
    "PartitionInfo",
    "TopicAdmin",
    "TopicInfo",
    "TopicPlan",
    "admin_client",
    "parse_retention",
    "partitions_for",
    "plan_topic",
]
