"""Where a reader's records come from: the sources and what fills their shards' queues.

A source (``source.Source``) owns a reader's shards: which, where each starts, and their
queues filled in position order. Kafka partitions (``kafka_source``: one consumer, composed of
``kafka_partitions``, ``kafka_fetch`` and ``kafka_flow`` under the ``read_ahead`` policy, with
the Iceberg ``cold_tier`` below a log start), archive tables alone (``table_source``) and local
Parquet/Arrow files (``file_source``).
"""
