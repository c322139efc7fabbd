"""A local Apache Kafka cluster managed from Python."""

from kafeed.broker.cluster import LocalCluster, default_data_dir
from kafeed.broker.ports import free_port_block
from kafeed.broker.status import ClusterStatus, NodeStatus
from kafeed.choices import KAFKA_VERSION
from kafeed.home import kafeed_home
from kafeed.jars import KafkaLibs, resolve_libs

__all__ = [
    "KAFKA_VERSION",
    "ClusterStatus",
    "KafkaLibs",
    "LocalCluster",
    "NodeStatus",
    "default_data_dir",
    "free_port_block",
    "kafeed_home",
    "resolve_libs",
]
