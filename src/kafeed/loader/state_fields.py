"""The checks of a saved loader state's fields, each refusing with :class:`ResumeMismatch`
naming the field: the primitives every stateful piece uses (:func:`require_keys`,
:func:`check_version`) and one reader entry (:func:`check_reader`). kafeed.loader.state
composes them into the whole state's check.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NoReturn

from kafeed.errors import ResumeMismatch
from kafeed.loader.record_kinds import KINDS
from kafeed.loader.settings import LoaderSettings

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
