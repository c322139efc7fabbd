"""One save/resume harness for every stateful loader piece (torchdata.nodes style).

Run N steps, take the state (through JSON, as a checkpoint would), run M more steps: that
is the reference. A fresh object loaded with the state must produce the same M steps and
then have the same state as the reference (counts included), unless ``same_state`` is off
for an object whose state holds things of its own (torchdata's StatefulDataLoader).

It runs against every stateful piece and every source: Kafka (integration/test_loader_resume.py),
the archive's cold tier (integration/test_archive_tiered.py), local files resumed in the middle
of a file (unit/test_loader_files.py) and a mixture of a topic and files
(integration/test_loader_mixture.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass
class Stateful(Generic[T]):
    """How to drive one kind of stateful object."""

    make: Callable[[], T]
    step: Callable[[T], Any]  # one output (compared with ==), None when exhausted
    state: Callable[[T], dict[str, Any]]
    load: Callable[[T, dict[str, Any]], None]
    close: Callable[[T], None] = lambda obj: None
    same_state: bool = True


def piece_case(build: Callable[[], Any], step: Callable[[Any], Any]) -> Stateful[Any]:
    """A reader or a stream (a node: anything with ``open``, ``state``, ``reset`` and
    ``close``): built, loaded with a saved state before it opens, opened at its first step."""

    class Node:
        def __init__(self) -> None:
            self.piece = build()
            self.opened = False

        def open(self) -> Any:
            if not self.opened:
                self.piece.open()
                self.opened = True
            return self.piece

    return Stateful(make=Node, step=lambda node: step(node.open()),
                    state=lambda node: node.open().state(),
                    load=lambda node, state: node.piece.reset(state),
                    close=lambda node: node.piece.close())


def _norm(value: Any) -> Any:
    """Make outputs comparable: numpy / torch arrays become nested lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as ``path: a != b`` lines (the first few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}/{k}: only in {'first' if k in a else 'second'}" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += differences(a[k], b[k], f"{path}/{k}")
        return out[:20]
    return [] if a == b else [f"{path or '/'}: {a!r:.200} != {b!r:.200}"]


def check_save_resume(case: Stateful[Any], n: int, m: int) -> tuple[list[Any], list[Any]]:
    """Assert a resumed object continues exactly; returns (first N, next M) outputs."""
    ref = case.make()
    try:
        first = [_norm(case.step(ref)) for _ in range(n)]
        state = json.loads(json.dumps(case.state(ref)))
        expected = [_norm(case.step(ref)) for _ in range(m)]
        ref_after = json.loads(json.dumps(case.state(ref)))
    finally:
        case.close(ref)
    fresh = case.make()
    try:
        case.load(fresh, state)
        got = [_norm(case.step(fresh)) for _ in range(m)]
        got_after = json.loads(json.dumps(case.state(fresh)))
    finally:
        case.close(fresh)
    assert got == expected, f"resumed output differs after {n} steps"
    if case.same_state:
        assert got_after == ref_after, (f"resumed state differs after {n} + {m} steps:\n"
                                        + "\n".join(differences(ref_after, got_after)))
    return first, expected
