"""The loader's checkpoint: plain JSON data, constant keys, a version and a fingerprint.

It is the loader node's state (kafeed.loader.nodes.node), each reader's node state nested::

    {
      "version": 2,
      "fingerprint": {"kind", "topics", "seq_len", "eos_id", "tokenizer"},
      "mode": "static" | "group" | "replicated",
      "num_readers": int | None,        # ranks x workers when it was taken
      "readers": {"<reader index>": {   # a stream node (a mixture's: kafeed.loader.nodes.mixing)
          "version": 1,
          "index": int,
          "reader": {"version": 1,
              "partitions": {"topic:partition": {
                  "next": int,              # lowest offset not yet fully delivered
                  "read": int,              # next offset this reader would take in
                  "end": int | None,        # exclusive end (resolved once, kept)
                  "delivered": [int, ...],  # offsets >= next already delivered (shuffle)
                  "partial": [[offset, emitted], ...],  # only when some: documents partly
                                    # emitted before an elastic resume, not yet delivered since
              }},
              "rr": int,                    # round-robin cursor over its partitions
              "stats": {"records": int, "bad": int, "tokens": int}},
          "shuffle": {"version": 1, "rng": {...},          # numpy PCG64 state
                      "items": [[key, offset], ...]} | None,  # the buffer, in order
          "packer": {"version": 1, "carry": [[key, offset, emitted], ...]} | None,  # tokens
      }},
      "next_worker": {"<rank>": int},   # whose batch comes next in the round-robin
    }

Everything between ``next`` and ``read`` that is not ``delivered`` is in flight (in the
shuffle buffer or the packer carry) and is re-read from Kafka on resume, so the state
never holds token ids. A resume under another topology (elastic) only needs the
per-partition part and the carry's ``emitted`` counts; see :func:`partition_plan`.

A state of layout 1 (every reader's pieces flattened into one entry: ``partitions``,
``rr``, ``buffer``, ``rng``, ``carry``, ``stats``) is converted when it is read
(:func:`upgraded`), so checkpoints saved before the nested layout resume as they were.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kafeed.errors import ResumeMismatch
from kafeed.loader.nodes.node import (
    NODE_VERSIONS,
    STATE_HINT,
    check_node,
    check_version,
    fail,
    require_keys,
    shown,
)
from kafeed.loader.nodes.record_kinds import KINDS
from kafeed.loader.settings import LoaderSettings

__all__ = [
    "RECREATED_HINT",
    "STATE_KEYS",
    "STATE_VERSION",
    "STREAM_KEYS",
    "buffered",
    "carried",
    "check_positions",
    "check_reader",
    "check_state",
    "empty_state",
    "fingerprint",
    "merge_states",
    "next_epoch",
    "partition_plan",
    "plain_copy",
    "reader_entries",
    "upgraded",
]

STREAM_KEYS = ("index", "reader", "shuffle", "packer")  # besides "version"
READER_KEYS = ("partitions", "rr", "stats")
SHUFFLE_KEYS = ("rng", "items")
PACKER_KEYS = ("carry",)
PARTITION_KEYS = ("next", "read", "end", "delivered")
STATS_KEYS = ("records", "bad", "tokens")


RECREATED_HINT = (
    "A state fits only the log it was taken from: if the topic was deleted and recreated (or "
    "retention removed those records), start without the state, or at chosen offsets with start=.")


def as_int(value: Any, path: str, low: int = 0) -> int:
    """An int (a bool is not one here) of at least ``low``."""
    if not isinstance(value, int) or isinstance(value, bool):
        fail(path, f"is not an integer (got {shown(value)})")
    if value < low:
        fail(path, f"is {value}, below {low}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        fail(path, f"is not a list (got {type(value).__name__})")
    return value


def _decimal(text: str) -> bool:
    """A plain non-negative decimal number as ``str(int)`` writes it."""
    return 0 < len(text) <= 18 and text.isascii() and text.isdigit() and str(int(text)) == text


def plain_copy(state: Any) -> Any:
    """``state`` through JSON, as a checkpoint stores it; anything else is refused."""
    try:
        return json.loads(json.dumps(state, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ResumeMismatch(f"The saved loader state is not JSON data ({shown(str(exc))}).",
                             hint=STATE_HINT) from None


def index_key(key: Any, path: str) -> int:
    """A JSON object key that stands for a non-negative integer ("0", "12")."""
    if not isinstance(key, str) or not _decimal(key):
        fail(path, f"has key {shown(key)}, not a reader/rank number")
    return int(key)


def _check_rng(rng: Any, path: str) -> None:
    """numpy's PCG64 bit-generator state, as ShuffleBuffer saves it."""
    require_keys(rng, ("bit_generator", "state", "has_uint32", "uinteger"), path)
    if rng["bit_generator"] != "PCG64":
        fail(f"{path}.bit_generator", f"is {shown(rng['bit_generator'])}, not 'PCG64'")
    require_keys(rng["state"], ("state", "inc"), f"{path}.state")
    for name in ("state", "inc"):
        if as_int(rng["state"][name], f"{path}.state.{name}") >= 2**128:
            fail(f"{path}.state.{name}", "does not fit in 128 bits")
    if as_int(rng["has_uint32"], f"{path}.has_uint32") > 1:
        fail(f"{path}.has_uint32", "is not 0 or 1")
    if as_int(rng["uinteger"], f"{path}.uinteger") >= 2**32:
        fail(f"{path}.uinteger", "does not fit in 32 bits")


