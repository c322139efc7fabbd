"""One batch through the stages, without Kafka: decode → normalize → filter → dedup → tokenize.

The result says what to produce (documents, dead letters, changelog entries),
where the input stops (positions) and what was counted. Nothing raised by a
record escapes: it becomes a dead letter naming the stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kafeed.prepare.decode import Decoded, RawRecord, Rejection, decode_batch
from kafeed.prepare.dedup import DedupState, changelog_key, content_hash
from kafeed.prepare.filters import first_failed_filter
from kafeed.prepare.normalize import normalize_text
from kafeed.prepare.settings import PrepareSettings
from kafeed.prepare.stats import BatchCounts
from kafeed.prepare.tokenize import BatchTokenizer
from kafeed.schema.records_pb2 import TokenizedDocument


@dataclass(frozen=True)
class OutputRecord:
    key: bytes
    value: bytes


@dataclass
class BatchResult:
    documents: list[OutputRecord] = field(default_factory=list)
    dead_letters: list[Rejection] = field(default_factory=list)
    changelog: list[tuple[int, bytes]] = field(default_factory=list)  # (input partition, key)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)  # next offset to read
    counts: BatchCounts = field(default_factory=BatchCounts)


def _positions(records: Sequence[RawRecord]) -> dict[tuple[str, int], int]:
    positions: dict[tuple[str, int], int] = {}
    for r in records:
        tp = (r.topic, r.partition)
        if r.offset + 1 > positions.get(tp, -1):
            positions[tp] = r.offset + 1
    return positions


def _document_id(item: Decoded, digest: bytes) -> str:
    if item.sample.id:
        return item.sample.id
    if item.record.key:
        try:
            return item.record.key.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return digest.hex()


Kept = tuple[Decoded, str, bytes]  # decoded record, normalized text, content hash


class BatchPipeline:
    """The stages with their settings; :meth:`run` processes one batch against ``dedup``."""

    def __init__(self, settings: PrepareSettings, tokenizer: BatchTokenizer, *,
                 max_message_bytes: int = 1_000_000) -> None:
        self.settings = settings
        self.tokenizer = tokenizer
        self.max_message_bytes = max_message_bytes

    def run(self, records: Sequence[RawRecord], dedup: DedupState) -> BatchResult:
        s = self.settings
        result = BatchResult(positions=_positions(records))
        counts = result.counts
        counts.records_in = len(records)
        decoded = decode_batch(records)
        result.dead_letters.extend(decoded.rejected)

        kept: list[Kept] = []
        for item in decoded.decoded:
            try:
                text = normalize_text(item.text, s.normalize)
                failed = first_failed_filter(text, s.filters)
            except Exception as exc:  # never crash on data
                result.dead_letters.append(
                    Rejection(item.record, "normalize", f"{type(exc).__name__}: {exc}"))
                continue
            if failed is not None:
                counts.filtered[failed] += 1
                continue
            digest = content_hash(text)
            if s.dedup.enabled and not dedup.check_and_add(item.record.partition, digest):
                counts.duplicates += 1
                continue
            kept.append((item, text, digest))

        for (item, _, digest), packed, n in self._tokenize(kept, result):
            rec, sample = item.record, item.sample
            doc = TokenizedDocument(
                id=_document_id(item, digest), source=sample.source, tokens=packed,
                dtype=self.tokenizer.dtype,  # type: ignore[arg-type]
                num_tokens=n, tokenizer=self.tokenizer.fingerprint, input_topic=rec.topic,
                input_partition=rec.partition, input_offset=rec.offset, timestamp=sample.timestamp,
            )
            doc.target_values.extend(sample.target_values)
            doc.metadata.update(sample.metadata)
            value = doc.SerializeToString()
            if len(value) > self.max_message_bytes:
                result.dead_letters.append(Rejection(
                    rec, "too_large", f"tokenized document is {len(value)} bytes, over the "
                    f"{self.max_message_bytes}-byte message limit"))
                continue  # its hash stays remembered: a copy would be just as large
            result.documents.append(OutputRecord(doc.id.encode("utf-8"), value))
            counts.documents_out += 1
            counts.tokens_out += n
        if s.dedup.enabled:
            for partition, digests in dedup.pending().items():
                result.changelog.extend((partition, changelog_key(partition, d)) for d in digests)
        for rejection in result.dead_letters:
            counts.dead_letter_kinds[rejection.kind] += 1
        return result

    def _tokenize(
        self, kept: list[Kept], result: BatchResult,
    ) -> list[tuple[Kept, bytes, int]]:
        """Encode the batch at once; if that fails, per document, so a bad text costs only itself."""
        if not kept:
            return []
        dtype = self.tokenizer.dtype
        try:
            batch = self.tokenizer.encode_batch([text for _, text, _ in kept])
        except Exception:
            out: list[tuple[Kept, bytes, int]] = []
            for entry in kept:
                try:
                    one = self.tokenizer.encode_batch([entry[1]])
                except Exception as exc:
                    result.dead_letters.append(
                        Rejection(entry[0].record, "tokenize", f"{type(exc).__name__}: {exc}"))
                    continue
                out.append((entry, one.packed(dtype)[0], int(one.lengths()[0])))
            return out
        return list(zip(kept, batch.packed(dtype), batch.lengths().tolist(), strict=True))
