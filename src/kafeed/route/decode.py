"""A batch of raw records to the columns the rules read, without a message object per record.

Most raw records are Protobuf ``TrainingSample`` values without headers whose only
fields are the text (1), timestamp (4), id (5) and source (6). Such values are split
into fields for the whole batch at once (:func:`scan_samples`: numpy over the joined
values, one step per field, not per byte or per record), and a rule reads the text
and source straight from the value's bytes. Labels and metadata, which few rules read,
are parsed with upb (``TrainingSample.FromString``) only for the records a rule asks about.

Every other record takes the per-record path, through its topic's value format
(kafeed.formats): a record of a topic that holds JSON or text, a format header (Avro), a
tombstone, a value with other fields (labels, metadata, unknown ones), a multi-byte tag, or
non-ASCII bytes in a string field (upb checks those are UTF-8). So the batch path
never accepts a value upb would refuse, and what it reads is what upb would read
(the last occurrence of a repeated field wins); tests/unit/test_route_decode.py
checks both on generated and corrupted values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError

from kafeed.formats import Decoders, Rejected
from kafeed.route.columns import Bools, Columns, Ints
from kafeed.schema.records_pb2 import TrainingSample
from kafeed.stream import DeadLetter, Record
from kafeed.stream.batch import HeaderList, RecordBatch

# Wire format: a tag byte (field number << 3 | wire type), then a varint or a length and bytes.
_VARINT, _LEN = 0, 2
_TEXT, _TIMESTAMP, _ID, _SOURCE = 1, 4, 5, 6
#: The one-byte tags of the fields the batch path reads or skips; any other tag sends the
#: record to upb.
_FAST_TAGS = np.zeros(256, dtype=bool)
for _field, _wire in ((_TEXT, _LEN), (_TIMESTAMP, _VARINT), (_ID, _LEN), (_SOURCE, _LEN)):
    _FAST_TAGS[_field << 3 | _wire] = True
_LEN_BYTES = 4  # lengths up to 2**28 - 1 (256 MiB); a longer one takes the per-record path
_VARINT_BYTES = 9  # int64 timestamps need at most 9 bytes unless negative; those go to upb
_PAD = 16  # zero bytes after the joined values, so no read runs past the buffer


@dataclass(frozen=True)
class SampleScan:
    """Where each value's text and source lie in ``buf``, and which values the scan took."""

    buf: bytes
    ok: Bools  # False: read this value with upb instead
    text: tuple[Ints, Ints]  # [start, stop) in buf; empty when the field is absent
    source: tuple[Ints, Ints]


def _varint(arr: npt.NDArray[np.uint8], at: Ints, most: int) -> tuple[Ints, Ints, Bools]:
    """Value and size of the varints at ``at``, and which did not end within ``most`` bytes.

    Values are right for up to 8 bytes (lengths take 4); beyond that only the size is.
    """
    byte = arr[at]
    going = byte >= 0x80
    value = byte.astype(np.int64)
    size = np.ones(len(at), dtype=np.int64)
    if not going.any():  # the common case: every varint is one byte
        return value, size, going
    value &= 0x7F
    for k in range(1, most):
        byte = arr[at + k]
        if k < 8:
            value |= np.where(going, (byte & 0x7F).astype(np.int64) << (7 * k), 0)
        size += going
        going &= byte >= 0x80
        if not going.any():
            break
    return value, size, going


