"""Compressed sources: gzip, zstd, bzip2 and xz, streamed and told apart by their magic bytes.

The suffix (``docs.jsonl.gz``) says what a file is meant to be; the first bytes say
what it is, and they win, so a gzip file named ``docs.jsonl`` is still read. A
file whose suffix names a codec but whose bytes are not that codec's is refused
rather than parsed as text.

A decompressed stream is never seekable: a resume position is an offset in the
*decompressed* bytes, reached by reading and discarding (exact, at the cost of
decompressing the skipped part again). :attr:`DecompressedStream.compressed_read`
counts the compressed bytes consumed, for progress against the file size.
A corrupt or truncated stream raises one :class:`IngestError` naming the file and
both offsets.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from typing import IO, Any, Literal

from kafeed.errors import IngestError

Codec = Literal["gzip", "zstd", "bzip2", "xz"]

SUFFIXES: dict[str, Codec] = {".gz": "gzip", ".zst": "zstd", ".bz2": "bzip2", ".xz": "xz"}
MAGIC: dict[Codec, bytes] = {
    "gzip": b"\x1f\x8b",
    "zstd": b"\x28\xb5\x2f\xfd",
    "bzip2": b"BZh",
    "xz": b"\xfd7zXZ\x00",
}
_MAGIC_LEN = max(len(m) for m in MAGIC.values())
_BUFFER = 1 << 20


def codec_of_suffix(name: str) -> Codec | None:
    """The codec a file name claims by its last suffix (``.gz`` → gzip), or None."""
    dot = name.rfind(".")
    return SUFFIXES.get(name[dot:].lower()) if dot >= 0 else None


def codec_of_magic(head: bytes) -> Codec | None:
    """The codec whose magic bytes start ``head``, or None for anything else."""
    for codec, magic in MAGIC.items():
        if head.startswith(magic):
            return codec
    return None


def _decompressor(codec: Codec, raw: IO[bytes]) -> Any:
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if codec == "bzip2":
        return bz2.BZ2File(raw, mode="rb")
    if codec == "xz":
        return lzma.LZMAFile(raw, mode="rb")
    return _ZstdReader(raw)


class _ZstdReader:
    """zstd frames one after another, as ``read(n)``; a frame cut short is a ``ZstdError``.

    (zstandard's own ``stream_reader`` ends quietly at a truncated frame.)
    """

    def __init__(self, raw: IO[bytes]) -> None:
        import zstandard

        self._zstd = zstandard
        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._in_frame = False
        self._buf = bytearray()
        self._done = False

    def _feed(self, data: bytes) -> None:
        while data:
            self._in_frame = True
            self._buf += self._obj.decompress(data)
            if not self._obj.eof:
                return
            data = self._obj.unused_data
            self._obj = self._dctx.decompressobj()
            self._in_frame = False

    def read(self, n: int) -> bytes:
        while len(self._buf) < n and not self._done:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                self._done = True
                if self._in_frame:
                    raise self._zstd.ZstdError("the input ends inside a zstd frame")
                break
            self._feed(chunk)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def close(self) -> None:
        self._buf.clear()


def _stream_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError, EOFError, zlib.error, lzma.LZMAError]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:  # pragma: no cover - a core dependency
        pass
    return tuple(errors)


class DecompressedStream(io.RawIOBase):
    """A read-only, forward-only raw stream of ``raw``'s decompressed bytes.

    Wrap it in :class:`io.BufferedReader` for lines. Decoder errors (bad data,
    a stream cut short) become :class:`IngestError`; the file is named by ``name``.
    """

    def __init__(self, raw: IO[bytes], codec: Codec, name: str) -> None:
        super().__init__()
        self._raw = raw
        self._inner = _decompressor(codec, raw)
        self._errors = _stream_errors()
        self.codec = codec
        self.name = name
        self.position = 0  # decompressed bytes delivered

    @property
    def compressed_read(self) -> int:
        """Compressed bytes consumed from the file so far (read-ahead included)."""
        return self._raw.tell()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        try:
            data = self._inner.read(len(view))
        except self._errors as exc:
            raise IngestError(
                f"{self.name} is corrupt or truncated: its {self.codec} stream breaks after "
                f"{self.position:,} decompressed bytes (near compressed byte {self.compressed_read:,}): "
                f"{exc}.",
                hint="The records before that point are committed; replace the file and re-run "
                     "with --restart, or remove it from the sources.") from exc
        n = len(data)
        view[:n] = data
        self.position += n
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
            finally:
                super().close()


def open_stream(raw: IO[bytes], name: str) -> tuple[IO[bytes], DecompressedStream | None]:
    """``raw`` as a buffered byte stream, decompressed when its first bytes say so.

    ``raw`` must support ``peek`` (a buffered file or stdin) or ``seek``. Returns the
    stream to read and the decompressor (None for plain bytes) for progress counts.
    """
    peek = getattr(raw, "peek", None)
    if peek is not None:
        head = bytes(peek(_MAGIC_LEN)[:_MAGIC_LEN])
    else:
        head = raw.read(_MAGIC_LEN)
        raw.seek(0)
    codec = codec_of_magic(head)
    claimed = codec_of_suffix(name)
    if codec is None:
        if claimed is not None and head:
            raise IngestError(
                f"{name} is named like a {claimed} file but does not start with {claimed}'s magic bytes "
                "(corrupt at byte 0).", hint="Check the file, or rename it to what it holds.")
        return raw, None
    stream = DecompressedStream(raw, codec, name)
    return io.BufferedReader(stream, _BUFFER), stream
