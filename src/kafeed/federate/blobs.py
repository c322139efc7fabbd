"""Tensors through Kafka: a named set of arrays as one blob, chunked into records and
reassembled exactly.

A global model or an update is usually larger than one Kafka message (``max.message.bytes``,
1 MiB by default). :func:`produce_blob` cuts the encoded blob into :data:`CHUNK_BYTES` records
of one partition, inside the caller's transaction, so a reader sees all of a blob or none of
it; every chunk carries the blob's id, its index, the chunk count, the blob's size and SHA-256.
:class:`BlobAssembler` puts the chunks of one partition back together and hands out a blob
only when its count, size and checksum all match (:class:`~kafeed.errors.SchemaError`
otherwise). Chunks rather than a file the record points to: the sites are other hosts with no
disk they share with the training cluster, and a blob in the log commits with the transaction
that names it (docs/federated.md).

Encoding (:func:`encode_arrays`): an 8-byte little-endian header length, a JSON header (names,
dtypes, shapes, and a ``meta`` object), then each array's bytes in order, C-contiguous.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kafeed.errors import SchemaError

#: The payload of one chunk record: half of Kafka's default max.message.bytes, leaving room for
#: headers and batch framing on any topic left at its defaults.
CHUNK_BYTES = 512 * 1024
BLOB_VERSION = 1
_H_ID, _H_INDEX, _H_COUNT, _H_SIZE, _H_SHA = (
    "kafeed.blob.id", "kafeed.blob.index", "kafeed.blob.count", "kafeed.blob.size", "kafeed.blob.sha256")


class _Producer(Protocol):
    def produce(self, topic: str, value: bytes | None, key: bytes | None = None, *,
                partition: int = -1, headers: list[tuple[str, bytes]] | None = None) -> None: ...


@dataclass(frozen=True)
class Blob:
    """A reassembled blob: its id, bytes, and the offsets of its first and last chunk."""

    blob_id: str
    data: bytes
    first_offset: int
    last_offset: int
    timestamp_ms: int

    def arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return decode_arrays(self.data)

    def meta(self) -> dict[str, Any]:
        return blob_meta(self.data)


def encode_arrays(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any] | None = None) -> bytes:
    """``arrays`` (name → array, any numeric dtype) and ``meta`` (JSON data) as one blob."""
    names = list(arrays)
    header = json.dumps({"version": BLOB_VERSION, "names": names,
                         "dtypes": [np.dtype(arrays[n].dtype).str for n in names],
                         "shapes": [list(arrays[n].shape) for n in names],
                         "meta": dict(meta or {})}, sort_keys=True).encode()
    parts = [struct.pack("<Q", len(header)), header]
    parts.extend(np.ascontiguousarray(arrays[n]).tobytes() for n in names)
    return b"".join(parts)


def decode_arrays(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and meta :func:`encode_arrays` wrote (copies: writable, owned)."""
    try:
        (size,) = struct.unpack_from("<Q", data, 0)
        header = json.loads(data[8:8 + size])
        pos = 8 + size
        out: dict[str, np.ndarray] = {}
        for name, dtype, shape in zip(header["names"], header["dtypes"], header["shapes"], strict=True):
            dt = np.dtype(dtype)
            count = int(np.prod(shape, dtype=np.int64))
            end = pos + count * dt.itemsize
            if end > len(data):
                raise ValueError(f"array {name!r} runs past the blob's end")
            out[name] = np.frombuffer(data, dtype=dt, count=count, offset=pos).reshape(shape).copy()
            pos = end
        if pos != len(data):
            raise ValueError(f"{len(data) - pos} bytes follow the last array")
        return out, dict(header.get("meta", {}))
    except (ValueError, KeyError, TypeError, struct.error, json.JSONDecodeError) as exc:
        raise SchemaError(f"A model blob cannot be decoded: {exc}.",
                          hint="It was not written by kafeed federate, or by another version.") from None


