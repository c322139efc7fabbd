"""Compressed sources: every codec for every line format, detection by magic bytes, exact resume."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from kafeed.errors import ConfigError, IngestError
from kafeed.ingest import IngestOptions, discover
from kafeed.ingest.batches import Item, Position
from kafeed.ingest.readers import read_source

COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    ".gz": gzip.compress,
    ".zst": lambda b: zstandard.ZstdCompressor().compress(b),
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
}
N = 50


def _plain(kind: str) -> bytes:
    if kind == "jsonl":
        return b"".join(b'{"id": "r%d", "text": "line %d"}\n' % (i, i) for i in range(N))
    if kind == "csv":
        return b"id,text\n" + b"".join(b'r%d,"line %d"\n' % (i, i) for i in range(N))
    return b"".join(b"line %d\n" % i for i in range(N))


def _texts(items: list[Item]) -> list[str]:
    return [str(i.fields["text"]) for i in items if i.fields is not None]


def _read(path: Path, start: Position | None = None, batch: int = 7) -> list[tuple[list[Item], Position]]:
    [src] = discover([str(path)])
    return list(read_source(src, IngestOptions(read_batch=batch), start or Position()))


@pytest.mark.parametrize("kind, suffix", [("jsonl", ".jsonl"), ("csv", ".csv"), ("text", ".txt")])
@pytest.mark.parametrize("codec", sorted(COMPRESS))
def test_every_codec_reads_like_the_plain_file_and_resumes_exactly(
        tmp_path: Path, kind: str, suffix: str, codec: str) -> None:
    plain = _plain(kind)
    path = tmp_path / f"docs{suffix}{codec}"
    path.write_bytes(COMPRESS[codec](plain))
    batches = _read(path)
    items = [i for b, _ in batches for i in b]
    assert _texts(items) == [f"line {i}" for i in range(N)]
    assert all(i.reject is None for i in items)
    # Progress counts compressed bytes, ending at the file's size; the resume offset is
    # a position in the decompressed bytes.
    reads = [p.source_bytes for _, p in batches]
    assert all(r is not None for r in reads) and reads[-1] == path.stat().st_size
    assert batches[-1][1].offset == len(plain)
    # Resuming from any batch boundary yields exactly the records after it.
    for cut in range(len(batches)):
        done = [i for b, _ in batches[:cut + 1] for i in b]
        rest = [i for b, _ in _read(path, batches[cut][1]) for i in b]
        assert _texts(done) + _texts(rest) == [f"line {i}" for i in range(N)]
        assert [i.where for i in done + rest] == [i.where for i in items]


def test_magic_bytes_win_over_a_lying_suffix(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"  # gzip inside, no .gz
    path.write_bytes(gzip.compress(_plain("jsonl")))
    items = [i for b, _ in _read(path) for i in b]
    assert _texts(items) == [f"line {i}" for i in range(N)]
    zst_named_gz = tmp_path / "docs.csv.gz"  # zstd inside, named gzip
    zst_named_gz.write_bytes(COMPRESS[".zst"](_plain("csv")))
    assert len(_texts([i for b, _ in _read(zst_named_gz) for i in b])) == N


def test_a_compression_suffix_on_plain_bytes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(_plain("jsonl"))
    with pytest.raises(IngestError, match=r"docs\.jsonl\.gz is named like a gzip file .*byte 0"):
        _read(path)
    empty = tmp_path / "empty.txt.xz"
    empty.write_bytes(b"")
    assert [i for b, _ in _read(empty) for i in b] == []


@pytest.mark.parametrize("codec", sorted(COMPRESS))
def test_truncated_stream_is_one_ingest_error_after_the_good_batches(tmp_path: Path, codec: str) -> None:
    # Text that compresses about 2x, so the cut falls well past the first buffer fill.
    body = COMPRESS[codec](b"".join(b'{"id": "r%d", "text": "%s"}\n' % (i, hashlib.sha256(b"%d" % i)
                                    .hexdigest().encode() * 2) for i in range(20_000)))
    path = tmp_path / f"cut.jsonl{codec}"
    path.write_bytes(body[: len(body) * 2 // 3])
    [src] = discover([str(path)])
    seen: list[Item] = []
    with pytest.raises(IngestError) as info:
        for items, _ in read_source(src, IngestOptions(read_batch=10), Position()):
            seen.extend(items)
    assert str(path) in info.value.message and "corrupt or truncated" in info.value.message
    assert "decompressed bytes" in info.value.message and "compressed byte" in info.value.message
    assert seen and all(i.reject is None for i in seen)  # whole batches before the cut came through


def test_garbage_after_the_magic_is_one_ingest_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt.gz"
    path.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    with pytest.raises(IngestError, match=r"bad\.txt\.gz is corrupt or truncated"):
        _read(path)


def test_discovery_looks_past_the_compression_suffix(tmp_path: Path) -> None:
    for name in ("a.jsonl.gz", "b.csv.zst", "c.txt.bz2", "d.ndjson.xz", "e.parquet.gz", "f.gz"):
        (tmp_path / name).write_bytes(b"")
    kinds = {Path(s.name).name: s.kind for s in discover([str(tmp_path)])}
    assert kinds == {"a.jsonl.gz": "jsonl", "b.csv.zst": "csv", "c.txt.bz2": "text", "d.ndjson.xz": "jsonl"}
    with pytest.raises(ConfigError, match="Cannot tell the format"):
        discover([str(tmp_path / "e.parquet.gz")])
