"""The ingest loop without a broker: a recording writer stands in for the transactional producer."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from kafeed.ingest import IngestOptions, IngestProgress, JobProgress, discover
from kafeed.ingest.run import _run, _Start, _Target
from kafeed.schema import decode_sample


class Writer:
    """Records what the loop asks of :class:`TxnWriter`, transaction by transaction."""

    def __init__(self) -> None:
        self.open: list[tuple[str, Any]] = []
        self.committed: list[tuple[list[tuple[str, Any]], dict[str, Any]]] = []
        self.begins = 0

    def begin(self) -> None:
        self.begins += 1

    def produce_all(self, records: list[tuple[bytes, bytes]], headers: Any = None) -> None:
        self.open += [("record", r) for r in records]

    def dead_letter(self, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        self.open.append(("dead", (key, value, dict(headers))))

    def poll(self) -> None:
        pass

    def commit(self, job: str, marker: dict[str, Any]) -> None:
        self.committed.append((self.open, marker))
        self.open = []

    def final_stats(self, produced: int) -> tuple[dict[int, int], int | None]:
        return {0: produced}, None


def _ingest(tmp_path: Path, lines: list[bytes], *, stop_after: int | None = None,
            **opts: Any) -> tuple[Writer, Any, list[IngestProgress]]:
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"".join(lines))
    srcs = discover([str(path)])
    options = IngestOptions(**opts)
    writer = Writer()
    stop = threading.Event()
    seen: list[IngestProgress] = []

    def on_progress(p: IngestProgress) -> None:
        seen.append(p)
        if stop_after is not None and len(seen) >= stop_after:
            stop.set()

    summary = _run(writer, srcs, JobProgress(job="j", sources=[s.identity for s in srcs]),  # type: ignore[arg-type]
                   options, _Target("raw", "raw.dlq", 10_000, 10_000), _Start(0.0, False, 0),
                   on_progress=on_progress, stop_event=stop)
    return writer, summary, seen


GOOD = [b'{"id": "d%d", "text": "text %d"}\n' % (i, i) for i in range(7)]


def test_batches_commit_with_a_marker_past_them_and_counts_balance(tmp_path: Path) -> None:
    lines = [*GOOD[:3], b"{broken\n", *GOOD[3:], b'{"id": "x"}\n']
    writer, summary, seen = _ingest(tmp_path, lines, read_batch=3, commit_records=6)
    assert summary.records_in == 9 and summary.produced == 7 and summary.dead_lettered == 2
    assert summary.dead_letter_kinds == {"bad_json": 1, "missing_text": 1} and not summary.stopped
    # 9 lines in batches of 3: a commit after 6 records, the rest in the final commit
    assert [len(txn) for txn, _ in writer.committed] == [6, 3] and summary.transactions == 2
    first, last = writer.committed[0][1], writer.committed[1][1]
    assert (first["index"], first["record"], first["finished"]) == (0, 6, False)
    assert first["offset"] == sum(len(line) for line in lines[:6])
    assert first["totals"] == {"produced": 5, "dead_lettered": 1}
    assert (last["index"], last["offset"], last["finished"]) == (1, 0, True)
    assert last["totals"] == {"produced": 7, "dead_lettered": 2}
    records = [r for txn, _ in writer.committed for kind, r in txn if kind == "record"]
    assert [k for k, _ in records] == [b"d%d" % i for i in range(7)]
    assert decode_sample(records[0][1]).metadata["kafeed.line"] == "1"
    dead = [d for txn, _ in writer.committed for kind, d in txn if kind == "dead"]
    key, value, headers = dead[0]
    assert key == f"{tmp_path / 'docs.jsonl'}:4".encode() and value == b"{broken\n"
    assert headers["kafeed.error.kind"] == b"bad_json" and headers["kafeed.line"] == b"4"
    assert headers["kafeed.job"] == b"j"
    assert [p.records for p in seen] == [3, 6, 9] and seen[-1].bytes_read == sum(map(len, lines))


def test_a_stop_request_ends_at_a_batch_boundary_with_a_commit(tmp_path: Path) -> None:
    writer, summary, _ = _ingest(tmp_path, GOOD, read_batch=2, stop_after=2)
    assert summary.stopped and summary.records_in == 4 and summary.produced == 4
    [(txn, marker)] = writer.committed
    assert len(txn) == 4 and (marker["index"], marker["record"], marker["finished"]) == (0, 4, False)
