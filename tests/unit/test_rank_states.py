"""Every rank's loader state in one document (kafeed.loader.state.rank_states): complete or refused,
loadable wherever a state is, traced per rank by lineage."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest

import kafeed
from kafeed.errors import ConfigError, ResumeMismatch
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state.checkpoint import check_state, empty_state
from kafeed.loader.state.rank_states import distributed_world, gather_states, loadable_state, rank_states
from kafeed.train.distributed import check_restarts
from kafeed.train.lineage import checkpoint_lineage, lineage_of
from tests.stream_entries import layout_1, stream_entry


def _settings() -> LoaderSettings:
    return LoaderSettings(topics=("tok",), seq_len=8, eos_id=0)


def _rank(index: int, partition: int, nxt: int) -> dict[str, Any]:
    state = empty_state(_settings())
    state["num_readers"] = 2
    state["readers"] = {str(index): stream_entry(
        index, {f"tok:{partition}": {"next": nxt, "read": nxt + 2, "end": None, "delivered": [nxt + 1]}},
        stats=(nxt + 1, 0, 0))}
    return state


def _doc() -> dict[str, Any]:
    return {"ranks_version": 1, "world_size": 2, "ranks": [_rank(0, 0, 5), _rank(1, 1, 9)]}


def test_alone_the_gathered_document_is_the_one_rank_of_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    state = _rank(0, 0, 5)
    assert gather_states(state) == {"ranks_version": 1, "world_size": 1, "ranks": [state]}
    assert kafeed.gather_states is gather_states


def test_several_launched_processes_without_a_process_group_are_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The launcher's word against torch.distributed's: a rank that would save its readers alone.
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match=r"WORLD_SIZE is 2, but torch\.distributed is not initialized"):
        distributed_world()
    with pytest.raises(ConfigError):
        gather_states(_rank(0, 0, 5))


def test_a_document_loads_wherever_a_state_does_merged() -> None:
    doc = _doc()
    merged = check_state(loadable_state(json.loads(json.dumps(doc))), _settings())
    assert sorted(merged["readers"]) == ["0", "1"]
    assert merged == kafeed.merge_states(doc["ranks"])
    assert loadable_state(doc["ranks"][0]) is doc["ranks"][0]  # one rank's state stays as it is


@pytest.mark.parametrize("broken", [
    {"ranks": [_rank(0, 0, 5)]},                 # a rank missing: the checkpoint is incomplete
    {"ranks": [_rank(0, 0, 5), None]},
    {"world_size": 0},
    {"world_size": True},
    {"ranks_version": 2},
    {"ranks": "all"},
])
def test_an_incomplete_or_unknown_document_is_refused(broken: dict[str, Any]) -> None:
    doc = {**_doc(), **broken}
    with pytest.raises(ResumeMismatch):
        rank_states(doc)
    with pytest.raises(ResumeMismatch):
        loadable_state(doc)
    without = _doc()
    del without["ranks"]
    with pytest.raises(ResumeMismatch, match="lack ranks"):
        rank_states(without)


def test_lineage_names_every_ranks_offset_ranges() -> None:
    lineage = lineage_of(_doc(), {})
    assert [r["rank"] for r in lineage["ranks"]] == [0, 1]
    assert lineage["ranks"][0]["partitions"] == {"tok:0": {"ranges": [[0, 5], [6, 7]], "next": 5, "start": 0}}
    assert lineage["ranks"][1]["partitions"]["tok:1"]["ranges"] == [[0, 9], [10, 11]]
    assert lineage["partitions"] == {**lineage["ranks"][0]["partitions"], **lineage["ranks"][1]["partitions"]}
    assert lineage["documents"] == 6 + 10
    assert "ranks" not in lineage_of(_doc()["ranks"][0], {})


def test_lineage_of_a_checkpoint_saved_in_the_first_layout_is_the_same() -> None:
    doc = _doc()
    old = {**doc, "ranks": [layout_1(state) for state in doc["ranks"]]}
    assert old["ranks"][0]["version"] == 1 and "partitions" in old["ranks"][0]["readers"]["0"]
    assert lineage_of(old, {}) == lineage_of(doc, {})
    assert lineage_of(old["ranks"][1], {}) == lineage_of(doc["ranks"][1], {})


def test_lineage_reads_a_trainer_checkpoint_folder_and_refuses_an_incomplete_one(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint-4"
    folder.mkdir()
    (folder / "kafeed_loader.json").write_text(json.dumps({"version": 1, "step": 4, "loader": _doc()}))
    info = checkpoint_lineage(folder)
    assert info["step"] == 4 and info["topic"] == "tok" and len(info["ranks"]) == 2
    torn = copy.deepcopy(_doc())
    torn["ranks"].pop()
    (folder / "kafeed_loader.json").write_text(json.dumps({"version": 1, "step": 4, "loader": torn}))
    with pytest.raises(kafeed.KafeedError, match="hold 1 of the job's 2 ranks"):
        checkpoint_lineage(folder)


def test_a_restarting_torchrun_with_the_shared_store_is_warned_of(monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "1")
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("RANK", "0")
    with caplog.at_level(logging.WARNING, logger="kafeed"):
        check_restarts()
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in caplog.text
    caplog.clear()
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "False")  # what that setting gives the workers
    with caplog.at_level(logging.WARNING, logger="kafeed"):
        check_restarts()
    assert caplog.text == ""


def test_files_elastic_two_ranks_to_one_through_a_gathered_document(tmp_path: Path) -> None:
    # A file dataset's positions name their files; the document of both ranks' states, merged,
    # resumes at one rank with every document once.
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    expected: dict[int, int] = {}
    for name, first in (("a", 1), ("b", 100), ("c", 200)):
        rows = [[doc] * 7 for doc in range(first, first + 30)]
        pq.write_table(pa.table({"input_ids": pa.array(rows, type=pa.list_(pa.int32()))}),
                       tmp_path / f"{name}.parquet")
        expected.update({doc: 7 for doc in range(first, first + 30)})
    seen = np.zeros(300, dtype=np.int64)

    def loader(rank: int, world: int) -> kafeed.StreamLoader:
        dataset = kafeed.FileTokenDataset(tmp_path, seq_len=9, eos_id=0, shuffle_buffer=4, seed=1,
                                          rank=rank, world_size=world)
        return kafeed.StreamLoader(dataset, batch_size=2)

    def take(feed: kafeed.StreamLoader, count: int | None) -> None:
        for n, batch in enumerate(feed, start=1):
            tokens = np.asarray(batch["tokens"]).reshape(-1)
            seen[:] += np.bincount(tokens[tokens > 0], minlength=300)
            if n == count:
                break

    states = []
    for rank in (0, 1):
        feed = loader(rank, 2)
        take(feed, 5)
        states.append(feed.state_dict())
    doc = json.loads(json.dumps({"ranks_version": 1, "world_size": 2, "ranks": states}))
    rest = loader(0, 1)
    rest.load_state_dict(doc)
    take(rest, None)
    assert {doc: int(n) for doc, n in enumerate(seen) if n} == expected
