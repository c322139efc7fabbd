"""A saved position in files names the file it points at (class: stable identities on resume).

Every change to a folder of files between save and resume, run through the public path
(FileTokenDataset, StreamLoader, state_dict / load_state_dict): files added anywhere in the
sort order are read as new and every document arrives exactly once; a file changed, removed
or renamed is refused with ResumeMismatch naming it. A state saved before files were named
(no ``files`` in its fingerprint) still resumes.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kafeed
from kafeed.errors import ConfigError, ResumeMismatch

EOS = 0
DOCS = 40
MAX_DOC = 400


def _write(path: Path, first: int, *, size: int = 5) -> dict[int, int]:
    """``DOCS`` documents numbered from ``first``, each ``size`` copies of its number."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [[doc] * size for doc in range(first, first + DOCS)]
    pq.write_table(pa.table({"input_ids": pa.array(rows, type=pa.list_(pa.int32()))}), path, row_group_size=7)
    return {doc: size for doc in range(first, first + DOCS)}


def _counts(batches: list[Any]) -> dict[int, int]:
    values = np.concatenate([np.asarray(b["tokens"]).reshape(-1) for b in batches])
    counts = np.bincount(values[values > EOS], minlength=MAX_DOC)
    return {int(doc): int(n) for doc, n in enumerate(counts) if n}


def _loader(root: Path, workers: int, state: Any = None) -> Any:
    dataset = kafeed.FileTokenDataset(root, seq_len=9, eos_id=EOS, shuffle_buffer=8, seed=1)
    loader = kafeed.StreamLoader(dataset, batch_size=3, num_workers=workers)
    if state is not None:
        loader.load_state_dict(state)
    return loader


Change = Callable[[Path], dict[int, int]]  # changes the folder; the documents it adds


def _insert_b(root: Path) -> dict[int, int]:
    return _write(root / "b.parquet", 200)


def _insert_first(root: Path) -> dict[int, int]:
    return _write(root / "0.parquet", 200) | _write(root / "sub" / "x.parquet", 300)


def _append_z(root: Path) -> dict[int, int]:
    return _write(root / "z.parquet", 200)


READ_AS_NEW: dict[str, Change] = {"insert b among a c e": _insert_b, "insert before all, and in a subfolder":
                                  _insert_first, "append z": _append_z, "nothing": lambda root: {}}


def _rewrite_c(root: Path) -> None:
    _write(root / "c.parquet", 100, size=6)  # the same row count, other documents


def _remove_c(root: Path) -> None:
    (root / "c.parquet").unlink()


def _rename_c(root: Path) -> None:
    (root / "c.parquet").rename(root / "d.parquet")


REFUSED: dict[str, Callable[[Path], None]] = {"c rewritten": _rewrite_c, "c removed": _remove_c,
                                              "c renamed to d": _rename_c}


def _start(root: Path, workers: int, taken: int) -> tuple[dict[int, int], list[Any], dict[str, Any]]:
    expected = _write(root / "a.parquet", 1) | _write(root / "c.parquet", 100)
    expected |= _write(root / "e.parquet", 150)
    loader = _loader(root, workers)
    it = iter(loader)
    first = [next(it) for _ in range(taken)]
    state = json.loads(json.dumps(loader.state_dict()))
    del it
    return expected, first, state


@pytest.mark.parametrize("change", READ_AS_NEW.values(), ids=READ_AS_NEW.keys())
def test_files_added_since_the_save_are_read_as_new(tmp_path: Path, change: Change) -> None:
    _resume_after(tmp_path, change, 0)


@pytest.mark.slow  # DataLoader workers: their start is most of a minute on a loaded 2-core machine
def test_files_added_since_the_save_are_read_as_new_by_dataloader_workers(tmp_path: Path) -> None:
    # The file order is settled in the main process and reaches the workers with the dataset.
    _resume_after(tmp_path, _insert_b, 2)


def _resume_after(tmp_path: Path, change: Change, workers: int) -> None:
    root = tmp_path / "corpus"
    expected, first, state = _start(root, workers, 11)
    expected |= change(root)
    rest = list(_loader(root, workers, state))
    assert _counts(first + rest) == expected


def test_a_moved_folder_resumes(tmp_path: Path) -> None:
    expected, first, state = _start(tmp_path / "corpus", 0, 5)
    shutil.move(tmp_path / "corpus", tmp_path / "elsewhere")
    assert _counts(first + list(_loader(tmp_path / "elsewhere", 0, state))) == expected


@pytest.mark.parametrize("change", REFUSED.values(), ids=REFUSED.keys())
def test_a_changed_removed_or_renamed_file_is_refused(tmp_path: Path, change: Callable[[Path], None]) -> None:
    root = tmp_path / "corpus"
    _, _, state = _start(root, 0, 5)
    change(root)
    with pytest.raises(ResumeMismatch, match=r"'c\.parquet'"):
        _loader(root, 0, state)


def test_a_state_saved_without_file_names_still_resumes(tmp_path: Path) -> None:
    expected, first, state = _start(tmp_path, 0, 7)
    del state["fingerprint"]["files"]  # as kafeed saved it before files were named
    assert sorted(state["fingerprint"]) == ["eos_id", "kind", "seq_len", "tokenizer", "topics"]
    loader = _loader(tmp_path, 0, state)
    rest = list(loader)
    assert _counts(first + rest) == expected
    names = [n for n, _ in loader.state_dict()["fingerprint"]["files"]]
    assert names == ["a.parquet", "c.parquet", "e.parquet"]


def test_no_files_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="no file"):
        kafeed.FileTokenDataset([], seq_len=9, eos_id=EOS)


def _mixture(root: Path, state: Any = None) -> Any:
    mix = kafeed.Mixture({"left": 0.8, "right": 0.2}, seq_len=9, eos_id=EOS, shuffle_buffer=8, seed=1,
                         sources={side: {"files": str(root / side)} for side in ("left", "right")},
                         on_dry="drop")
    loader = kafeed.StreamLoader(mix, batch_size=3)
    if state is not None:
        loader.load_state_dict(state)
    return loader


def test_a_mixtures_file_sources_name_their_files_too(tmp_path: Path) -> None:
    expected = _write(tmp_path / "left" / "a.parquet", 1) | _write(tmp_path / "left" / "c.parquet", 100)
    expected |= _write(tmp_path / "right" / "a.parquet", 150)
    loader = _mixture(tmp_path)
    it = iter(loader)
    first = [next(it) for _ in range(15)]  # into the second file of "left"
    state = json.loads(json.dumps(loader.state_dict()))
    del it
    expected |= _write(tmp_path / "left" / "b.parquet", 200)  # among the others: read as new
    assert _counts(first + list(_mixture(tmp_path, state))) == expected
    assert sorted(state["fingerprint"]["files"]) == ["left", "right"]
    _write(tmp_path / "right" / "a.parquet", 150, size=6)  # changed: refused
    with pytest.raises(ResumeMismatch, match=r"'a\.parquet'"):
        _mixture(tmp_path, state)