def blob_meta(data: bytes) -> dict[str, Any]:
    """The ``meta`` of an encoded blob, without copying its arrays."""
    try:
        (size,) = struct.unpack_from("<Q", data, 0)
        return dict(json.loads(data[8:8 + size]).get("meta", {}))
    except (ValueError, struct.error, json.JSONDecodeError, AttributeError) as exc:
        raise SchemaError(f"A model blob's header cannot be read: {exc}.") from None


def chunk_count(size: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    return max(1, -(-size // chunk_bytes))


def produce_blob(producer: _Producer, topic: str, blob_id: str, data: bytes, *, partition: int = 0,
                 chunk_bytes: int = CHUNK_BYTES) -> int:
    """Produce ``data`` as chunk records of ``topic`` (inside the caller's open transaction);
    returns the number of chunks."""
    count = chunk_count(len(data), chunk_bytes)
    digest = hashlib.sha256(data).hexdigest().encode()
    key = blob_id.encode()
    view = memoryview(data)
    for index in range(count):
        headers = [(_H_ID, key), (_H_INDEX, str(index).encode()), (_H_COUNT, str(count).encode()),
                   (_H_SIZE, str(len(data)).encode()), (_H_SHA, digest)]
        producer.produce(topic, bytes(view[index * chunk_bytes:(index + 1) * chunk_bytes]), key,
                         partition=partition, headers=headers)
    return count


@dataclass
class _Partial:
    blob_id: str
    count: int
    size: int
    sha256: str
    first_offset: int
    timestamp_ms: int
    parts: list[bytes] = field(default_factory=list)


class BlobAssembler:
    """Chunk records of one partition in, whole checked blobs out (:meth:`add`).

    Chunks of one blob are consecutive in their partition (one transaction, one producer); a
    chunk that does not continue the blob being assembled starts over (index 0) or is skipped
    (counted in ``skipped``): a reader that started mid-blob never sees half a model.
    """

    def __init__(self, *, what: str) -> None:
        self.what = what
        self.skipped = 0
        self._partial: _Partial | None = None

    def add(self, message: Any) -> Blob | None:
        """Take one consumed chunk record; the blob it completes, if any."""
        headers = dict(message.headers() or ())
        try:
            blob_id = headers[_H_ID].decode()
            index, count = int(headers[_H_INDEX]), int(headers[_H_COUNT])
            size, sha = int(headers[_H_SIZE]), headers[_H_SHA].decode()
        except (KeyError, ValueError, AttributeError):
            self.skipped += 1
            return None
        if index == 0:
            self._partial = _Partial(blob_id, count, size, sha, message.offset(),
                                     int(message.timestamp()[1]))
        partial = self._partial
        if partial is None or partial.blob_id != blob_id or len(partial.parts) != index:
            self._partial = None
            self.skipped += 1
            return None
        partial.parts.append(bytes(message.value() or b""))
        if len(partial.parts) < partial.count:
            return None
        self._partial = None
        data = b"".join(partial.parts)
        where = f"{self.what} at {message.topic()}[{message.partition()}]@{partial.first_offset}"
        if len(data) != partial.size:
            raise SchemaError(f"Blob {blob_id!r} of {where} has {len(data)} bytes, its chunks say "
                              f"{partial.size}.", hint="The topic holds records kafeed did not write.")
        if hashlib.sha256(data).hexdigest() != partial.sha256:
            raise SchemaError(f"Blob {blob_id!r} of {where} does not match its SHA-256.",
                              hint="The topic holds records kafeed did not write.")
        return Blob(blob_id, data, partial.first_offset, message.offset(), partial.timestamp_ms)


def blobs_of(messages: Iterable[Any], *, what: str) -> list[Blob]:
    """Every whole blob in ``messages`` (records of one partition, in offset order)."""
    assembler = BlobAssembler(what=what)
    return [blob for msg in messages if (blob := assembler.add(msg)) is not None]
