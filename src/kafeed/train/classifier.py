"""`kafeed train --model classifier`: fine-tune a BERT-style encoder on labelled samples.

Input is ``TrainingSample`` records: the text in ``input_data``, the class index in
``target_values[0]``. One record in ten (by a hash of its document id, so the split is
stable across runs and resumes) is held out for evaluation and never trained on;
accuracy on it is reported next to the majority-class rate.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from kafeed.config import ConnectionSettings
from kafeed.train.distributed import distributed_context
from kafeed.train.models import build_classifier, minilm_dir, parameter_count
from kafeed.train.optim import AdamW
from kafeed.train.options import TrainOptions
from kafeed.train.rng import seed_everything
from kafeed.train.runner import RunResult
from kafeed.train.startup import Startup, start
from kafeed.train.wiring import run_on_loader

log = logging.getLogger("kafeed")

EVAL_EVERY_NTH = 10
_MAX_HELD_OUT = 5000


def held_out(doc_id: str) -> bool:
    """True for the stable tenth of documents kept for evaluation."""
    return hashlib.blake2b(doc_id.encode(), digest_size=4).digest()[0] % EVAL_EVERY_NTH == 0


class TextEncoder:
    """Batch tokenization for the classifier: MiniLM's WordPiece, or bytes when it is absent."""

    def __init__(self, max_length: int, *, pretrained: bool) -> None:
        self.max_length = max_length
        self._tok: Any = None
        model_dir = minilm_dir() if pretrained else None
        if model_dir is not None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            tok.enable_truncation(max_length)
            tok.enable_padding(pad_id=0, pad_token="[PAD]")
            self._tok = tok
            self.vocab_size = tok.get_vocab_size()
        else:
            self.vocab_size = 258  # bytes, 256 = [CLS], 257 unused; 0 doubles as padding

    def __call__(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        if self._tok is not None:
            enc = self._tok.encode_batch(texts)
            ids = torch.tensor([e.ids for e in enc], dtype=torch.long)
            mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.long)
            return ids, mask
        rows = [[256, *t.encode()[: self.max_length - 1]] for t in texts]
        width = max(len(r) for r in rows)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        return ids, mask


def train_classifier(options: TrainOptions, connection: ConnectionSettings, *,
                     progress: Callable[[str], None] = print,
                     startup: Startup | None = None) -> tuple[RunResult, dict[str, Any]]:
    """Fine-tune the classifier on ``options.topic``; ``startup`` as for train_gpt."""
    from kafeed.loader import KafkaSampleDataset, StreamLoader

    startup = startup or start(options, connection)
    rank, world = distributed_context()
    seed_everything(options.seed)
    dataset = KafkaSampleDataset(settings=startup.settings, rank=rank if world > 1 else None,
                                 world_size=world if world > 1 else None)
    startup.adopt_into(dataset)
    loader = StreamLoader(dataset, batch_size=options.batch_size, num_workers=options.num_workers)
    encode = TextEncoder(options.max_length, pretrained=options.pretrained)
    core, encoder_desc = build_classifier(options.num_labels, pretrained=options.pretrained,
                                          vocab_size=encode.vocab_size)
    model: torch.nn.Module = core
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = AdamW(model.parameters(), lr=options.lr, weight_decay=options.weight_decay,
                      warmup=options.warmup, total=options.steps)
    eval_texts: list[str] = []
    eval_labels: list[int] = []
    bad_labels = 0
    last_loss = float("nan")

    def step_fn(batch: dict[str, Any]) -> tuple[float, int]:
        nonlocal bad_labels, last_loss
        texts, labels = [], []
        for text, doc_id, target in zip(batch["text"], batch["id"], batch["targets"][:, 0].tolist(),
                                        strict=True):
            if target != target or not 0 <= target < options.num_labels:  # NaN or out of range
                bad_labels += 1
                continue
            if held_out(doc_id):
                if len(eval_texts) < _MAX_HELD_OUT:
                    eval_texts.append(text)
                    eval_labels.append(int(target))
                continue
            texts.append(text)
            labels.append(int(target))
        if not texts:
            return last_loss, 0
        ids, mask = encode(texts)
        model.train()
        logits = model(ids, mask)
        loss = F.cross_entropy(logits, torch.tensor(labels))
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        last_loss = float(loss.detach())
        return last_loss, int(mask.sum())

    result, wiring = run_on_loader(
        model=core, optimizer=optimizer, loader=loader, step_fn=step_fn,
        connection=connection, options=options, rank=rank, world=world, progress=progress,
        config={"model": "classifier", "encoder": encoder_desc["encoder"]},
    )
    accuracy, majority = evaluate(core, encode, eval_texts, eval_labels)
    describe = {"parameters": parameter_count(core), **encoder_desc, "held_out": len(eval_labels),
                "accuracy": accuracy, "majority_rate": majority, "bad_labels": bad_labels,
                "loader_stats": wiring.stats()}
    return result, describe


@torch.no_grad()
def evaluate(model: torch.nn.Module, encode: TextEncoder, texts: list[str],
             labels: list[int]) -> tuple[float | None, float | None]:
    """Accuracy on the held-out records and the majority-class rate (the bar to beat)."""
    if not labels:
        return None, None
    model.eval()
    correct = 0
    for i in range(0, len(texts), 64):
        ids, mask = encode(texts[i: i + 64])
        pred = model(ids, mask).argmax(-1)
        correct += int((pred == torch.tensor(labels[i: i + 64])).sum())
    majority = max(labels.count(c) for c in set(labels)) / len(labels)
    return round(correct / len(labels), 4), round(majority, 4)
