"""The node contract: every step from a source's records to the caller's batches.

A node hands out what it produces (``next`` for most, see the table), says what it has
produced with ``state()`` and continues from such a state with ``reset(state)`` (before it opens, for a
node that reads). Its state is JSON data: its own ``version``, its own fields, and the state
of each node it is composed of under that child's own key. ``reset`` checks the version
(:func:`check_node`), so a state saved by a kafeed whose node kept something else is refused
by the node that would misread it, naming the node, the version and what to do.

======== =========================================== ============== ========================
node     class                                       hands out      children (state keys)
======== =========================================== ============== ========================
reader   kafeed.loader.nodes.reader.ShardReader      ``next``: a    (its source's shards)
                                                     record
shuffle  kafeed.loader.nodes.shuffle.ShuffleBuffer   ``next``: a    (fed by its stream)
                                                     record
packer   kafeed.loader.nodes.packing.TokenPacker     ``pop``:       (fed by its stream)
                                                     windows
stream   kafeed.loader.nodes.stream.TokenStream,     ``next``: a    ``reader``, ``shuffle``,
         SampleStream                                batch          ``packer``
schedule kafeed.loader.nodes.mixing.MixSchedule      ``pick``:      (none)
                                                     sources
mixture  kafeed.loader.nodes.mixture_stream          ``next``: a    ``sources`` (a stream
         .MixtureStream                              batch          each), ``schedule``
loader   kafeed.StreamLoader (the worker hand-off)   batches        ``readers`` (a stream or
                                                     (iterated)     mixture per reader)
======== =========================================== ============== ========================

The shuffle buffer and the packer are fed by their stream (``add``/``push``): a stream
pulls from its reader and feeds them in one loop per batch (kafeed.loader.nodes.stream),
so a record crosses no call that only passes it on. Decoding is the reader's
(kafeed.loader.nodes.decode): it keeps no state. The loader's state is the checkpoint
(kafeed.loader.state.checkpoint), whose layout these versions are part of.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NoReturn, Protocol

from kafeed.errors import ResumeMismatch

__all__ = ["NODE_VERSIONS", "Node", "NodeType", "check_node", "check_version", "fail", "require_keys",
           "shown"]

NodeType = Literal["reader", "shuffle", "packer", "stream", "schedule", "mixture", "loader"]

NODE_VERSIONS: dict[NodeType, int] = {
    "reader": 1,    # {"version", "partitions", "rr", "stats"}
    "shuffle": 1,   # {"version", "rng", "items"}
    "packer": 1,    # {"version", "carry"}
    "stream": 1,    # {"version", "index", "reader", "shuffle" | None, "packer" | None}
    "schedule": 1,  # {"version", "weights", "credits"}
    "mixture": 1,   # {"version", "index", "sources", "schedule", "tokens", "dry"}
    "loader": 2,    # 1: every reader's pieces flattened into one entry (still read, converted)
}
"""Each node type's state version: what its ``reset`` reads."""

STATE_HINT = "Pass a state taken from StreamLoader.state_dict() or a dataset's state_dict(), unchanged."
VERSION_HINT = ("Resume with the kafeed version that saved it, or start without the state (at "
                "chosen offsets with start=).")


class Node(Protocol):
    """What every node offers besides how it hands out, whose arguments differ by node (a
    reader's wait, a stream's batch size)."""

    def state(self) -> dict[str, Any]:
        """What this node has produced so far, its children's states nested (JSON data)."""
        ...

    def reset(self, state: dict[str, Any]) -> None:
        """Continue exactly where ``state`` was taken (its version checked)."""
        ...


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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
    """A saved ``version`` is the one this code reads (a bool is not a version)."""
    if not isinstance(version, int) or isinstance(version, bool) or version != expected:
        raise ResumeMismatch(
            f"{what} version {shown(version)} is not supported (this kafeed reads version {expected}).",
            hint=VERSION_HINT)


def check_node(state: Any, node: NodeType, keys: Sequence[str], path: str | None = None) -> None:
    """``state`` is a ``node`` state of this kafeed's version with exactly ``keys`` (besides
    ``version``); ``path``: where it sits in the loader state, for the message."""
    where = path or f"{node} state"
    require_keys(state, ("version", *keys), where)
    check_version(state["version"], NODE_VERSIONS[node], f"The saved loader state's {where} ({node} node)")