def scan_samples(values: Sequence[bytes]) -> SampleScan:
    """Split ``values`` (Protobuf ``TrainingSample`` bytes) into fields, a field at a time."""
    n = len(values)
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=n)
    stops = np.cumsum(lengths)
    buf = b"".join(values)
    arr = np.frombuffer(buf + bytes(_PAD), dtype=np.uint8)
    ok = np.ones(n, dtype=bool)
    text = (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    source = (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    strings: list[tuple[Ints, Ints]] = []  # every id and source payload: checked at the end
    pos = stops - lengths
    rows = np.flatnonzero(lengths)
    while rows.size:
        at = pos[rows]
        tag = arr[at]
        good = _FAST_TAGS[tag]
        # A length-delimited field: its length (a varint), then the payload from ``start``.
        start = at + 1
        length, size, long = _varint(arr, start, _LEN_BYTES)
        start += size
        after = start + length
        is_varint = (tag & 7) == _VARINT
        good &= ~long | is_varint
        varints = np.flatnonzero(is_varint)  # the timestamp: skip it
        if varints.size:
            _, size, long = _varint(arr, at[varints] + 1, _VARINT_BYTES)
            after[varints] = at[varints] + 1 + size
            good[varints] &= ~long
        good &= after <= stops[rows]
        ok[rows[~good]] = False
        field = tag >> 3
        for number, into in ((_TEXT, text), (_SOURCE, source)):
            hit = good & (field == number)
            into[0][rows[hit]] = start[hit]
            into[1][rows[hit]] = after[hit]
        hit = good & ((field == _ID) | (field == _SOURCE))
        strings.append((start[hit], after[hit]))
        pos[rows] = after
        rows = rows[good & (after < stops[rows])]
    # upb checks that strings are UTF-8; ASCII is, and anything else is left to upb.
    if strings and not buf.isascii():  # one pass in C settles it for a batch of short ASCII texts
        starts = np.concatenate([a for a, _ in strings])
        ends = np.concatenate([b for _, b in strings])
        ok[np.searchsorted(stops, starts[~_ascii(arr, starts, ends)], side="right")] = False
    return SampleScan(buf=buf, ok=ok, text=text, source=source)


def _ascii(arr: npt.NDArray[np.uint8], starts: Ints, stops: Ints) -> Bools:
    """Per [start, stop) range of ``arr``, whether every byte is ASCII (reads only those bytes)."""
    sizes = stops - starts
    total = int(sizes.sum())
    if total == 0:
        return np.ones(len(starts), dtype=bool)
    owner = np.repeat(np.arange(len(starts)), sizes)
    offsets = np.arange(total) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    high = arr[np.repeat(starts, sizes) + offsets] >= 0x80
    clean: Bools = np.bincount(owner[high], minlength=len(starts)) == 0
    return clean


class ScannedColumns(Columns):
    """Columns whose samples are parsed only when a rule reads labels or metadata."""

    __slots__ = ("_parsed", "_rows", "_scan", "_values")

    def __init__(self, texts: list[str], headers: Sequence[HeaderList], values: Sequence[bytes | None],
                 parsed: dict[int, TrainingSample], scan: SampleScan, rows: Ints) -> None:
        super().__init__(_LazySamples(self), texts, headers)
        self._values = values
        self._parsed = parsed  # index -> sample, for records that took the per-record path
        self._scan = scan
        self._rows = rows  # each index's row in the scan; -1: parsed

    def sample(self, i: int) -> TrainingSample:
        have = self._parsed.get(i)
        if have is None:
            have = self._parsed[i] = TrainingSample.FromString(self._values[i])  # type: ignore[arg-type]  # a kept record has a value
        return have

    @property
    def sources(self) -> list[str]:
        if self._sources is None:
            buf = self._scan.buf
            starts, stops = (a.tolist() for a in self._scan.source)
            parsed = self._parsed
            self._sources = [buf[starts[row]:stops[row]].decode("ascii") if row >= 0 else parsed[i].source
                             for i, row in enumerate(self._rows.tolist())]
        return self._sources

    def source_in(self, allowed: frozenset[str]) -> Bools:
        """Compares the source bytes in place, one allowed value at a time, for every record at once."""
        scan = self._scan
        arr = np.frombuffer(scan.buf, dtype=np.uint8)
        starts, stops = scan.source
        sizes = stops - starts
        hit = np.zeros(len(starts), dtype=bool)
        for value in allowed:
            raw = np.frombuffer(value.encode(), dtype=np.uint8)
            rows = np.flatnonzero(sizes == len(raw))
            if rows.size and raw.size:
                same = (arr[starts[rows, None] + np.arange(raw.size)] == raw).all(axis=1)
                rows = rows[same]
            hit[rows] = True
        rows = self._rows
        out = np.zeros(len(rows), dtype=bool)
        fast = rows >= 0
        out[fast] = hit[rows[fast]]
        for i in np.flatnonzero(~fast).tolist():
            out[i] = self._parsed[i].source in allowed
        return out


class _LazySamples(Sequence[TrainingSample]):
    """``columns.samples[i]``, parsed on first use."""

    def __init__(self, columns: ScannedColumns) -> None:
        self._columns = columns

    def __len__(self) -> int:
        return len(self._columns)

    def __getitem__(self, i: int) -> TrainingSample:  # type: ignore[override]
        return self._columns.sample(i)

    def __iter__(self) -> Iterator[TrainingSample]:
        return map(self._columns.sample, range(len(self._columns)))


_KAFEED = Decoders()


def _decode_checked(record: Record, decoders: Decoders) -> DeadLetter | tuple[TrainingSample, str]:
    """The per-record path: the sample and its text by its topic's format, or why it has none."""
    got = decoders.decode(record.value, record.headers, record.topic, record.partition, record.offset,
                          record.timestamp_ms)
    if isinstance(got, Rejected):
        return DeadLetter(record, got.kind, got.reason)
    return got


def _not_utf8(record: Record, exc: UnicodeDecodeError) -> DeadLetter:
    return DeadLetter(record, "encoding", f"input_data is not UTF-8 ({exc.reason} at byte {exc.start})")


def decode_columns(batch: RecordBatch,
                   decoders: Decoders = _KAFEED) -> tuple[Ints, Columns, list[DeadLetter]]:
    """The readable records of ``batch`` (as indices into it), their texts and fields as
    columns, and dead letters for the rest; each topic's records by its format (``decoders``,
    kafeed's own records by default)."""
    values = batch.values()  # None among them is taken out below
    headers = batch.headers()
    plain: Sequence[int]
    others: set[str] = set()
    if not decoders.only_kafeed:
        topics = batch.topics()
        others = {t for t in set(topics) if not decoders.is_kafeed(t)}
    if others:  # only kafeed's own records are scanned; the rest go through their formats
        plain = [i for i, (t, h, v) in enumerate(zip(topics, headers, values, strict=True))
                 if t not in others and not h and v is not None]
        values = [values[i] for i in plain]
    elif None not in values and not any(headers):
        plain = range(len(values))  # the common case: every record is a Protobuf value
    else:
        plain = [i for i, (h, v) in enumerate(zip(headers, values, strict=True)) if not h and v is not None]
        values = [values[i] for i in plain]
    scan = scan_samples(values)  # type: ignore[arg-type]  # no None left
    if len(plain) == len(batch) and scan.ok.all():  # one list per column, no step per record
        buf = scan.buf
        bounds = zip(scan.text[0].tolist(), scan.text[1].tolist(), strict=True)
        every: list[str] | None
        if buf.isascii():  # every text is ASCII: decode the batch once, then cut it
            whole = buf.decode("ascii")
            every = [whole[a:b] for a, b in bounds]
        else:
            try:
                every = [buf[a:b].decode("utf-8") for a, b in bounds]
            except UnicodeDecodeError:
                every = None  # the loop below finds which
        if every is not None:
            everything = np.arange(len(batch))
            return everything, ScannedColumns(every, headers, values, {}, scan, everything), []
    row_of = dict(zip(plain, range(len(plain)), strict=True))
    ok = scan.ok.tolist()
    t0, t1 = scan.text[0].tolist(), scan.text[1].tolist()
    buf = scan.buf
    kept: list[int] = []
    texts = []
    rows: list[int] = []
    parsed: dict[int, TrainingSample] = {}
    rejected: list[DeadLetter] = []
    parse = TrainingSample.FromString
    for i in range(len(batch)):
        row = row_of.get(i, -1)
        if row >= 0 and ok[row]:
            try:
                texts.append(buf[t0[row]:t1[row]].decode("utf-8"))
            except UnicodeDecodeError as exc:
                rejected.append(_not_utf8(batch[i], exc))
                continue
            kept.append(i)
            rows.append(row)
            continue
        record = batch[i]
        got: tuple[TrainingSample, str] | DeadLetter
        if row >= 0:  # no headers: Protobuf, of a shape the scan leaves to upb
            try:
                sample = parse(record.value)  # type: ignore[arg-type]  # not None: scanned
            except DecodeError:
                got = _decode_checked(record, decoders)
            else:
                try:
                    got = sample, sample.input_data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    got = _not_utf8(record, exc)
        else:
            got = _decode_checked(record, decoders)
        if isinstance(got, DeadLetter):
            rejected.append(got)
            continue
        sample, text = got
        parsed[len(kept)] = sample
        kept.append(i)
        texts.append(text)
        rows.append(-1)
    all_values, all_headers = batch.values(), batch.headers()
    return (np.array(kept, dtype=np.int64),
            ScannedColumns(texts, [all_headers[i] for i in kept], [all_values[i] for i in kept], parsed, scan,
                           np.array(rows, dtype=np.int64)),
            rejected)
