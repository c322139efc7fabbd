"""Global exact dedup as two stages on :mod:`kafeed.stream`: route by content hash, then dedup + tokenize.

**Route** (the user's group, reads the input topic):
decode → normalize → filter, then write each surviving sample, its text replaced by
the normalized text and its id resolved, to the repartition topic
``__kafeed_repartition_<group>`` keyed by the 16-byte hash of that text (so the
producer's key partitioner puts every copy in one partition), with the input
position (partition, offset, topic) in the ``kafeed.lineage`` header. Outputs, dead letters and input offsets
commit in one transaction, as for every stage.

**Dedup** (group ``<group>.dedup``, reads the repartition topic):
compact per-partition hash tables (:mod:`kafeed.prepare.global_dedup`), snapshotted
in the changelog, then tokenize and write documents with the original lineage. The
tokenizer's threads work on batch N while the core consumes and dedups batch N+1 and
commits N-1 (:meth:`DedupStage.finish` collects the tokens on the commit thread).

Each copy of a text meets the same state whatever id, input topic or partition it
came with (so prepare over several sites' topics dedups across sites), and both hops
are exactly once: together, exactly once end to end.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from google.protobuf.message import DecodeError

from kafeed.formats import Decoders
from kafeed.kafka import RECORD_OVERHEAD
from kafeed.prepare.decode import Decoded, decode_batch
from kafeed.prepare.dedup import content_hash
from kafeed.prepare.global_dedup import GlobalDedupState
from kafeed.prepare.minhash import MinHasher
from kafeed.prepare.pipeline import BatchPipeline, BatchResult, Kept, clean_text, document_id
from kafeed.prepare.settings import PrepareSettings
from kafeed.prepare.stats import BatchCounts
from kafeed.prepare.store import as_keys
from kafeed.prepare.tokenize import BatchTokenizer
from kafeed.route import RuleSet
from kafeed.schema.records_pb2 import TrainingSample
from kafeed.stream import BatchResult as StreamBatchResult
from kafeed.stream import DeadLetter, Output, Record, Stage, StreamStats

LINEAGE_HEADER = "kafeed.lineage"
_LINEAGE = struct.Struct(">iq")  # input partition, input offset; then the input topic (UTF-8)


def _lineage(record: Record) -> bytes:
    """The ``kafeed.lineage`` header of a re-keyed record: where its input record lies."""
    return _LINEAGE.pack(record.partition, record.offset) + record.topic.encode("utf-8")


@dataclass(frozen=True)
class StageReport:
    """One stage's counts over its committed batches."""

    counts: BatchCounts
    stream: StreamStats


class _Counting(Stage[StageReport]):
    def __init__(self) -> None:
        self.totals = BatchCounts()

    def committed(self, result: StreamBatchResult) -> None:
        assert isinstance(result, BatchResult)  # what process() returned
        self.totals.add_committed(result.counts, self.name)

    def report(self, stats: StreamStats) -> StageReport:
        return StageReport(self.totals, stats)


class RouteStage(_Counting):
    """Decode, normalize and filter; key each survivor by its text's hash into the repartition topic."""

    # Both steps are stage "prepare": one set of metrics; the groups tell the transactional ids apart.
    name = "prepare"

    def __init__(self, settings: PrepareSettings) -> None:
        super().__init__()
        self.settings = settings
        self.topic = settings.repartition_topic
        # Near-duplicates can have any exact hash: they must all meet one state, in partition 0.
        self.partition = 0 if settings.dedup.near else -1
        self.decoders = Decoders(settings.formats)

    def process(self, records: Sequence[Record]) -> BatchResult:
        result = BatchResult()
        result.counts.records_in = len(records)
        decoded = decode_batch(records, self.decoders)
        result.dead_letters.extend(decoded.rejected)
        for item in decoded.decoded:
            text = clean_text(item, self.settings, result)
            if text is None:
                continue
            digest = content_hash(text)
            sample = item.sample
            sample.id = document_id(item, digest)
            sample.input_data = text.encode("utf-8", "surrogatepass")
            rec = item.record
            result.outputs.append(Output(self.topic, digest, sample.SerializeToString(),
                                         ((LINEAGE_HEADER, _lineage(rec)),),
                                         self.partition))
        for rejection in result.dead_letters:
            result.counts.dead_letter_kinds[rejection.kind] += 1
        return result


