"""Sharding and elastic resume at cluster scale: world sizes 1..4096, partitions 1..1024.

Pure functions only (kafeed.loader.sources.assignment, .state, .resume), so hundreds of
topologies run in seconds.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.assignment import assign, partition_key
from kafeed.loader.state.checkpoint import check_state, empty_state, merge_states, partition_plan
from kafeed.loader.state.resume import choose_resume, plan_starts
from tests.stream_entries import stream_entry

TOPICS = ("a", "b", "c")


@st.composite
def partitions(draw: st.DrawFn) -> list[tuple[str, int]]:
    """1..1024 partitions over one to three topics."""
    total = draw(st.integers(1, 1024))
    topics = draw(st.integers(1, 3))
    cuts = sorted(draw(st.lists(st.integers(0, total), min_size=topics - 1, max_size=topics - 1)))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    return [(TOPICS[t], p) for t, size in enumerate(sizes) for p in range(size)]


def _owners(parts: list[tuple[str, int]], count: int) -> dict[tuple[str, int], int]:
    """Who owns each partition, checking every reader when that is cheap, else a sample."""
    owners: dict[tuple[str, int], int] = {}
    readers = range(count) if count * len(parts) <= 60_000 else sorted({0, count - 1, *range(0, count, 97)})
    for index in readers:
        mine = assign(parts, index, count)
        assert mine == sorted(mine)
        low, high = len(parts) // count, -(-len(parts) // count)
        assert low <= len(mine) <= high  # balanced: sizes differ by one at most
        for tp in mine:
            assert tp not in owners, f"{tp} has two owners"
            owners[tp] = index
    return owners


@settings(max_examples=80, deadline=None)
@given(parts=partitions(), world=st.integers(1, 4096), workers=st.sampled_from([1, 2, 4, 8]))
def test_assignment_is_disjoint_balanced_and_covering(parts: list[tuple[str, int]], world: int,
                                                      workers: int) -> None:
    count = world * workers
    owners = _owners(parts, count)
    if count * len(parts) <= 60_000:
        assert set(owners) == set(parts)  # every partition has exactly one owner
    busy = min(count, len(parts))
    assert sorted(set(owners.values())) == sorted(set(owners.values()) & set(range(busy)))
    # The answer depends on the arguments only, not on their order.
    assert assign(list(reversed(parts)), count - 1, count) == assign(parts, count - 1, count)


def _state(parts: list[tuple[str, int]], count: int, seed: int, settings: LoaderSettings) -> dict[str, Any]:
    """A merged state of ``count`` readers, each with positions for the partitions it owns
    (next, a few delivered beyond it, a partly emitted document in the carry)."""
    state = empty_state(settings)
    state["num_readers"] = count
    owned: dict[int, list[tuple[str, int]]] = {}
    for i, tp in enumerate(sorted(parts)):
        owned.setdefault(i % count, []).append(tp)
    for index in range(count):
        entry = stream_entry(index, {})
        for topic, p in owned.get(index, []):
            nxt = (seed * 31 + p * 7 + len(topic)) % 1000
            entry["reader"]["partitions"][partition_key(topic, p)] = {
                "next": nxt, "read": nxt + 5, "end": None, "delivered": [nxt + 2, nxt + 4]}
            entry["packer"]["carry"].append([partition_key(topic, p), nxt, 3])
        state["readers"][str(index)] = entry
    return state


@settings(max_examples=40, deadline=None)
@given(parts=partitions(), old=st.integers(1, 4096), new=st.integers(1, 4096), seed=st.integers(0, 10**6))
def test_elastic_resume_keeps_every_position(parts: list[tuple[str, int]], old: int, new: int,
                                              seed: int) -> None:
    settings = LoaderSettings(topics=TOPICS, seq_len=7, eos_id=0)
    # Ranks save their own readers; merged, the state is whole and valid.
    full = _state(parts, old, seed, settings)
    ranks = [dict(full, readers={k: v}) for k, v in list(full["readers"].items())[:: max(1, old // 7)]]
    merged = merge_states([*ranks, full])
    check_state(merged, settings)
    plan = partition_plan(merged)
    assert set(plan) == {partition_key(t, p) for t, p in parts}
    for reader in full["readers"].values():
        for key, entry in reader["reader"]["partitions"].items():
            assert plan[key]["next"] == entry["next"]
            assert plan[key]["delivered"] == set(entry["delivered"])
            assert plan[key]["partial"] == {entry["next"]: 3}
    # Under the new world size every reader resumes elastically (or exactly when unchanged),
    # and the new owners of all partitions together start from every saved position.
    starts: dict[str, int] = {}
    for index in sorted({0, new - 1, new // 2}):
        resume = choose_resume(merged, mode="static", index=index, count=new)
        if new == old:
            assert resume.entry is merged["readers"][str(index)]
            continue
        assert resume.plan is not None
        mine = {partition_key(t, p) for t, p in assign(parts, index, new)}
        for key, start in plan_starts({k: v for k, v in resume.plan.items() if k in mine}).items():
            assert start.read == start.next == plan[key]["next"] and start.partial == plan[key]["partial"]
            starts[key] = start.next
    assert len(starts) <= len(parts)
