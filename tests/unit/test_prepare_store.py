"""The compact dedup state: hash table, generations, and the global state's changelog round trip."""

from __future__ import annotations

import numpy as np

from kafeed.prepare.global_dedup import GlobalDedupState
from kafeed.prepare.store import Generations, HashTable, as_keys
from kafeed.stream.snapshots import parse_snapshot_end


def _keys(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, 2**63, n, dtype=np.uint64)


def test_table_finds_what_it_holds_and_stays_under_24_bytes_per_entry() -> None:
    table = HashTable()
    keys = _keys(200_000)
    for chunk in np.array_split(keys, 100):  # batch after batch, growing on the way
        table.add(chunk)
    assert table.count == 200_000
    assert table.contains(keys).all()
    assert not table.contains(_keys(10_000, seed=1)).any()
    assert table.add(keys[:500]) == 0  # present keys are not added twice
    assert table.nbytes / table.count <= 24
    assert sorted(table.keys().tolist()) == sorted(keys.tolist())


def test_zero_key_is_remapped() -> None:
    assert as_keys([b"\x00" * 16]).tolist() == [1]


def test_generations_rotate_by_count_and_by_age() -> None:
    gens = Generations(max_entries=100)
    first, second, third = _keys(50, 1), _keys(50, 2), _keys(50, 3)
    gens.add_batch(first, 0)                      # current full (50 = max/2): becomes old
    assert gens.generation == 1 and gens.contains(first).all()
    gens.add_batch(second, 0)
    assert gens.generation == 2 and gens.contains(second).all()
    gens.add_batch(third, 0)
    assert not gens.contains(first).any() and not gens.contains(second).any()
    assert gens.contains(third).all() and len(gens) == 50

    day = 86_400_000
    aged = Generations(horizon_ms=2 * day)
    aged.add_batch(first, 0)
    aged.add_batch(second, day // 2)              # half a horizon not yet reached
    assert aged.generation == 0
    aged.add_batch(third, day)                    # one day = horizon / 2: rotate
    fourth, fifth = _keys(5, 4), _keys(5, 5)
    aged.add_batch(fourth, day + day // 2)
    assert aged.generation == 1 and aged.contains(first).all() and aged.contains(fourth).all()
    aged.add_batch(fifth, 2 * day)  # another half horizon: the first day is forgotten
    assert aged.generation == 2 and not aged.contains(first).any()
    assert aged.contains(fourth).all() and aged.contains(fifth).all()


def _replay(state: GlobalDedupState, batches: list[list[int]]) -> list[tuple[int, bytes, bytes | None]]:
    log = []
    for ts, batch in enumerate(batches):
        keys = np.asarray(batch, dtype=np.uint64)
        state.check_batch([0] * len(batch), keys, [ts] * len(batch))
        log.extend(state.changelog())
        state.commit()
    return log


def test_global_state_pending_commit_and_rollback() -> None:
    state = GlobalDedupState()
    keys = np.asarray([5, 6, 5, 7], dtype=np.uint64)
    assert state.check_batch([0, 0, 0, 1], keys, [0] * 4) == [True, True, False, True]
    assert state.check_batch([0], np.asarray([6], np.uint64), [0]) == [False]  # an older pending layer
    state.rollback()
    assert state.check_batch([0], np.asarray([6], np.uint64), [0]) == [True]
    state.commit()
    assert state.size(0) == 1


def test_restore_from_snapshot_plus_tail_matches_the_live_state() -> None:
    rng = np.random.default_rng(7)
    batches = [rng.integers(1, 2**40, 30).tolist() for _ in range(11)]
    live = GlobalDedupState(snapshot_every=4, max_entries=200)
    log = _replay(live, batches)
    markers = [i for i, (_, k, v) in enumerate(log) if parse_snapshot_end(k, v) is not None]
    assert len(markers) == 2  # batches 4 and 8 wrote snapshots instead of tail records
    chunks = parse_snapshot_end(log[markers[-1]][1], log[markers[-1]][2])
    assert chunks is not None
    tail = log[markers[-1] - chunks[0]:]        # what the core hands over: snapshot + tail
    assert len(tail) == chunks[0] + 1 + 3
    restored = GlobalDedupState(snapshot_every=4, max_entries=200)
    restored.restore(0, [(k, v) for _, k, v in tail])
    probe = np.asarray(sorted({k for b in batches for k in b}), dtype=np.uint64)
    assert len(restored) == len(live) > 0
    np.testing.assert_array_equal(restored._gens(0).contains(probe), live._gens(0).contains(probe))
    # the whole log replays to the same state too
    full = GlobalDedupState(snapshot_every=4, max_entries=200)
    full.restore(0, [(k, v) for _, k, v in log])
    np.testing.assert_array_equal(full._gens(0).contains(probe), live._gens(0).contains(probe))
