"""One batch through the stages, without Kafka: decode → normalize → filter → dedup → (route) → tokenize.

The result says what to produce (documents, dead letters, changelog entries) and
what was counted; :mod:`kafeed.stream` commits it with the input positions.
:meth:`BatchPipeline.start` leaves the tokenizer running on the batch's last chunks;
:meth:`BatchPipeline.finish` collects them (the core calls it on its commit thread, so
batch N is tokenized while batch N+1 is consumed and put through the Python stages).
Nothing raised by a record escapes: it becomes a dead letter naming the stage.

With routing rules (:mod:`kafeed.route`), each document that passed dedup goes to the
topic of the first rule its cleaned text and sample match, before it is tokenized: a
``drop`` rule drops it (counted per rule), and one that no rule matches goes to the
rules' default topic, or becomes an ``unrouted`` dead letter.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from kafeed.formats import Decoders
from kafeed.kafka import RECORD_OVERHEAD
from kafeed.prepare.decode import Decoded, decode_batch
from kafeed.prepare.dedup import DedupState, batch_changelog_record, changelog_key, content_hash
from kafeed.prepare.filters import first_failed_filter
from kafeed.prepare.normalize import normalize_text
from kafeed.prepare.settings import PrepareSettings
from kafeed.prepare.stats import BatchCounts
from kafeed.prepare.tokenize import BatchTokenizer, TokenBatch
from kafeed.route import DEFAULT_RULE, DROP, RuleSet
from kafeed.route.columns import Columns
from kafeed.route.engine import UNROUTED
from kafeed.schema.records_pb2 import TokenizedDocument
from kafeed.stream import BatchResult as StreamBatchResult
from kafeed.stream import DeadLetter, Output, Record
from kafeed.topics.admin import DEFAULT_MAX_MESSAGE_BYTES

Kept = tuple[Decoded, str, bytes]  # decoded record, normalized text, content hash
Routed = tuple[Decoded, str, bytes, str]  # ... and the topic its document goes to
Chunk = tuple[list[Routed], "Future[TokenBatch]"]


@dataclass
class BatchResult(StreamBatchResult):
    """The core's batch result (documents are the outputs), with prepare's counts."""

    counts: BatchCounts = field(default_factory=BatchCounts)
    # Chunks still being tokenized: (entries, their tokens) until BatchPipeline.finish.
    tokenizing: list[Chunk] = field(default_factory=list, repr=False)

    @property
    def documents(self) -> list[Output]:
        return self.outputs


def document_id(item: Decoded, digest: bytes) -> str:
    if item.sample.id:
        return item.sample.id
    if item.record.key:
        try:
            return item.record.key.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return digest.hex()


def clean_text(item: Decoded, settings: PrepareSettings, result: BatchResult) -> str | None:
    """The normalized text, or None when a filter dropped it (counted) or a stage raised (dead letter)."""
    try:
        text = normalize_text(item.text, settings.normalize)
        failed = first_failed_filter(text, settings.filters)
    except Exception as exc:  # never crash on data
        result.dead_letters.append(DeadLetter(item.record, "normalize", f"{type(exc).__name__}: {exc}"))
        return None
    if failed is not None:
        result.counts.filtered[failed] += 1
        return None
    return text


class BatchPipeline:
    """The stages with their settings; :meth:`run` processes one batch against ``dedup``."""

    def __init__(self, settings: PrepareSettings, tokenizer: BatchTokenizer, *,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES - RECORD_OVERHEAD,
                 rules: RuleSet | None = None, decoders: Decoders | None = None) -> None:
        self.settings = settings
        self.tokenizer = tokenizer
        self.max_message_bytes = max_message_bytes
        self.rules = rules
        # The input topics' formats (settings.formats), unless the caller reads a topic of its own.
        self.decoders = decoders or Decoders(settings.formats)
        self._pool: ThreadPoolExecutor | None = None

    def run(self, records: Sequence[Record], dedup: DedupState) -> BatchResult:
        """One batch, tokens collected: :meth:`start` then :meth:`finish`."""
        result = self.start(records, dedup)
        self.finish(result)
        return result

    def start(self, records: Sequence[Record], dedup: DedupState) -> BatchResult:
        """Every stage of one batch; the last chunks may still be tokenizing (see :meth:`finish`)."""
        s = self.settings
        result = BatchResult()
        counts = result.counts
        counts.records_in = len(records)
        dedup.new_layer()
        decoded = decode_batch(records, self.decoders)
        result.dead_letters.extend(decoded.rejected)

        # Texts go to the tokenizer in chunks as soon as they pass dedup; encode_batch runs in
        # Rust without the GIL, so with overlap on it tokenizes chunk k while this thread
        # normalizes chunk k+1.
        chunks = result.tokenizing
        current: list[Kept] = []
        for item in decoded.decoded:
            text = clean_text(item, s, result)
            if text is None:
                continue
            digest = content_hash(text)
            if s.dedup.enabled and not dedup.check_and_add(item.record.partition, digest):
                counts.duplicates += 1
                continue
            current.append((item, text, digest))
            if len(current) >= s.tokenizer.chunk_size:
                chunks.append(self._chunk(current, result))
                current = []
        if current:
            chunks.append(self._chunk(current, result))
        if s.dedup.enabled:
            self._changelog(records, dedup, result)
        return result

    def tokenize(self, kept: Sequence[Kept], result: BatchResult) -> None:
        """Route ``kept`` and start tokenizing it in chunks; :meth:`finish` collects the tokens."""
        size = self.settings.tokenizer.chunk_size
        for i in range(0, len(kept), size):
            result.tokenizing.append(self._chunk(list(kept[i:i + size]), result))

    def finish(self, result: BatchResult) -> None:
        """Collect the tokens of ``result``'s chunks into documents, then count its dead letters."""
        chunks, result.tokenizing = result.tokenizing, []
        for entries, future in chunks:
            self._emit(self._collect(entries, future, result), result)
        kinds = result.counts.dead_letter_kinds
        kinds.clear()
        for rejection in result.dead_letters:
            kinds[rejection.kind] += 1

    def route(self, kept: list[Kept], result: BatchResult) -> list[Routed]:
        """Each entry with its output topic; drops and unrouted entries leave here, counted."""
        rules = self.rules
        if rules is None:
            output = self.settings.output
            return [(item, text, digest, output) for item, text, digest in kept]
        columns = Columns([item.sample for item, _, _ in kept], [text for _, text, _ in kept],
                          [item.record.headers for item, _, _ in kept])
        counts = result.counts
        routed: list[Routed] = []
        for (item, text, digest), k in zip(kept, rules.assign(columns), strict=True):
            if k >= 0:
                name, target = rules.rules[k].name, rules.rules[k].to
            elif rules.default is not None:
                name, target = DEFAULT_RULE, rules.default
            else:
                result.dead_letters.append(DeadLetter(item.record, "unrouted", UNROUTED))
                continue
            counts.routed[name] += 1
            if target == DROP:
                counts.dropped += 1
            else:
                routed.append((item, text, digest, target))
        return routed

    def _chunk(self, kept: list[Kept], result: BatchResult) -> Chunk:
        """Route ``kept`` and start tokenizing what goes on."""
        routed = self.route(kept, result)
        return routed, self._submit(routed)

    def _changelog(self, records: Sequence[Record], dedup: DedupState, result: BatchResult) -> None:
        """The batch's new hashes as changelog records (value: the input offset, or all hashes)."""
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for r in records:
            first.setdefault(r.partition, r.offset)
            last[r.partition] = r.offset
        for partition, digests in dedup.pending().items():
            if self.settings.dedup.changelog_format == "batch":
                key, value = batch_changelog_record(partition, first[partition], sorted(digests))
                result.changelog.append((partition, key, value))
            else:
                offset = str(last[partition]).encode()
                result.changelog.extend((partition, changelog_key(partition, d), offset) for d in digests)

    def _submit(self, entries: list[Routed]) -> Future[TokenBatch]:
        texts = [entry[1] for entry in entries]
        if self.settings.tokenizer.overlap:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafeed-tokenize")
            return self._pool.submit(self.tokenizer.encode_batch, texts)
        future: Future[TokenBatch] = Future()
        try:
            future.set_result(self.tokenizer.encode_batch(texts))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def _collect(
        self, entries: list[Routed], future: Future[TokenBatch], result: BatchResult,
    ) -> list[tuple[Routed, bytes, int]]:
        """A chunk's tokens; if the chunk failed, per document, so a bad text costs only itself."""
        dtype = self.tokenizer.dtype
        try:
            batch = future.result()
        except Exception:
            out: list[tuple[Routed, bytes, int]] = []
            for entry in entries:
                try:
                    one = self.tokenizer.encode_batch([entry[1]])
                except Exception as exc:
                    result.dead_letters.append(
                        DeadLetter(entry[0].record, "tokenize", f"{type(exc).__name__}: {exc}"))
                    continue
                out.append((entry, one.packed(dtype)[0], int(one.lengths()[0])))
            return out
        return list(zip(entries, batch.packed(dtype), batch.lengths().tolist(), strict=True))

    def _emit(self, tokenized: list[tuple[Routed, bytes, int]], result: BatchResult) -> None:
        counts = result.counts
        for (item, _, digest, topic), packed, n in tokenized:
            rec, sample = item.record, item.sample
            doc = TokenizedDocument(
                id=document_id(item, digest), source=sample.source, tokens=packed,
                dtype=self.tokenizer.dtype,  # type: ignore[arg-type]
                num_tokens=n, tokenizer=self.tokenizer.fingerprint, input_topic=rec.topic,
                input_partition=rec.partition, input_offset=rec.offset, timestamp=sample.timestamp,
            )
            doc.target_values.extend(sample.target_values)
            doc.metadata.update(sample.metadata)
            value = doc.SerializeToString()
            if len(value) > self.max_message_bytes:
                result.dead_letters.append(DeadLetter(
                    rec, "too_large", f"tokenized document is {len(value)} bytes, over the "
                    f"{self.max_message_bytes}-byte message limit"))
                continue  # its hash stays remembered: a copy would be just as large
            result.outputs.append(Output(topic, doc.id.encode("utf-8"), value))
            counts.documents_out += 1
            counts.tokens_out += n

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
