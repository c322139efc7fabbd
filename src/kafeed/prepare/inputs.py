"""Prepare's input patterns (``site-*.raw``) resolved against the cluster's topics when it starts.

A pattern selects the cluster's topics as they are at that moment, in name order, except
internal ``__`` topics and prepare's own outputs and dead-letter topic; a topic created
later (a new site) is read from the next start on. A pattern that selects nothing is a
:class:`~kafeed.errors.ConfigError` (exit 2) raised before any topic is created or written.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError
from kafeed.prepare.settings import PrepareSettings, is_pattern, matches
from kafeed.route import RuleSet

log = logging.getLogger("kafeed")

#: How many of the cluster's topics a pattern that matches nothing names.
SHOWN_TOPICS = 5


def resolve_inputs(settings: PrepareSettings, topics: Sequence[str], *,
                   rules: RuleSet | None = None) -> PrepareSettings:
    """``settings`` reading the topics its patterns select among ``topics`` (itself when it has none)."""
    if not settings.patterns:
        return settings
    own = {*settings.outputs(rules), settings.dlq_topic}
    candidates = sorted(t for t in topics if t not in own)
    resolved: list[str] = []
    for item in settings.input:
        if not is_pattern(item):
            resolved.append(item)
            continue
        found = [t for t in candidates if matches(t, item)]
        if not found:
            raise ConfigError(f"Input pattern {item!r} matches no topic; the cluster has {_few(candidates)}.",
                              hint="Check the pattern (a glob: * ? [...]) and the bootstrap servers.")
        log.info("input %s matched %s", item, ", ".join(found))
        resolved.extend(found)
    return settings.with_inputs(dict.fromkeys(resolved))


def resolve_on_cluster(settings: PrepareSettings, connection: ConnectionSettings, *,
                       rules: RuleSet | None = None) -> PrepareSettings:
    """:func:`resolve_inputs` against the topics of ``connection``'s cluster (asked only for patterns)."""
    if not settings.patterns:
        return settings
    from kafeed.topics import TopicAdmin

    return resolve_inputs(settings, TopicAdmin(connection).list(), rules=rules)


def _few(topics: Sequence[str]) -> str:
    visible = [t for t in topics if not t.startswith("__")]
    if not visible:
        return "no topics"
    shown = ", ".join(visible[:SHOWN_TOPICS])
    more = len(visible) - SHOWN_TOPICS
    return f"{shown} and {more} more" if more > 0 else shown
