"""Kafka's jars on this machine: fetched from Maven (or a release dir), and the Java tools they run."""

from kafeed.jars.fetch import (
    MIRROR_VERSION,
    QUICK_JVM,
    KafkaLibs,
    jvm_flags,
    resolve_libs,
    resolve_mirror_libs,
)

__all__ = ["MIRROR_VERSION", "QUICK_JVM", "KafkaLibs", "jvm_flags", "resolve_libs", "resolve_mirror_libs"]
