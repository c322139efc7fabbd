"""Kafka's jars on this machine: fetched from Maven (or a release dir), and the Java tools they run."""

from kafeed.jars.fetch import KafkaLibs, resolve_libs

__all__ = ["KafkaLibs", "resolve_libs"]
