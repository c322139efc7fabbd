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


def test_federated_rounds_with_secure_aggregation_learn_and_match_plain_fedavg() -> None:
    federated = bench("bench_federated")
    setup = federated.Setup(rounds=3, local_steps=5, train_samples=600, test_samples=300)
    untrained = federated.score(federated.make_model(setup), federated.make_data(setup)[1])
    got = federated.compare(setup, None)
    kafeed = got["kafeed"]
    assert got["flower"] is None and len(kafeed["round_seconds"]) == 3
    assert sum(kafeed["site_samples"]) == 600 and len(set(kafeed["site_samples"])) == 3  # non-IID shares
    assert kafeed["max_secagg_vs_fedavg"] < 2.0**-20, kafeed  # only the fixed point's rounding
    assert kafeed["loss"] < untrained["loss"], (kafeed, untrained)


@pytest.mark.slow
def test_federated_beside_flower_ends_at_the_same_loss() -> None:
    federated = bench("bench_federated")
    python = federated.flower_python()
    if python is None:
        pytest.skip("Flower lives in its own environment (flwr 1.42 pins protobuf below 7, kafeed needs 7): "
                    "make flower-venv")
    got = federated.compare(federated.Setup(rounds=3, local_steps=5), python)
    assert len(got["flower"]["round_seconds"]) == 3
    assert got["loss_gap"] < 0.02 and got["accuracy_gap"] < 0.02, got
