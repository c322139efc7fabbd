"""A seconds-long run of the benchmarks in benchmarks/ that need no broker (the others run in
tests/integration/test_bench_smoke.py), so that a change to what one calls fails here."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def bench(name: str) -> ModuleType:
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


@pytest.mark.parametrize("kind", ["kafka", "files"])
def test_reader_reads_every_record_of_either_source(kind: str, tmp_path: Path) -> None:
    reader = bench("bench_reader")
    got = reader.child(kind, {"records": 40, "doc_tokens": 256, "reads": 1, "dir": str(tmp_path)})
    assert got["ns_record"] > 0 and got["ns_token"] > 0, got
    assert got["ns_record"] > 100 * got["ns_token"], got  # a record holds 256 tokens


def test_mirror_latency_probes_survive_prepare_and_are_found_again() -> None:
    latency = bench("bench_mirror_latency")
    from kafeed.prepare import TokenizerSettings, load_tokenizer, normalize_text
    from kafeed.schema import TrainingSample, make_document

    tok = load_tokenizer(TokenizerSettings(name="bytes"))
    for seq in (0, 7, 123_456_789):
        text = latency.text_of(seq, 512)
        assert len(text.encode()) == 512 and normalize_text(text) == text
        sample = TrainingSample(input_data=text.encode(), id=f"p{seq}").SerializeToString()
        assert latency.seq_of_sample(sample) == seq
        ids = tok.encode_batch([text]).ids
        doc = make_document(ids, id=f"p{seq}", vocab_size=tok.vocab_size, tokenizer=tok.fingerprint)
        assert latency.seq_of_document(doc.SerializeToString()) == seq
    assert latency.seq_of_sample(TrainingSample(input_data=b"no probe", id="x").SerializeToString()) is None
