"""Inference as a pure batch function: samples in, one prediction record per sample out.

A prediction is a JSON object (UTF-8), keyed like its input::

    {"id": "doc-7", "input_topic": "raw", "input_partition": 0, "input_offset": 41,
     "label": 1, "scores": [0.12, 0.88], "checkpoint": "ck/step-00000300:3fa2…",
     "timestamp": 1764565200000}

``scores`` are softmax probabilities; ``checkpoint`` names the model that made it.
The input topic's value format (kafeed.formats) reads each record; one that is no sample
(or whose text is not UTF-8) is a dead letter, as in prepare.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafeed.formats import Decoders, Rejected
from kafeed.infer.model import ServedModel
from kafeed.stream import BatchResult, DeadLetter, Output, Record


@dataclass
class PredictionBatch(BatchResult):
    """One batch's predictions, which model made them, and the inputs' timestamps (for latency)."""

    checkpoint: str = ""
    timestamps_ms: list[int] = field(default_factory=list)


def _texts(records: Sequence[Record], out: PredictionBatch,
           decoders: Decoders) -> tuple[list[Record], list[str], list[str]]:
    kept, texts, ids = [], [], []
    for record in records:
        got = decoders.decode(record.value, record.headers, record.topic, record.partition, record.offset,
                              record.timestamp_ms)
        if isinstance(got, Rejected):
            out.dead_letters.append(DeadLetter(record, got.kind, got.reason))
            continue
        sample, text = got
        kept.append(record)
        texts.append(text)
        ids.append(sample.id)
    return kept, texts, ids


def predict_batch(served: ServedModel, records: Sequence[Record], *, output: str,
                  decoders: Decoders | None = None) -> PredictionBatch:
    """Predictions for ``records`` (one forward pass), written to topic ``output``; ``decoders``
    read them (kafeed's own records by default)."""
    import torch

    out = PredictionBatch(checkpoint=served.checkpoint_id)
    kept, texts, ids = _texts(records, out, decoders or Decoders())
    if not kept:
        return out
    input_ids, mask = served.encode(texts)
    with torch.inference_mode():
        logits = served.model(input_ids.to(served.device), mask.to(served.device))
        probs = torch.softmax(logits.float(), dim=-1).cpu()
    labels = probs.argmax(-1).tolist()
    for record, doc_id, label, scores in zip(kept, ids, labels, probs.tolist(), strict=True):
        value = json.dumps({
            "id": doc_id, "input_topic": record.topic, "input_partition": record.partition,
            "input_offset": record.offset, "label": label, "scores": [round(s, 6) for s in scores],
            "checkpoint": served.checkpoint_id, "timestamp": record.timestamp_ms,
        }, separators=(",", ":")).encode()
        out.outputs.append(Output(output, record.key, value,
                                  (("kafeed.checkpoint", served.checkpoint_id.encode()),)))
        out.timestamps_ms.append(record.timestamp_ms)
    return out
