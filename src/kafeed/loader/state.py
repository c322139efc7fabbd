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

from collections.abc import Sequence
from typing import Any

from kafeed.errors import ResumeMismatch
from kafeed.loader.settings import LoaderSettings

STATE_VERSION = 1
STATE_KEYS = ("version", "fingerprint", "mode", "num_readers", "readers", "next_worker")
READER_KEYS = ("index", "partitions", "rr", "buffer", "rng", "carry", "stats")
PARTITION_KEYS = ("next", "read", "end", "delivered")


def fingerprint(settings: LoaderSettings) -> dict[str, Any]:
    """What must not change between save and resume."""
    return {
        "kind": settings.kind,
        "topics": sorted(settings.topics),
        "seq_len": settings.seq_len,
        "eos_id": settings.eos_id,
        "tokenizer": settings.tokenizer,
    }


def empty_state(settings: LoaderSettings) -> dict[str, Any]:
    return {
        "version": STATE_VERSION,
        "fingerprint": fingerprint(settings),
        "mode": settings.mode,
        "num_readers": None,
        "readers": {},
        "next_worker": {},
    }


def _require(mapping: Any, keys: Sequence[str], what: str) -> None:
    if not isinstance(mapping, dict):
        raise ResumeMismatch(f"The {what} in the saved loader state is not a mapping.")
    missing = [k for k in keys if k not in mapping]
    if missing:
        raise ResumeMismatch(
            f"The saved loader state's {what} lacks {', '.join(missing)}.",
            hint="Pass a state taken from StreamLoader.state_dict() or a dataset's state_dict().",
        )


def check_state(state: dict[str, Any], settings: LoaderSettings) -> dict[str, Any]:
    """Validate a saved state against the current settings; refuse a mismatch."""
    _require(state, STATE_KEYS, "top level")
    if state["version"] != STATE_VERSION:
        raise ResumeMismatch(
            f"Loader state version {state['version']} is not supported (expected {STATE_VERSION}).")
    expected = fingerprint(settings)
    saved = state["fingerprint"]
    if saved != expected:
        diff = sorted(k for k in set(expected) | set(saved) if expected.get(k) != saved.get(k))
        details = "; ".join(f"{k}: saved {saved.get(k)!r}, now {expected.get(k)!r}" for k in diff)
        raise ResumeMismatch(
            f"The saved loader state was taken with different settings ({details}).",
            hint="Resume with the same topics, seq_len, eos_id and tokenizer, or start fresh.",
        )
    if state["mode"] != settings.mode:
        raise ResumeMismatch(
            f"The saved loader state is for mode {state['mode']!r}, not {settings.mode!r}.")
    for reader in state["readers"].values():
        _require(reader, READER_KEYS, "reader entry")
        for entry in reader["partitions"].values():
            _require(entry, PARTITION_KEYS, "partition entry")
    return state


def merge_states(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Merge the states of several ranks (e.g. from ``all_gather_object``) into one.

    Each rank's :meth:`StreamLoader.state_dict` holds only its own readers; the merged
    state holds all of them and can be loaded by every rank, under the same or another
    world size.
    """
    if not states:
        raise ValueError("merge_states needs at least one state")
    first = states[0]
    _require(first, STATE_KEYS, "top level")
    merged: dict[str, Any] = {
        "version": first["version"],
        "fingerprint": first["fingerprint"],
        "mode": first["mode"],
        "num_readers": first["num_readers"],
        "readers": {},
        "next_worker": {},
    }
    for state in states:
        _require(state, STATE_KEYS, "top level")
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
    ``emitted`` tokens, so no token is delivered twice.
    """
    plan: dict[str, dict[str, Any]] = {}
    for reader in state["readers"].values():
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
                "partial": {},
            }
        for key, offset, emitted in reader["carry"]:
            if emitted and key in plan:
                plan[key]["partial"][int(offset)] = int(emitted)
    return plan
