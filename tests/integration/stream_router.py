"""A second stage on kafeed.stream, for tests: route records by their ``route`` header.

``route: a`` goes to the first output, ``route: b`` to the second, anything else
is a dead letter of kind ``unroutable``. Stateless: the core alone makes it exactly
once. Run as a process (the kill test does)::

    python -m tests.integration.stream_router BOOTSTRAP INPUT OUT_A OUT_B GROUP [--until-caught-up]

It prints ``committed <batches> <records_in>`` after every commit (a readiness line
a test can wait for) and, at the end, the stats as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from kafeed.config import ConnectionSettings
from kafeed.stream import (
    BatchResult,
    DeadLetter,
    Output,
    Record,
    Stage,
    StreamProcessor,
    StreamSettings,
    StreamStats,
)


class RouterStage(Stage[StreamStats]):
    """The whole stage: one pure batch function."""

    name = "route"

    def __init__(self, routes: dict[bytes, str]) -> None:
        self.routes = routes

    def process(self, records: Sequence[Record]) -> BatchResult:
        result = BatchResult()
        for r in records:
            topic = self.routes.get(dict(r.headers).get("route", b""))
            if topic is None:
                result.dead_letters.append(DeadLetter(r, "unroutable", "no route header, or an unknown one"))
            else:
                result.outputs.append(Output(topic, r.key, r.value, r.headers))
        return result

    def report(self, stats: StreamStats) -> StreamStats:
        return stats


def router(connection: ConnectionSettings, source: str, out_a: str, out_b: str, group: str,
           **kafka: object) -> StreamProcessor[StreamStats]:
    settings = StreamSettings(input=source, outputs=(out_a, out_b), group=group, dlq_topic=f"{source}.dlq",
                              idle_s=1.0, kafka=kafka)  # type: ignore[arg-type]
    return StreamProcessor(RouterStage({b"a": out_a, b"b": out_b}), settings, connection)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "out_a", "out_b", "group"):
        ap.add_argument(name)
    ap.add_argument("--batch-size", type=int, default=25)
    ap.add_argument("--until-caught-up", action="store_true")
    args = ap.parse_args(argv)
    processor = router(ConnectionSettings(bootstrap=args.bootstrap), args.input, args.out_a, args.out_b,
                       args.group, batch_size=args.batch_size)
    seen = [0]

    def progress(stats: StreamStats) -> None:
        if stats.batches != seen[0]:
            seen[0] = stats.batches
            print(f"committed {stats.batches} {stats.records_in}", flush=True)

    processor.on_progress = progress
    stats = processor.run(until_caught_up=args.until_caught_up)
    print(json.dumps(stats.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
