"""Test corpora for the trainers, produced straight into a topic."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer

from kafeed.config import ConnectionSettings
from kafeed.prepare.settings import TokenizerSettings
from kafeed.prepare.tokenize import load_tokenizer
from kafeed.schema import make_document, make_sample


def paragraphs(path: Path, limit: int | None = None) -> list[str]:
    paras = [p.strip() for p in path.read_text().split("\n\n") if p.strip()]
    return paras[:limit] if limit else paras


def produce_documents(kafka: ConnectionSettings, topic: str, texts: list[str], *,
                      partitions: int, first_partition: int = 0) -> str:
    """Byte-tokenized TokenizedDocuments (as prepare writes them), round-robin over ``partitions``
    partitions from ``first_partition``; returns the tokenizer fingerprint."""
    tok = load_tokenizer(TokenizerSettings(name="bytes"))
    batch = tok.encode_batch(texts)
    producer = Producer({**kafka.client_config(), "linger.ms": 20})
    for i in range(len(texts)):
        ids = batch.ids[batch.offsets[i]: batch.offsets[i + 1]]
        doc = make_document(ids, id=f"doc-{i}", vocab_size=tok.vocab_size, tokenizer=tok.fingerprint)
        producer.produce(topic, key=doc.id.encode(), value=doc.SerializeToString(),
                         partition=first_partition + i % partitions)
    assert producer.flush(30) == 0
    return tok.fingerprint


def produce_labelled(kafka: ConnectionSettings, topic: str, texts: list[str], labels: list[int], *,
                     partitions: int) -> None:
    producer = Producer({**kafka.client_config(), "linger.ms": 20})
    for i, (text, label) in enumerate(zip(texts, labels, strict=True)):
        sample = make_sample(text, id=f"s-{i}", targets=[float(label)])
        producer.produce(topic, key=sample.id.encode(), value=sample.SerializeToString(),
                         partition=i % partitions)
    assert producer.flush(30) == 0


def tiny_classifier(kafka: ConnectionSettings, topic: str, texts: list[str], checkpoint_dir: Path) -> Path:
    """A classifier trained for two steps on ``texts`` (labels alternating 0, 1), written to
    ``checkpoint_dir``: a real checkpoint for the serving tests, not a good model."""
    from kafeed.train.classifier import train_classifier
    from kafeed.train.options import TrainOptions

    produce_labelled(kafka, topic, texts, [i % 2 for i in range(len(texts))], partitions=2)
    train_classifier(TrainOptions(model="classifier", topic=topic, steps=2, batch_size=8, max_length=24,
                                  pretrained=False, checkpoint_dir=checkpoint_dir, checkpoint_every=0,
                                  log_every=2),
                     kafka, progress=lambda _l: None)
    return checkpoint_dir
