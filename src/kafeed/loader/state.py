"""The loader's checkpoint: plain JSON data, constant keys, a version and a fingerprint.

::

    {
      "version": 1,
      "fingerprint": {"kind", "topics", "seq_len", "eos_id", "tokenizer"},
      "mode": "static" | "group" | "replicated",
      "num_readers": int | None,        # ranks x workers when it was taken
      "readers": {"<reader index>": {
          "index": int,
          "partitions": {"topic:partition": {
              "next": int,              # lowest offset not yet fully delivered
              "read": int,              # next offset this reader would take in
              "end": int | None,        # exclusive end (resolved once, kept)
              "delivered": [int, ...],  # offsets >= next already delivered (shuffle)
          "partial": [[offset, emitted], ...],  # only when some: documents partly emitted
                                    # before an elastic resume, not yet delivered since
          }},
          "rr": int,                    # round-robin cursor over its partitions
          "buffer": [[key, offset], ...],           # shuffle buffer, in order
          "rng": {...} | None,                      # shuffle RNG (numpy PCG64 state)
          "carry": [[key, offset, emitted], ...],   # packer carry-over
          "stats": {"records": int, "bad": int, "tokens": int},
      }},
      "next_worker": {"<rank>": int},   # whose batch comes next in the round-robin
    }

Everything between ``next`` and ``read`` that is not ``delivered`` is in flight (in the
shuffle buffer or the packer carry) and is re-read from Kafka on resume, so the state
never holds token ids. A resume under another topology (elastic) only needs the
per-partition part and the carry's ``emitted`` counts; see :func:`partition_plan`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kafeed.errors import ResumeMismatch
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state_fields import (
    READER_KEYS,
    RECREATED_HINT,
    as_int,
    check_reader,
    check_version,
    fail,
    index_key,
    plain_copy,
    require_keys,
    shown,
)

__all__ = [
    "READER_KEYS",
    "RECREATED_HINT",
    "STATE_KEYS",
    "STATE_VERSION",
    "check_positions",
    "check_reader",
    "check_state",
    "check_version",
    "empty_state",
    "fingerprint",
    "merge_states",
    "next_epoch",
    "partition_plan",
    "plain_copy",
    "reader_entries",
    "require_keys",
]

STATE_VERSION = 1
STATE_KEYS = ("version", "fingerprint", "mode", "num_readers", "readers", "next_worker")


def fingerprint(settings: LoaderSettings) -> dict[str, Any]:
    """What must not change between save and resume."""
    return {
        "kind": settings.kind,
        "topics": sorted(settings.topics),
        "seq_len": settings.seq_len,
        # Sample loaders have no eos_id; their saved fingerprints say 0.
        "eos_id": settings.eos_id if settings.eos_id is not None else 0,
        "tokenizer": settings.tokenizer,
    }


def empty_state(settings: LoaderSettings, expected: dict[str, Any] | None = None) -> dict[str, Any]:
    """The state of a loader that has read nothing (``expected``: a mixture's fingerprint)."""
    return {
        "version": STATE_VERSION,
        "fingerprint": fingerprint(settings) if expected is None else expected,
        "mode": settings.mode,
        "num_readers": None,
        "readers": {},
        "next_worker": {},
    }


ReaderCheck = Callable[[Any, str, LoaderSettings], None]


def check_state(state: Any, settings: LoaderSettings, *, expected: dict[str, Any] | None = None,
                reader_check: ReaderCheck = check_reader) -> dict[str, Any]:
    """Validate a saved state's structure and fit with the current settings; refuse anything
    else with :class:`ResumeMismatch` naming the field. Pure: the broker is not asked (the
    positions are checked against the topic when a reader opens, see
    :func:`check_positions`). A mixture passes its own fingerprint and reader check."""
    require_keys(state, STATE_KEYS, "top level")
    check_version(state["version"], STATE_VERSION, "Loader state")
    if expected is None:
        expected = fingerprint(settings)
    saved = state["fingerprint"]
    if not isinstance(saved, dict):
        fail("fingerprint", f"is not a mapping (got {type(saved).__name__})")
    if saved != expected:
        diff = sorted(str(k) for k in set(expected) | set(saved) if expected.get(k) != saved.get(k))
        details = "; ".join(f"{k}: saved {shown(saved.get(k))}, now {expected.get(k)!r}" for k in diff)
        raise ResumeMismatch(
            f"The saved loader state was taken with different settings ({details}).",
            hint="Resume with the same topics, seq_len, eos_id and tokenizer, or start fresh.",
        )
    if state["mode"] != settings.mode:
        raise ResumeMismatch(
            f"The saved loader state is for mode {shown(state['mode'])}, not {settings.mode!r}.")
    count = state["num_readers"]
    if count is not None:
        as_int(count, "num_readers", low=1)
    readers = state["readers"]
    if not isinstance(readers, dict):
        fail("readers", f"is not a mapping (got {type(readers).__name__})")
    if readers and count is None:
        fail("num_readers", "is null but the state has readers")
    for key, reader in readers.items():
        index = index_key(key, "readers")
        if count is not None and index >= count:
            fail("readers", f"has reader {index}, but num_readers is {count}")
        reader_check(reader, f"readers[{key!r}]", settings)
        if reader["index"] != index:
            fail(f"readers[{key!r}].index", f"is {reader['index']}, not {index}")
    workers = state["next_worker"]
    if not isinstance(workers, dict):
        fail("next_worker", f"is not a mapping (got {type(workers).__name__})")
    for key, worker in workers.items():
        index_key(key, "next_worker")
        if as_int(worker, f"next_worker[{key!r}]") >= (count or 1):
            fail(f"next_worker[{key!r}]", f"is {worker}, not below num_readers ({count})")
    return state  # type: ignore[no-any-return]


def next_epoch(state: dict[str, Any]) -> dict[str, Any]:
    """The state a new pass over a finished bounded run starts from: every position forgotten
    (``start`` and ``end`` are resolved again, so records added since are included), each
    reader's shuffle RNG and counts kept, so the next epoch is shuffled differently and a
    checkpoint taken in it resumes exactly."""
    out: dict[str, Any] = json.loads(json.dumps(state))
    for reader in reader_entries(out):
        reader.update(partitions={}, rr=0, buffer=[], carry=[])
    for reader in out["readers"].values():
        if "mix" in reader:  # a mixture's sources all flow again
            reader["mix"]["dry"] = []
    out["next_worker"] = {}
    return out


def reader_entries(state: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every reader entry of a state with per-partition positions: a mixture reader's
    per-source entries stand in its place."""
    for reader in state.get("readers", {}).values():
        if "sources" in reader:
            yield from (reader["sources"][name] for name in sorted(reader["sources"]))
        else:
            yield reader


def check_positions(key: str, nxt: int, read: int, low: int, high: int) -> None:
    """A partition's saved positions against its current log: ``next`` not below the log
    start offset ``low``, ``read`` not beyond the high watermark ``high``."""
    if nxt < low:
        raise ResumeMismatch(
            f"The saved loader state's next offset {nxt} of partition {key} is below its log start "
            f"offset {low}: the records it would resume from are gone.", hint=RECREATED_HINT)
    if read > high:
        raise ResumeMismatch(
            f"The saved loader state's read offset {read} of partition {key} is beyond its high "
            f"watermark {high}: the state holds offsets this partition never had.", hint=RECREATED_HINT)


def merge_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Merge the states of several ranks (e.g. from ``all_gather_object``) into one.

    Each rank's :meth:`StreamLoader.state_dict` holds only its own readers; the merged
    state holds all of them and can be loaded by every rank, under the same or another
    world size.
    """
    if not states:
        raise ValueError("merge_states needs at least one state")
    first = states[0]
    require_keys(first, STATE_KEYS, "top level")
    merged: dict[str, Any] = {
        "version": first["version"],
        "fingerprint": first["fingerprint"],
        "mode": first["mode"],
        "num_readers": first["num_readers"],
        "readers": {},
        "next_worker": {},
    }
    for state in states:
        require_keys(state, STATE_KEYS, "top level")
        for key in ("version", "fingerprint", "mode"):
            if state[key] != merged[key]:
                raise ResumeMismatch(f"Cannot merge loader states with different {key}.")
        if merged["num_readers"] is None:
            merged["num_readers"] = state["num_readers"]
        elif state["num_readers"] not in (None, merged["num_readers"]):
            raise ResumeMismatch("Cannot merge loader states taken with different reader counts.")
        for index, reader in state["readers"].items():
            if index in merged["readers"] and merged["readers"][index] != reader:
                raise ResumeMismatch(f"Two different states for reader {index}; merge one per rank.")
            merged["readers"][index] = reader
        merged["next_worker"].update(state["next_worker"])
    return merged


def partition_plan(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-partition positions of a (merged) state, for a resume under a new topology.

    Returns ``{key: {"next", "end", "delivered": set, "partial": {offset: emitted}}}``.
    In-flight records (shuffle buffer, packer carry) are simply not delivered, so the new
    owner reads them again; a document the packer had partly emitted resumes after its
    ``emitted`` tokens, so no token is delivered twice. Such a document stays in its
    partition's ``partial`` until it is delivered, so a state saved after the resume but
    before the new owner reached it still says so (a second elastic resume, or an exact one).
    """
    plan: dict[str, dict[str, Any]] = {}
    for reader in reader_entries(state):
        for key, entry in reader["partitions"].items():
            if key in plan:
                if state["mode"] == "replicated":
                    raise ResumeMismatch(
                        "A replicated-mode state cannot be resumed under another topology.",
                        hint="Resume with the same world size and worker count, or start fresh.",
                    )
                raise ResumeMismatch(f"Partition {key} appears in two readers' states.")
            plan[key] = {
                "next": int(entry["next"]),
                "end": entry["end"],
                "delivered": {int(o) for o in entry["delivered"]},
                "partial": {int(o): int(e) for o, e in entry.get("partial", ())},
            }
        for key, offset, emitted in reader["carry"]:
            if emitted and key in plan:
                plan[key]["partial"][int(offset)] = int(emitted)
    return plan
