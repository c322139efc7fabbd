"""Kafka's jars on this machine: fetched from Maven (or a release dir), and the Java tools they run."""

from kafeed.jars.fetch import QUICK_JIT, KafkaLibs, resolve_libs

__all__ = ["QUICK_JIT", "KafkaLibs", "resolve_libs"]
