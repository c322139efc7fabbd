from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
import pytest

from kafeed.errors import ResumeMismatch
from kafeed.loader.nodes.packing import TokenPacker
from kafeed.loader.nodes.shuffle import ShuffleBuffer
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.assignment import assign, warn_if_idle
from kafeed.loader.state.checkpoint import check_state, empty_state, fingerprint, merge_states, partition_plan
from tests.stateful_harness import Stateful, check_save_resume
from tests.stream_entries import stream_entry

EOS = 0


def _docs(count: int, seed: int = 1) -> dict[tuple[str, int], np.ndarray]:
    rng = np.random.default_rng(seed)
    return {("t:0", i): rng.integers(1, 50000, size=int(rng.integers(0, 40))).astype(np.uint16)
            for i in range(count)}


# -- assignment ------------------------------------------------------------------------------
@pytest.mark.parametrize("partitions,readers", [(6, 4), (3, 6), (1, 1), (8, 8), (2, 5)])
def test_assignment_is_disjoint_covering_and_deterministic(partitions: int, readers: int) -> None:
    tps = [("b", p) for p in range(partitions // 2)] + [("a", p) for p in range(partitions - partitions // 2)]
    owned = [assign(tps, i, readers) for i in range(readers)]
    flat = [tp for part in owned for tp in part]
    assert sorted(flat) == sorted(tps) and len(flat) == len(set(flat))
    assert owned == [assign(list(reversed(tps)), i, readers) for i in range(readers)]
    idle = sum(1 for part in owned if not part)
    assert idle == max(0, readers - partitions)


def test_fewer_partitions_than_readers_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafeed"):
        warn_if_idle(2, 4)
    assert "2 reader(s) will be idle" in caplog.text
    with pytest.raises(ValueError):
        assign([("a", 0)], 3, 3)


# -- packing ---------------------------------------------------------------------------------
def test_packing_is_lossless_with_eos() -> None:
    docs = _docs(200)
    packer = TokenPacker(window=17, eos_id=EOS)
    for ref, toks in docs.items():
        packer.push(ref, toks)
    total = packer.available
    out, starts, finished = packer.pop(total - total % 17, boundaries=True)
    rest, _, finished2 = packer.pop(packer.available)
    stream = np.concatenate([np.append(t.astype(np.int64), EOS) for t in docs.values()])
    assert np.array_equal(np.concatenate([out, rest]), stream)
    assert finished + finished2 == list(docs)
    assert starts is not None
    lengths = [len(t) for t in docs.values()]
    first_positions = np.cumsum([0] + [n + 1 for n in lengths[:-1]])
    expected = np.zeros(len(stream), dtype=bool)
    expected[first_positions] = True
    assert np.array_equal(starts, expected[: len(starts)])
    assert out.reshape(-1, 17).shape[1] == 17


def test_packer_start_skips_emitted_tokens() -> None:
    packer = TokenPacker(window=4, eos_id=9)
    packer.push(("t:0", 5), np.array([1, 2, 3], dtype=np.uint16), start=2)
    out, _, done = packer.pop(2)
    assert out.tolist() == [3, 9] and done == [("t:0", 5)]
    with pytest.raises(ValueError):
        packer.push(("t:0", 6), np.array([1], dtype=np.uint16), start=2)


@pytest.mark.parametrize("window,seed", [(17, 1), (4, 2), (64, 3)])
def test_pop_windows_cuts_what_pop_cuts_uncopied(window: int, seed: int) -> None:
    docs = _docs(150, seed=seed)
    whole, ahead = TokenPacker(window=window, eos_id=EOS), TokenPacker(window=window, eos_id=EOS)
    for ref, toks in docs.items():
        whole.push(ref, toks)
        ahead.push(ref, toks)
    cut = 0
    for windows_per_cut in [3, 1, 5, 2] * 100:
        count = min(windows_per_cut * window, whole.available)
        if not count:
            break
        out, starts, finished = whole.pop(count, boundaries=True)
        spans: list[Any] = []
        windows = ahead.pop_windows(count, spans)
        assert starts is not None and all(sum(map(len, w)) == window for w, _ in windows[:-1])
        assert np.array_equal(np.concatenate([p for w, _ in windows for p in w], dtype=np.int64), out)
        at = [i * window + f for i, (_, firsts) in enumerate(windows) for f in firsts]
        assert np.flatnonzero(starts).tolist() == at
        # Spans name every document touched; those ending inside the cut are pop's finished.
        assert [ref for ref, _, _, end in spans if end <= count] == finished
        assert all(spans[i + 1][1] == spans[i][3] for i in range(len(spans) - 1))
        cut += count
    assert cut == sum(len(t) + 1 for t in docs.values())
    assert ahead.state() == whole.state()


def _packer_case(docs: dict[tuple[str, int], np.ndarray]) -> Stateful[Any]:
    keys = list(docs)

    class Node:
        def __init__(self) -> None:
            self.packer = TokenPacker(window=9, eos_id=EOS)
            self.next_doc = 0

    def step(node: Node) -> Any:
        while node.packer.available < 9 and node.next_doc < len(keys):
            ref = keys[node.next_doc]
            node.packer.push(ref, docs[ref])
            node.next_doc += 1
        if node.packer.available < 9:
            return None
        return node.packer.pop(9)[0]

    def load(node: Node, state: dict[str, Any]) -> None:
        node.next_doc = state["next_doc"]
        node.packer.reset(state["packer"], fetch=lambda ref: docs[ref])

    return Stateful(make=Node, step=step, load=load,
                    state=lambda node: {"next_doc": node.next_doc, "packer": node.packer.state()})


@pytest.mark.parametrize("n", [0, 1, 7, 30])
def test_packer_save_resume(n: int) -> None:
    check_save_resume(_packer_case(_docs(120, seed=n)), n, 25)


# -- shuffle ---------------------------------------------------------------------------------
def _shuffle_case(seed: int) -> Stateful[Any]:
    class Node:
        def __init__(self) -> None:
            self.buffer: ShuffleBuffer[int] = ShuffleBuffer(8, seed)
            self.pos = 0

    def step(node: Node) -> Any:
        while not node.buffer.full and node.pos < 100:
            node.buffer.add(node.pos)
            node.pos += 1
        return node.buffer.next() if len(node.buffer) else None

    def load(node: Node, state: dict[str, Any]) -> None:
        node.pos = state["pos"]
        node.buffer.reset(state["buffer"])

    return Stateful(make=Node, step=step, load=load,
                    state=lambda node: {"pos": node.pos, "buffer": node.buffer.state()})


def test_shuffle_is_deterministic_from_seed_and_a_permutation() -> None:
    a = check_save_resume(_shuffle_case(3), 100, 0)[0]
    b = check_save_resume(_shuffle_case(3), 100, 0)[0]
    c = check_save_resume(_shuffle_case(4), 100, 0)[0]
    assert a == b and a != c
    assert sorted(a) == list(range(100)) and a != list(range(100))


@pytest.mark.parametrize("n", [0, 5, 50, 95])
def test_shuffle_save_resume(n: int) -> None:
    check_save_resume(_shuffle_case(11), n, 100 - n)


# -- state -----------------------------------------------------------------------------------
def _settings(**kw: Any) -> LoaderSettings:
    return LoaderSettings(**{"topics": ("tok",), "seq_len": 8, "eos_id": 0, **kw})


def _reader(
    index: int, partitions: dict[str, dict[str, Any]], carry: list[Any] | None = None
) -> dict[str, Any]:
    return stream_entry(index, partitions, carry=carry or [])


def _state(readers: dict[str, Any], num: int = 2) -> dict[str, Any]:
    state = empty_state(_settings())
    state["num_readers"] = num
    state["readers"] = readers
    return state


def test_state_roundtrips_json_and_has_constant_keys() -> None:
    state = _state({"0": _reader(0, {"tok:0": {"next": 3, "read": 9, "end": 20, "delivered": [5, 6]}})}, 1)
    again = json.loads(json.dumps(state))
    assert check_state(again, _settings()) == state
    keys = ["version", "fingerprint", "mode", "num_readers", "readers", "next_worker"]
    assert sorted(state) == sorted(keys)
    assert state["version"] == 2


@pytest.mark.parametrize("change", [{"seq_len": 16}, {"eos_id": 2}, {"topics": ("other",)},
                                    {"tokenizer": "gpt2"}])
def test_fingerprint_mismatch_is_refused(change: dict[str, Any]) -> None:
    state = _state({}, 1)
    with pytest.raises(ResumeMismatch) as err:
        check_state(state, _settings(**change))
    assert "different settings" in str(err.value)
    assert fingerprint(_settings()) != fingerprint(_settings(**change))


def test_state_missing_keys_is_refused() -> None:
    state = _state({"0": {"index": 0}}, 1)
    with pytest.raises(ResumeMismatch):
        check_state(state, _settings())


def test_merge_and_partition_plan() -> None:
    a = _state({"0": _reader(0, {"tok:0": {"next": 3, "read": 9, "end": None, "delivered": [4]}},
                             carry=[["tok:0", 3, 5]])})
    b = _state({"1": _reader(1, {"tok:1": {"next": 7, "read": 7, "end": None, "delivered": []}})})
    a["next_worker"] = {"0": 1}
    merged = merge_states([a, b])
    assert sorted(merged["readers"]) == ["0", "1"] and merged["next_worker"] == {"0": 1}
    plan = partition_plan(merged)
    assert plan["tok:0"] == {"next": 3, "end": None, "delivered": {4}, "partial": {3: 5}}
    assert plan["tok:1"]["next"] == 7
    b["fingerprint"] = {**b["fingerprint"], "seq_len": 99}
    with pytest.raises(ResumeMismatch):
        merge_states([a, b])


def test_import_kafeed_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, kafeed; assert 'torch' not in sys.modules; "
            "kafeed.StreamLoader; assert 'torch' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
