"""Internal topics: which ones are kafeed's or Kafka's own, and what deleting one costs.

Names starting with ``__`` are internal by convention; kafeed's own start with
``__kafeed``. ``kafeed topic delete`` refuses them without ``--force`` and says
what would be lost; Kafka's own bookkeeping topics it refuses even with it.
"""

from __future__ import annotations

#: Kafka's own topics: the broker needs them, so not even --force deletes them.
KAFKA_OWN_TOPICS = {
    "__consumer_offsets": "it holds every consumer group's committed offsets, so every "
                          "group would lose its position",
    "__transaction_state": "it holds every transactional producer's state, so open "
                           "transactions would be lost and exactly-once stages would fail",
    "__share_group_state": "it holds every share group's delivery state, so in-flight "
                           "records would be redelivered or lost",
    "__cluster_metadata": "it is the KRaft metadata log, the cluster itself",
}

#: The progress markers of ``kafeed ingest`` (kept equal to ``kafeed.ingest.progress.PROGRESS_TOPIC``
#: by a test: topics sits below ingest and cannot import it).
INGEST_PROGRESS_TOPIC = "__kafeed_ingest_progress"
#: Prefix of the dedup changelogs of ``kafeed prepare`` (``__kafeed_dedup_<group>``).
DEDUP_CHANGELOG_PREFIX = "__kafeed_dedup_"
#: Prefix of the repartition topics of ``kafeed prepare`` (``__kafeed_repartition_<group>``).
REPARTITION_PREFIX = "__kafeed_repartition_"


def is_internal(name: str) -> bool:
    """True for names starting with ``__`` (Kafka's convention for internal topics)."""
    return name.startswith("__")


def deletion_cost(name: str) -> str | None:
    """What deleting ``name`` loses, in one clause; None for an ordinary topic."""
    if name in KAFKA_OWN_TOPICS:
        return KAFKA_OWN_TOPICS[name]
    if name == INGEST_PROGRESS_TOPIC:
        return ("it holds kafeed ingest's progress markers, so the next `kafeed ingest` of the "
                "same sources would re-send every record, duplicating them in the input topic")
    if name.startswith(DEDUP_CHANGELOG_PREFIX):
        group = name.removeprefix(DEDUP_CHANGELOG_PREFIX)
        return (f"it is the dedup changelog of the `kafeed prepare` group {group!r}, so its dedup "
                "state would be lost and documents it has already seen would pass again as new")
    if name.startswith(REPARTITION_PREFIX):
        group = name.removeprefix(REPARTITION_PREFIX)
        return (f"it carries the records of the `kafeed prepare` group {group!r} from its route step "
                "to its dedup step, so records routed but not yet deduplicated would be lost")
    if name.startswith("__kafeed"):
        return "it is one of kafeed's internal topics, so the state kept in it would be lost"
    if is_internal(name):
        return ("its name starts with '__', the mark of an internal topic (Kafka's or another "
                "tool's), so whatever state it holds would be lost")
    return None