class DedupStage(_Counting):
    """Dedup the re-keyed records against compact per-partition state, then tokenize."""

    name = "prepare"
    snapshots = True

    def __init__(self, settings: PrepareSettings, tokenizer: BatchTokenizer, *,
                 rules: RuleSet | None = None) -> None:
        super().__init__()
        self.settings = settings
        # The repartition topic holds the route step's TrainingSample records, whatever the inputs held.
        self.pipeline = BatchPipeline(settings, tokenizer, rules=rules, decoders=Decoders())
        d = settings.dedup
        self.state = GlobalDedupState(max_entries=d.effective_max_entries, horizon_ms=d.horizon_ms,
                                      snapshot_every=d.snapshot_every)
        # A snapshot (two chunks or more and its marker) and up to snapshot_every - 1 tail
        # records, each tail record followed by its transaction's commit marker.
        self.snapshot_window = 2 * d.snapshot_every + 4
        self.minhash = (MinHasher(shingle=d.near_shingle, bands=d.near_bands, rows=d.near_rows)
                        if d.near else None)

    def bind(self, max_message_bytes: Mapping[str, int]) -> None:
        # With rules there are several output topics: a document must fit the smallest limit.
        self.pipeline.max_message_bytes = min(max_message_bytes.values()) - RECORD_OVERHEAD

    def _source(self, r: Record) -> Record:
        """The input record this re-keyed one came from (for lineage and dead letters)."""
        for name, value in r.headers:
            if name == LINEAGE_HEADER and len(value) >= _LINEAGE.size:
                partition, offset = _LINEAGE.unpack_from(value)
                # A header without a topic was written before prepare read several inputs.
                topic = value[_LINEAGE.size:].decode("utf-8") or self.settings.input[0]
                return Record(topic, partition, offset, r.key, r.value, (), r.timestamp_ms)
        return r

    def process(self, records: Sequence[Record]) -> BatchResult:
        result = BatchResult()
        counts = result.counts
        counts.records_in = len(records)
        items: list[tuple[Record, Decoded]] = []
        for r in records:
            source = self._source(r)
            try:
                if r.key is None or len(r.key) != 16:
                    raise DecodeError("the key is not a 16-byte content hash")
                sample = TrainingSample.FromString(r.value or b"")
                text = sample.input_data.decode("utf-8", "surrogatepass")
            except (DecodeError, UnicodeDecodeError) as exc:
                result.dead_letters.append(DeadLetter(source, "decode", f"re-keyed record: {exc}"))
                continue
            items.append((r, Decoded(source, sample, text)))
        keys = as_keys([r.key or b"" for r, _ in items]).reshape(-1, 1)
        if self.minhash is not None:
            keys = np.hstack([keys, self.minhash.band_keys([item.text for _, item in items])])
        hits = self.state.check_groups([r.partition for r, _ in items], keys,
                                       [r.timestamp_ms for r, _ in items])
        kept: list[Kept] = []
        for (r, item), hit in zip(items, hits, strict=True):
            if hit < 0:
                kept.append((item, item.text, r.key or b""))
            elif hit == 0:  # the exact hash
                counts.duplicates += 1
            else:  # a band key: a near-duplicate of a document already kept
                counts.near_duplicates += 1
        self.pipeline.tokenize(kept, result)  # runs on while the core commits the batch before
        result.changelog.extend(self.state.changelog())
        return result

    def finish(self, result: StreamBatchResult) -> None:
        assert isinstance(result, BatchResult)  # what process() returned
        self.pipeline.finish(result)

    def committed(self, result: StreamBatchResult) -> None:
        self.state.commit()
        super().committed(result)

    def rolled_back(self) -> None:
        self.state.rollback()

    def restore(self, partition: int, changelog: Sequence[tuple[bytes, bytes | None]]) -> None:
        self.state.restore(partition, changelog)

    def drop(self, partition: int) -> None:
        self.state.drop_partition(partition)

    def close(self) -> None:
        self.pipeline.close()
