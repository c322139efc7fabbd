"""Local Parquet/Arrow files as a loader source: order, sharding, exact and elastic resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kafeed
from kafeed.errors import ConfigError, ResumeMismatch, SchemaError
from kafeed.loader.nodes.readers import file_reader
from kafeed.loader.nodes.stream import TokenStream
from kafeed.loader.opening import Topology, open_stream
from kafeed.loader.settings import LoaderSettings
from tests.stateful_harness import Stateful, check_save_resume, piece_case

EOS = 0
DOCS_PER_FILE = 50


def _write(root: Path, files: int = 3, *, seed: int = 0, arrow: bool = False) -> np.ndarray:
    """Files of documents whose every token is the document's number (1-based); returns the
    expected count of each token value (as tests/integration/loader_data.py does)."""
    rng = np.random.default_rng(seed)
    expected = np.zeros(files * DOCS_PER_FILE + 1, dtype=np.int64)
    doc = 0
    for f in range(files):
        rows = []
        for _ in range(DOCS_PER_FILE):
            doc += 1
            size = int(rng.integers(1, 40))
            rows.append([doc] * size)
            expected[doc] = size
        table = pa.table({"input_ids": pa.array(rows, type=pa.list_(pa.int32())), "text": ["x"] * len(rows)})
        if arrow:
            with pa.OSFile(str(root / f"part-{f}.arrow"), "wb") as sink, \
                    pa.ipc.new_stream(sink, table.schema) as writer:  # as save_to_disk writes
                for batch in table.to_batches(max_chunksize=13):
                    writer.write_batch(batch)
        else:
            pq.write_table(table, root / f"part-{f}.parquet", row_group_size=13)
    return expected


def _counts(batches: list[Any], size: int) -> np.ndarray:
    values = np.concatenate([np.asarray(b["tokens"]).reshape(-1) for b in batches if b is not None])
    return np.bincount(values[values > EOS], minlength=size)[:size]


def _settings(root: Path, **kw: Any) -> LoaderSettings:
    return LoaderSettings(**{"topics": ("files",), "files": (str(root),), "seq_len": 15, "eos_id": EOS, **kw})


ONE = Topology(0, 1, 0, 1)


def _stream(settings: LoaderSettings, topo: Topology = ONE, saved: Any = None) -> Any:
    return open_stream(settings, topo, saved, client_stats=False)


def _stream_case(settings: LoaderSettings) -> Stateful[Any]:
    return piece_case(lambda: TokenStream(settings, file_reader(settings, index=0, count=1)),
                      lambda stream: stream.next(3))


@pytest.mark.parametrize("arrow", [False, True])
def test_every_document_once_in_file_order(tmp_path: Path, arrow: bool) -> None:
    expected = _write(tmp_path, arrow=arrow)
    stream = _stream(_settings(tmp_path))
    batches = []
    while (batch := stream.next(4)) is not None:
        batches.append(batch)
    assert np.array_equal(_counts(batches, len(expected)), expected)
    flat = np.concatenate([b["tokens"].reshape(-1) for b in batches])
    docs = flat[flat > EOS]
    assert np.all(np.diff(docs) >= 0)  # file after file, row after row
    assert stream.stats()["records"] == 3 * DOCS_PER_FILE


@pytest.mark.parametrize("shuffle", [0, 20])
@pytest.mark.parametrize("first", [0, 7, 23, 60])
def test_save_resume_in_the_middle_of_a_file(tmp_path: Path, shuffle: int, first: int) -> None:
    _write(tmp_path)
    check_save_resume(_stream_case(_settings(tmp_path, shuffle_buffer=shuffle, seed=3)), first, 25)


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_and_stream_loader_save_resume(tmp_path: Path, workers: int) -> None:
    expected = _write(tmp_path)

    def make() -> Any:
        dataset = kafeed.FileTokenDataset(tmp_path, seq_len=15, eos_id=EOS, shuffle_buffer=10)
        return kafeed.StreamLoader(dataset, batch_size=4, num_workers=workers)

    class Node:
        def __init__(self) -> None:
            self.loader = make()
            self.it: Any = None

    def step(node: Node) -> Any:
        node.it = node.it or iter(node.loader)
        return next(node.it, None)

    case = Stateful(make=Node, step=step, state=lambda node: node.loader.state_dict(),
                    load=lambda node, state: node.loader.load_state_dict(state))
    first, rest = check_save_resume(case, 9, 60)
    assert rest[-1] is None
    assert np.array_equal(_counts(first + rest, len(expected)), expected)


def test_files_are_sharded_by_file_and_resume_elastically(tmp_path: Path) -> None:
    expected = _write(tmp_path, files=5)
    settings = _settings(tmp_path)
    streams = [_stream(settings, Topology(0, 2, 0, 1)), _stream(settings, Topology(1, 2, 0, 1))]
    assert [sorted(p.key for p in s.reader.parts) for s in streams] == [
        ["files:0", "files:2", "files:4"], ["files:1", "files:3"]]
    batches = [streams[0].next(2), streams[1].next(2)]
    state = kafeed.merge_states([
        {**kafeed.FileTokenDataset(tmp_path, seq_len=15, eos_id=EOS).empty_state(), "num_readers": 2,
         "readers": {str(i): json.loads(json.dumps(s.state()))}} for i, s in enumerate(streams)])
    one = _stream(settings, Topology(0, 1, 0, 1), saved=state)  # two readers' state, one reader now
    while (batch := one.next(4)) is not None:
        batches.append(batch)
    got = _counts(batches, len(expected))
    # Whole documents only after an elastic resume: a document cut by the save is delivered
    # again from where it was cut, so every token arrives exactly once.
    assert np.array_equal(got, expected)


def test_a_changed_file_is_refused_on_resume(tmp_path: Path) -> None:
    _write(tmp_path)
    stream = _stream(_settings(tmp_path))
    stream.next(2)
    saved = {**kafeed.FileTokenDataset(tmp_path, seq_len=15, eos_id=EOS).empty_state(), "num_readers": 1,
             "readers": {"0": json.loads(json.dumps(stream.state()))}}
    pq.write_table(pa.table({"input_ids": [[1, 2]]}), tmp_path / "part-0.parquet")
    with pytest.raises(ResumeMismatch, match="files:0"):
        _stream(_settings(tmp_path), saved=saved)


def test_bad_inputs_are_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no Parquet or Arrow file"):
        _stream(_settings(tmp_path))
    pq.write_table(pa.table({"ids": [[1, -2]]}), tmp_path / "a.parquet")
    with pytest.raises(SchemaError, match="outside"):
        _stream(_settings(tmp_path)).next(1)
    with pytest.raises(SchemaError, match="no column 'nope'"):
        _stream(_settings(tmp_path, column="nope")).next(1)
    with pytest.raises(ConfigError, match="end=None does not apply"):
        kafeed.FileTokenDataset(tmp_path, seq_len=15, eos_id=EOS, end=None)


def test_the_parquet_files_kafeed_archive_writes_are_read_and_raw_rows_skipped(tmp_path: Path) -> None:
    # The archive's columns (kafeed.archive.schema): a kind per row, token lists of longs.
    rows = {"offset": [0, 1, 2, 3], "timestamp": pa.array([0] * 4, type=pa.timestamp("us")),
            "kind": ["TokenizedDocument", "raw", "TokenizedDocument", "TokenizedDocument"],
            "tokens": pa.array([[1, 1], None, [2, 2, 2], [3]], type=pa.list_(pa.int64())),
            "tokenizer": ["gpt2", None, "gpt2", "other"]}
    pq.write_table(pa.table(rows), tmp_path / "data.parquet")
    stream = _stream(_settings(tmp_path, tokenizer="gpt2"))
    batch = stream.next(4)
    tokens = batch["tokens"].reshape(-1).tolist()
    assert tokens[:7] == [1, 1, EOS, 2, 2, 2, EOS]  # the raw row and the other tokenizer's skipped
    assert stream.stats() == {"records": 2, "bad": 2, "tokens": 5}


def test_positions_in_files_are_not_mirrored_to_a_consumer_group(tmp_path: Path) -> None:
    _write(tmp_path, files=1)
    loader = kafeed.StreamLoader(kafeed.FileTokenDataset(tmp_path, seq_len=15, eos_id=EOS), batch_size=2)
    next(iter(loader))
    with pytest.raises(ConfigError, match="no consumer group"):
        loader.commit_offsets("trainer")
