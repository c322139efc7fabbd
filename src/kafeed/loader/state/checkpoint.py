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
from typing import Any, NoReturn

from kafeed.errors import ResumeMismatch
from kafeed.loader.nodes.record_kinds import KINDS
from kafeed.loader.settings import LoaderSettings

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

READER_KEYS = ("index", "partitions", "rr", "buffer", "rng", "carry", "stats")
PARTITION_KEYS = ("next", "read", "end", "delivered")
STATS_KEYS = ("records", "bad", "tokens")


STATE_HINT = "Pass a state taken from StreamLoader.state_dict() or a dataset's state_dict(), unchanged."
RECREATED_HINT = (
    "A state fits only the log it was taken from: if the topic was deleted and recreated (or "
    "retention removed those records), start without the state, or at chosen offsets with start=.")


def fail(path: str, problem: str, hint: str = STATE_HINT) -> NoReturn:
    raise ResumeMismatch(f"The saved loader state's {path} {problem}.", hint=hint)


def require_keys(mapping: Any, keys: Sequence[str], what: str, optional: Sequence[str] = ()) -> None:
    """``mapping`` is a dict with exactly ``keys``, and perhaps the ``optional`` ones."""
    if not isinstance(mapping, dict):
        fail(what, f"is not a mapping (got {type(mapping).__name__})")
    missing = [k for k in keys if k not in mapping]
    if missing:
        fail(what, f"lacks {', '.join(map(repr, missing))}")
    unknown = sorted(repr(k) for k in mapping if k not in keys and k not in optional)
    if unknown:
        fail(what, f"has unknown key(s) {', '.join(unknown)}")


def check_version(version: Any, expected: int, what: str) -> None:
    """A piece's saved ``version`` is the one this code reads (a bool is not a version)."""
    if not isinstance(version, int) or isinstance(version, bool) or version != expected:
        raise ResumeMismatch(
            f"{what} version {shown(version)} is not supported (expected {expected}).",
            hint="Resume with the kafeed version that saved it, or start fresh.")


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


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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


def check_reader(reader: Any, path: str, settings: LoaderSettings) -> None:
    """One reader's entry (a token or sample loader's; a mixture's entry holds one per source)."""
    require_keys(reader, READER_KEYS, path)
    as_int(reader["index"], f"{path}.index")
    parts = reader["partitions"]
    if not isinstance(parts, dict):
        fail(f"{path}.partitions", "is not a mapping")
    positions: dict[str, tuple[int, int]] = {}
    for key, entry in parts.items():
        topic, sep, partition = str(key).rpartition(":")
        if not sep or not _decimal(partition):
            fail(f"{path}.partitions", f"has key {shown(key)}, not 'topic:partition'")
        if topic not in settings.topics:
            fail(f"{path}.partitions", f"has partition {key!r} of a topic this loader does not read",
                  hint="Resume with the same topics, or start fresh.")
        positions[key] = _check_partition(entry, f"{path}.partitions[{key!r}]")
    as_int(reader["rr"], f"{path}.rr")
    buffer = _list(reader["buffer"], f"{path}.buffer")
    for i, ref in enumerate(buffer):
        _check_ref(ref, f"{path}.buffer[{i}]", positions, 2)
    if reader["rng"] is not None:
        _check_rng(reader["rng"], f"{path}.rng")
    elif buffer:
        fail(f"{path}.rng", "is null but the shuffle buffer holds records")
    carry = _list(reader["carry"], f"{path}.carry")
    if carry and not KINDS[settings.kind].packs:
        fail(f"{path}.carry", "holds packer carry-over, which a sample loader never has")
    for i, ref in enumerate(carry):
        _check_ref(ref, f"{path}.carry[{i}]", positions, 3)
        as_int(ref[2], f"{path}.carry[{i}][2]")
    stats = reader["stats"]
    require_keys(stats, STATS_KEYS, f"{path}.stats")
    for name in STATS_KEYS:
        as_int(stats[name], f"{path}.stats.{name}")


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
