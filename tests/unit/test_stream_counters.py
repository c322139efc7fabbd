"""The core's counts of a committed batch: records and value bytes per output topic, dead letters by kind."""

from __future__ import annotations

import pytest

from kafeed.stream import BatchResult, DeadLetter, Output, Record
from kafeed.stream.stats import StreamCounters


def _record(offset: int, value: bytes | None) -> Record:
    return Record("in", 0, offset, b"k", value)


@pytest.mark.parametrize("outputs", [
    [Output("a", b"k", b"xx"), Output("b", None, b"yyy"), Output("a", b"k", b"z"), Output("c", b"k", None)],
    [Output("a", b"k", b"xx"), Output("a", None, b"")],
    [],
])
def test_counts_records_and_bytes_per_topic(outputs: list[Output]) -> None:
    counters = StreamCounters("test", ("in",), ["a", "b"])
    records = [_record(0, b"1234"), _record(1, None)]
    result = BatchResult(outputs=outputs, dead_letters=[DeadLetter(records[1], "decode", "no value")])
    counters.committed(records, result, now=1.0)
    counters.committed(records, result, now=2.0)
    want: dict[str, int] = {"a": 0, "b": 0}
    for o in outputs:
        want[o.topic] = want.get(o.topic, 0) + 2
    assert counters.records_in == 4 and counters.batches == 2
    assert dict(counters.records_out) == want
    assert dict(counters.dead_letter_kinds) == {"decode": 2}
    assert counters.snapshot(3.0).records_out == want


def test_bytes_out_per_topic_reach_the_metrics() -> None:
    from kafeed.telemetry import metrics as m

    def sent(topic: str) -> float:
        return m.BYTES_OUT.labels(stage="test-bytes", topic=topic)._value.get()  # type: ignore[no-any-return]

    before = {t: sent(t) for t in ("a", "b", "c")}
    counters = StreamCounters("test-bytes", ("in",), ["a", "b"])
    outputs = [Output("a", b"k", b"xx"), Output("b", None, b"yyy"), Output("a", b"k", b"z"),
               Output("c", b"k", None)]
    counters.committed([_record(0, b"v")], BatchResult(outputs=outputs), now=1.0)
    assert {t: sent(t) - before[t] for t in before} == {"a": 3, "b": 3, "c": 0}
