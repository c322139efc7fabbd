"""`kafeed mirror run`: check the config, start a MirrorMaker node, run until stopped or drained.

A drain (``until_caught_up``) takes every mirrored partition's end at the site when it
starts (ARCHITECTURE.md, "Drains": the whole input as of the call) and returns once the
target has committed records up to each, whichever node of the mirror cluster copied
them; a partition whose only offsets left at the site are transaction markers (a
transactional producer's, such as ``kafeed ingest``) counts as caught up. A drain that
sees nothing move for ``stall_s`` fails naming the partitions left.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from kafeed.choices import JitMode
from kafeed.config import ConnectionSettings
from kafeed.errors import DrainIncomplete, KafeedError
from kafeed.kafka.offsets import TopicPartitionKey
from kafeed.mirror.checks import REACH_TIMEOUT_S, Checked, check
from kafeed.mirror.config import MirrorSettings
from kafeed.mirror.process import MirrorNode
from kafeed.mirror.progress import caught_up_positions, end_offsets, mirrored_positions
from kafeed.telemetry.metrics import MIRROR_BEHIND
from kafeed.topics.admin import ensure_reachable

log = logging.getLogger("kafeed")

CHECK_INTERVAL_S = 1.0
#: How often a node that is not draining measures each site's backlog for its metrics.
METRICS_INTERVAL_S = 15.0
#: A drain with no partition moving for this long fails (a MirrorMaker node needs ~10-20 s
#: to start, join its Connect group and fence a killed predecessor's transactions).
STALL_S = 120.0


@dataclass
class MirrorRun:
    """How a run ended: the node's pid, and for a drain the source ends it reached per site."""

    pid: int | None = None
    caught_up: bool = False
    ends: dict[str, dict[TopicPartitionKey, int]] = field(default_factory=dict)

    @property
    def records(self) -> int:
        """Records (offsets) up to the drained ends, all sites together."""
        return sum(sum(e.values()) for e in self.ends.values())


def _left(checked: Checked, target: ConnectionSettings, ends: dict[str, dict[TopicPartitionKey, int]],
          ) -> dict[str, dict[TopicPartitionKey, tuple[int, int]]]:
    """Per site, the partitions the target has not committed up to ``ends``: (at, end)."""
    left: dict[str, dict[TopicPartitionKey, tuple[int, int]]] = {}
    for alias, site_ends in ends.items():
        at = caught_up_positions(checked.connections[alias], site_ends, mirrored_positions(target, alias))
        behind = {tp: (at.get(tp, 0), end) for tp, end in site_ends.items() if at.get(tp, 0) < end}
        if behind:
            left[alias] = behind
    return left


def _measure(settings: MirrorSettings, checked: Checked, unreadable: dict[str, str]) -> None:
    """Set ``kafeed_mirror_behind_records`` per site; a site that cannot be read keeps its last value.

    A site that cannot be read (down, or refusing the mirror's login since its password
    changed) is said once, and again when it can be read; ``unreadable`` keeps what was said.
    """
    target = checked.connections[settings.target.alias]
    for site in settings.sites:
        try:
            # First in slices that end at once on a refused login, naming it (end_offsets would
            # wait its whole timeout and say only that no broker answered).
            ensure_reachable(checked.connections[site.alias], timeout=REACH_TIMEOUT_S)
            ends = end_offsets(checked.connections[site.alias], checked.topics[site.alias])
            at = caught_up_positions(checked.connections[site.alias], ends,
                                     mirrored_positions(target, site.alias))
        except KafeedError as exc:
            if unreadable.get(site.alias) != exc.message:
                log.warning("Site %r cannot be read, so its flow waits while the other sites go on: %s",
                            site.alias, exc.message)
            unreadable[site.alias] = exc.message
            continue
        if unreadable.pop(site.alias, None) is not None:
            log.warning("Site %r can be read again; its flow goes on.", site.alias)
        behind = sum(max(0, end - at.get(tp, 0)) for tp, end in ends.items())
        MIRROR_BEHIND.labels(site=site.alias).set(behind)


def run_mirror(settings: MirrorSettings, *, until_caught_up: bool = False,
               stop_event: threading.Event | None = None, stall_s: float = STALL_S,
               jit: JitMode = "full") -> MirrorRun:
    """Run one node of the mirror cluster until ``stop_event`` is set, or drained when asked."""
    checked = check(settings)
    target = checked.connections[settings.target.alias]
    ends = ({site.alias: end_offsets(checked.connections[site.alias], checked.topics[site.alias])
             for site in settings.sites} if until_caught_up else {})
    node = MirrorNode(settings, checked, jit=jit)
    result = MirrorRun()
    stop = stop_event or threading.Event()
    node.start()
    result.pid = node.pid
    try:
        moved_at, last_left, measured_at = time.monotonic(), -1, 0.0
        unreadable: dict[str, str] = {}
        while not stop.wait(CHECK_INTERVAL_S):
            code = node.exit_code()
            if code is not None:
                raise KafeedError(f"The MirrorMaker node exited with status {code}: "
                                  f"{node.tail(3) or 'no output'}",
                                  hint=f"See {node.log_file}.")
            if not until_caught_up:
                if time.monotonic() - measured_at >= METRICS_INTERVAL_S:
                    _measure(settings, checked, unreadable)
                    measured_at = time.monotonic()
                continue
            try:
                left = _left(checked, target, ends)
            except KafeedError as exc:
                # A just-created internal topic without leaders yet, a target broker restarting:
                # read again next time; only a stall as long as stall_s fails the drain.
                if time.monotonic() - moved_at > stall_s:
                    raise
                log.debug("mirror drain: the target's positions could not be read yet: %s", exc.message)
                continue
            if not left:
                result.caught_up, result.ends = True, ends
                return result
            remaining = sum(end - at for parts in left.values() for at, end in parts.values())
            if remaining != last_left:
                moved_at, last_left = time.monotonic(), remaining
            elif time.monotonic() - moved_at > stall_s:
                named = "; ".join(f"{alias}: " + ", ".join(f"{t}[{p}] at {at:,} of {end:,}"
                                                           for (t, p), (at, end) in sorted(parts.items()))
                                  for alias, parts in sorted(left.items()))
                raise DrainIncomplete(f"The mirror made no progress for {stall_s:.0f} s with records "
                                      f"left: {named}.",
                                      hint=f"See `kafeed mirror status` and {node.log_file}.")
        return result
    finally:
        node.stop()