def _check_partition(entry: Any, path: str) -> tuple[int, int]:
    """One partition's positions; returns (next, read)."""
    require_keys(entry, PARTITION_KEYS, path, optional=("partial",))
    nxt = as_int(entry["next"], f"{path}.next")
    read = as_int(entry["read"], f"{path}.read")
    if read < nxt:
        fail(f"{path}.read", f"({read}) is below next ({nxt})")
    end = entry["end"]
    if end is not None:
        as_int(end, f"{path}.end")
        if read > nxt and read > end:
            fail(f"{path}.end", f"({end}) is below offsets already read (up to {read - 1})")
    seen: set[int] = set()
    for i, offset in enumerate(_list(entry["delivered"], f"{path}.delivered")):
        as_int(offset, f"{path}.delivered[{i}]")
        if not nxt <= offset < read:
            fail(f"{path}.delivered[{i}]", f"({offset}) is outside [next, read) = [{nxt}, {read})")
        if offset in seen:
            fail(f"{path}.delivered[{i}]", f"({offset}) is listed twice")
        seen.add(offset)
    for i, pair in enumerate(_list(entry.get("partial", []), f"{path}.partial")):
        if not isinstance(pair, list) or len(pair) != 2:
            fail(f"{path}.partial[{i}]", f"is not an [offset, emitted] pair (got {shown(pair)})")
        if as_int(pair[0], f"{path}.partial[{i}][0]") < nxt or as_int(pair[1], f"{path}.partial[{i}][1]") < 1:
            fail(f"{path}.partial[{i}]", f"({pair}) is not an offset from next ({nxt}) with tokens emitted")
    return nxt, read


def _check_ref(ref: Any, path: str, positions: dict[str, tuple[int, int]], width: int) -> None:
    """A ``[key, offset, ...]`` reference to an in-flight record of this reader."""
    if not isinstance(ref, list) or len(ref) != width:
        fail(path, f"is not a list of {width} items (got {shown(ref)})")
    key = ref[0]
    if not isinstance(key, str) or key not in positions:
        fail(f"{path}[0]", f"({shown(key)}) is not one of this reader's partitions")
    offset = as_int(ref[1], f"{path}[1]")
    nxt, read = positions[key]
    if not nxt <= offset < read:
        fail(f"{path}[1]", f"({offset}) is outside [next, read) = [{nxt}, {read}) of {key}")


def check_reader(entry: Any, path: str, settings: LoaderSettings) -> None:
    """One reader's entry, a stream node's state with its reader, shuffle buffer and packer
    (a mixture's entry holds one per source: kafeed.loader.nodes.mixing.check_entry)."""
    check_node(entry, "stream", STREAM_KEYS, path)
    as_int(entry["index"], f"{path}.index")
    reader = entry["reader"]
    check_node(reader, "reader", READER_KEYS, f"{path}.reader")
    parts = reader["partitions"]
    if not isinstance(parts, dict):
        fail(f"{path}.reader.partitions", "is not a mapping")
    positions: dict[str, tuple[int, int]] = {}
    for key, part in parts.items():
        topic, sep, partition = str(key).rpartition(":")
        if not sep or not _decimal(partition):
            fail(f"{path}.reader.partitions", f"has key {shown(key)}, not 'topic:partition'")
        if topic not in settings.topics:
            fail(f"{path}.reader.partitions", f"has partition {key!r} of a topic this loader does not read",
                 hint="Resume with the same topics, or start fresh.")
        positions[key] = _check_partition(part, f"{path}.reader.partitions[{key!r}]")
    as_int(reader["rr"], f"{path}.reader.rr")
    stats = reader["stats"]
    require_keys(stats, STATS_KEYS, f"{path}.reader.stats")
    for name in STATS_KEYS:
        as_int(stats[name], f"{path}.reader.stats.{name}")
    shuffle = entry["shuffle"]
    if shuffle is not None:
        check_node(shuffle, "shuffle", SHUFFLE_KEYS, f"{path}.shuffle")
        _check_rng(shuffle["rng"], f"{path}.shuffle.rng")
        for i, ref in enumerate(_list(shuffle["items"], f"{path}.shuffle.items")):
            _check_ref(ref, f"{path}.shuffle.items[{i}]", positions, 2)
    packer = entry["packer"]
    if not KINDS[settings.kind].packs:
        if packer is not None:
            fail(f"{path}.packer", "is a packer's state, which a sample loader never has")
        return
    check_node(packer, "packer", PACKER_KEYS, f"{path}.packer")
    for i, ref in enumerate(_list(packer["carry"], f"{path}.packer.carry")):
        _check_ref(ref, f"{path}.packer.carry[{i}]", positions, 3)
        as_int(ref[2], f"{path}.packer.carry[{i}][2]")


