"""The resume policy: what a reader does with a saved state, as pure functions.

Given a (validated) loader state and where a reader sits, :func:`choose_resume` says
whether it resumes exactly (same topology: its own entry, in-flight records re-read),
elastically (another topology: per-partition positions only) or fresh. Given the saved
positions of a partition and the topic as it is now (log start offset, high watermark,
partitions that exist), :func:`check_saved_partitions`, :func:`check_known_partitions` and
:func:`kafeed.loader.state.checkpoint.check_positions` refuse a state that does not fit the log, and
:func:`done_at_open` says whether a partition has nothing left before its end. The reader
asks the broker for the figures; the decisions live here, tested without Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafeed.errors import ResumeMismatch
from kafeed.loader.sources.assignment import parse_key, partition_key
from kafeed.loader.sources.partition import Entry, Partition, Ref
from kafeed.loader.state.checkpoint import RECREATED_HINT, buffered, carried, partition_plan

log = logging.getLogger("kafeed")


@dataclass
class PartitionStart:
    """Where a reader picks a partition up: ``next`` (seek), ``read`` (first offset not yet
    taken in), the exclusive ``end``, offsets already ``delivered`` beyond ``next``, tokens
    already emitted of partly delivered documents (``partial``, since an elastic resume) and the
    in-flight offsets to re-read (``restore``, exact resume)."""

    next: int
    read: int
    end: int | None
    delivered: set[int] = field(default_factory=set)
    partial: dict[int, int] = field(default_factory=dict)
    restore: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Resume:
    """How one reader starts: ``entry`` (exact: its own saved entry), ``plan`` (elastic:
    per-partition starts) or neither (fresh). ``known``: per topic, the highest partition
    the state names (kafeed.loader.state.resume.check_known_partitions)."""

    entry: dict[str, Any] | None = None
    plan: dict[str, dict[str, Any]] | None = None
    known: dict[str, int] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)  # elastic: the counts reader 0 carries on


def known_partitions(saved: Mapping[str, Any]) -> dict[str, int]:
    """Per topic, the highest partition any reader entry of ``saved`` names. Partitions are
    numbered from 0 and a topic only grows, so every lower one existed when it was saved."""
    known: dict[str, int] = {}
    for reader in saved["readers"].values():
        for key in reader["reader"]["partitions"]:
            topic, partition = parse_key(key)
            known[topic] = max(partition, known.get(topic, -1))
    return known


def choose_resume(saved: Mapping[str, Any] | None, *, mode: str, index: int, count: int,
                  rank: int = 0, worker: int = 0) -> Resume:
    """Reader ``index`` of ``count`` (rank ``rank``, DataLoader worker ``worker``) facing a
    validated loader state (or ``None``).

    Same reader count and not group mode: exact, and the state must hold this reader's
    entry. Otherwise elastic, from every reader's partitions (group mode takes what it
    has: the group decides who reads what).
    """
    if saved is None or not saved["readers"]:
        return Resume()
    known = known_partitions(saved)
    if mode != "group" and saved["num_readers"] == count:
        entry = saved["readers"].get(str(index))
        if entry is None:
            raise ResumeMismatch(
                f"The saved loader state has no entry for reader {index} (rank {rank}, worker {worker}).",
                hint="Load the state this rank saved, or merge_states() of every rank.")
        return Resume(entry=entry, known=known)
    if mode != "group" and len(saved["readers"]) != saved["num_readers"]:
        raise ResumeMismatch(
            f"Resuming {saved['num_readers']} readers' state with {count} readers needs every "
            f"reader's entry; this state has {len(saved['readers'])}.",
            hint="Save merge_states() of all ranks (all_gather_object) and load that.")
    if index == 0:
        log.info("kafeed loader: elastic resume from %s to %d readers", saved["num_readers"], count)
    return Resume(plan=partition_plan(dict(saved)), known=known,
                  stats=carried_stats(saved) if index == 0 else {})


def carried_stats(saved: Mapping[str, Any]) -> dict[str, int]:
    """What an elastic resume's first reader counts on from: the saved readers' records
    delivered (their in-flight ones are read again, and counted then) and bad records, so that
    the counts summed over the readers (kafeed lineage's documents) span the whole run. Tokens
    of the in-flight records are not in the state: the tokens count restarts."""
    records = bad = 0
    for reader in saved["readers"].values():
        if "sources" in reader:  # a mixture's readers count per source, and start again
            continue
        stats = reader["reader"]["stats"]
        records += int(stats["records"]) - len(buffered(reader)) - len(carried(reader))
        bad += int(stats["bad"])
    return {"records": records, "bad": bad}


def plan_starts(plan: Mapping[str, Mapping[str, Any]]) -> dict[str, PartitionStart]:
    """Elastic resume: per-partition positions only; in-flight records are read again."""
    return {
        key: PartitionStart(next=p["next"], read=p["next"], end=p["end"], delivered=set(p["delivered"]),
                            partial=dict(p["partial"]))
        for key, p in plan.items()
    }


def exact_starts(partitions: Mapping[str, Mapping[str, Any]],
                 in_flight: Iterable[Ref]) -> dict[str, PartitionStart]:
    """Exact resume: the saved positions, and the in-flight records (shuffle buffer, packer
    carry-over) to re-read by offset."""
    restore: dict[str, set[int]] = {}
    for key, offset in in_flight:
        restore.setdefault(key, set()).add(int(offset))
    return {
        key: PartitionStart(next=int(p["next"]), read=int(p["read"]), end=p["end"],
                            delivered={int(o) for o in p["delivered"]}, restore=restore.get(key, set()),
                            partial={int(o): int(e) for o, e in p.get("partial", ())})
        for key, p in partitions.items()
    }


def check_saved_partitions(saved: Iterable[str], existing: Iterable[tuple[str, int]]) -> None:
    """Every saved partition must still exist (a recreated topic may have fewer)."""
    present = list(existing)
    keys = {partition_key(t, p) for t, p in present}
    for key in sorted(saved):
        if key not in keys:
            topic, partition = parse_key(key)
            count = sum(1 for t, _ in present if t == topic)
            raise ResumeMismatch(
                f"The saved loader state has partition {partition} of topic {topic!r}, which now "
                f"has {count} partition(s).", hint=RECREATED_HINT)


def check_known_partitions(saved: Iterable[str], owned: Iterable[str], known: Mapping[str, int]) -> None:
    """Every partition this reader owns and has no saved position for must be newer than the
    state (numbered above the highest one it names of that topic, ``known``): an older one
    would be read again from its start, delivering its records twice."""
    for key in sorted(set(owned) - set(saved)):
        topic, partition = parse_key(key)
        if partition <= known.get(topic, -1):
            raise ResumeMismatch(
                f"The saved loader state has no position for partition {partition} of topic "
                f"{topic!r}, which existed when it was saved (it names partition {known[topic]}).",
                hint="Load the state as it was saved (merge_states() of every rank when ranks "
                "saved their own); one missing a partition would read that partition again.")


def partition_at(key: str, topic: str, partition: int, start: PartitionStart,
                 decode: Callable[[Entry], Any]) -> Partition:
    """A reader's shard picked up where ``start`` says, its entries decoding by ``decode``."""
    part = Partition(key=key, topic=topic, partition=partition, read=start.read, end=start.end,
                     delivered=set(start.delivered), partial=dict(start.partial),
                     restore=set(start.restore), in_flight=set(start.restore), seek=start.next,
                     decode=decode)
    part.fetch_done = done_at_open(start)
    return part


def check_starts(starts: Mapping[str, PartitionStart], every: list[tuple[str, int]], owned: set[str],
                 known: dict[str, int]) -> None:
    """Every saved shard exists (in ``every``), and every ``owned`` one older than the state is
    in it (:func:`check_saved_partitions`, :func:`check_known_partitions`)."""
    check_saved_partitions(starts, every)
    check_known_partitions(starts, owned, known)


def done_at_open(start: PartitionStart) -> bool:
    """Nothing left to fetch: a bounded partition already at its end with nothing to re-read.
    (A saved ``end`` beyond the high watermark is allowed: an explicit end may lie ahead.)"""
    return start.end is not None and start.next >= start.end and not start.restore