def buffered(entry: dict[str, Any]) -> list[list[Any]]:
    """A stream entry's shuffle buffer: ``[key, offset]`` per record, in order."""
    shuffle = entry["shuffle"]
    items: list[list[Any]] = [] if shuffle is None else shuffle["items"]
    return items


def carried(entry: dict[str, Any]) -> list[list[Any]]:
    """A stream entry's packer carry-over: ``[key, offset, emitted]`` per document."""
    packer = entry["packer"]
    carry: list[list[Any]] = [] if packer is None else packer["carry"]
    return carry


STATE_VERSION = NODE_VERSIONS["loader"]
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
    state = upgraded(state)
    require_keys(state, STATE_KEYS, "top level")
    check_version(state["version"], STATE_VERSION, "The saved loader state (loader node)")
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


def upgraded(state: Any) -> Any:
    """``state`` in the current layout: one of layout 1 converted (each reader's flat entry
    nested into its stream, reader, shuffle and packer states; a mixture's into its sources
    and schedule), anything else as it is, for the checks to judge."""
    version = state.get("version") if isinstance(state, dict) else None
    if type(version) is not int or version != 1 or not isinstance(state.get("readers"), dict):
        return state  # (a bool is not version 1)
    fingerprint = state.get("fingerprint")
    kind = KINDS.get(str(fingerprint.get("kind"))) if isinstance(fingerprint, dict) else None
    packs = kind.packs if kind is not None else True
    readers = {key: _mixture_v1(entry, packs) if isinstance(entry, dict) and "sources" in entry
               else _stream_v1(entry, packs) for key, entry in state["readers"].items()}
    return {**state, "version": STATE_VERSION, "readers": readers}


_FLAT_KEYS = ("index", "partitions", "rr", "buffer", "rng", "carry", "stats")


def _stream_v1(entry: Any, packs: bool) -> Any:
    """A layout-1 reader entry as a stream node's state (anything else as it is)."""
    if not isinstance(entry, dict) or set(entry) != set(_FLAT_KEYS):
        return entry
    shuffle = None
    if entry["rng"] is not None or entry["buffer"]:
        shuffle = {"version": 1, "rng": entry["rng"], "items": entry["buffer"]}
    packer = {"version": 1, "carry": entry["carry"]} if packs or entry["carry"] else None
    return {"version": 1, "index": entry["index"],
            "reader": {"version": 1, "partitions": entry["partitions"], "rr": entry["rr"],
                       "stats": entry["stats"]},
            "shuffle": shuffle, "packer": packer}


def _mixture_v1(entry: dict[str, Any], packs: bool) -> Any:
    """A layout-1 mixture entry as a mixture node's state (anything else as it is)."""
    mix = entry.get("mix")
    sources = entry.get("sources")
    if set(entry) != {"index", "sources", "mix"} or not isinstance(sources, dict) \
            or not isinstance(mix, dict) or set(mix) != {"weights", "credits", "tokens", "dry"}:
        return entry
    return {"version": 1, "index": entry["index"],
            "sources": {name: _stream_v1(source, packs) for name, source in sources.items()},
            "schedule": {"version": 1, "weights": mix["weights"], "credits": mix["credits"]},
            "tokens": mix["tokens"], "dry": mix["dry"]}


def next_epoch(state: dict[str, Any]) -> dict[str, Any]:
    """The state a new pass over a finished bounded run starts from: every position forgotten
    (``start`` and ``end`` are resolved again, so records added since are included), each
    reader's shuffle RNG and counts kept, so the next epoch is shuffled differently and a
    checkpoint taken in it resumes exactly."""
    out: dict[str, Any] = json.loads(json.dumps(upgraded(state)))
    for entry in reader_entries(out):
        entry["reader"].update(partitions={}, rr=0)
        if entry["shuffle"] is not None:
            entry["shuffle"]["items"] = []
        if entry["packer"] is not None:
            entry["packer"]["carry"] = []
    for entry in out["readers"].values():
        if "sources" in entry:  # a mixture's sources all flow again
            entry["dry"] = []
    out["next_worker"] = {}
    return out


def reader_entries(state: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every stream entry of a state (of either layout): a mixture reader's per-source
    entries stand in its place. Its positions are ``entry["reader"]["partitions"]``."""
    for reader in upgraded(state).get("readers", {}).values():
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
    states = [upgraded(state) for state in states]
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
        for key, entry in reader["reader"]["partitions"].items():
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
        for key, offset, emitted in carried(reader):
            if emitted and key in plan:
                plan[key]["partial"][int(offset)] = int(emitted)
    return plan
