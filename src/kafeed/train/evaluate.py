"""The built-in ``evaluate`` task: score one checkpoint on records it did not train on.

``kafeed train --eval-every N`` submits one per checkpoint (:mod:`kafeed.train.eval_tasks`);
``kafeed tasks worker --kind evaluate`` runs :func:`evaluate`. It loads the checkpoint
(checked against its manifest), rebuilds the model from the config saved in it, reads the
held-out slice its lineage defines (:mod:`kafeed.train.heldout`) from the worker's
cluster, and returns held-out loss and perplexity (gpt) or accuracy (classifier). With
``run_dir`` in the params it also appends the result as one line to
``RUN_DIR/evaluations.jsonl``, which ``kafeed report`` draws; a second run of the same
task appends a second line for the same step, and the report keeps the last.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kafeed.errors import KafeedError, invalid_settings
from kafeed.loader.state.rank_states import loadable_state
from kafeed.schema.codec import decode_document, decode_sample, unpack_tokens
from kafeed.tasks.handlers import TaskContext
from kafeed.telemetry.recorder import EVALUATIONS_FILE
from kafeed.train.heldout import positions_after, read_slice, run_starts


class EvalParams(BaseModel):
    """An ``evaluate`` task's params."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint: str = Field(min_length=1)  # the step-*.pt file
    run: str = ""
    run_dir: str | None = None
    records: int = Field(default=256, ge=1, le=1_000_000)  # held-out records read at most
    max_windows: int = Field(default=64, ge=1, le=100_000)  # gpt: windows scored at most


def evaluate(params: dict[str, Any], context: TaskContext) -> dict[str, Any]:
    """The ``evaluate`` handler: one checkpoint's held-out figures (also in ``evaluations.jsonl``)."""
    from kafeed.train.checkpoint import load_checkpoint

    try:
        spec = EvalParams.model_validate(params)
    except ValidationError as exc:
        raise invalid_settings(exc, what="evaluate params") from None
    t0 = time.monotonic()
    ckpt = load_checkpoint(Path(spec.checkpoint))
    config = ckpt.payload["config"]
    if config.get("model") == "gpt":
        figures = _gpt(ckpt.payload, ckpt.manifest, context, spec)
    else:
        figures = _classifier(ckpt.payload, ckpt.manifest, context, spec)
    result = {"run": spec.run, "step": ckpt.step, "checkpoint": str(ckpt.path), "model": config.get("model"),
              "train_loss": ckpt.manifest.get("loss"), **figures,
              "seconds": round(time.monotonic() - t0, 3), "worker": context.worker}
    if spec.run_dir is not None:
        append_evaluation(Path(spec.run_dir), result)
    return result


def _gpt(payload: dict[str, Any], manifest: dict[str, Any], context: TaskContext,
         spec: EvalParams) -> dict[str, Any]:
    import torch

    from kafeed.train.models import GPTConfig, TinyGPT, next_token_loss

    cfg = GPTConfig(**payload["config"]["gpt"])
    fingerprint = loadable_state(manifest["loader"])["fingerprint"]
    eos, tokenizer = int(fingerprint["eos_id"]), fingerprint.get("tokenizer")
    starts, partly = positions_after(manifest)

    def accept(msg: Any) -> Any:
        key = f"{msg.topic()}:{msg.partition()}"
        if (key, msg.offset()) in partly:
            return None
        try:
            doc = decode_document(msg.value(), topic=msg.topic(), partition=msg.partition(),
                                  offset=msg.offset())
        except KafeedError:
            return None
        if tokenizer and doc.tokenizer != tokenizer:
            return None
        return unpack_tokens(doc.tokens, doc.dtype)

    docs, spans = read_slice(context.connection, starts, records=spec.records, accept=accept)
    width = cfg.seq_len + 1
    stream = np.concatenate([np.append(d.astype(np.int64), eos) for d in docs]) if docs else np.zeros(0)
    n = min(spec.max_windows, stream.size // width)
    if n == 0:
        raise KafeedError(f"No held-out data for step {manifest['step']}: {len(docs)} record(s) after "
                          f"the checkpoint's positions hold fewer than {width} tokens.",
                          hint="Produce more records to the topic; the retry reads them.")
    model = TinyGPT(cfg)
    model.load_state_dict(payload["model"])
    model.eval()
    windows = torch.from_numpy(stream[: n * width].reshape(n, width))
    total = 0.0
    with torch.no_grad():
        for i in range(0, n, 16):
            chunk = windows[i: i + 16]
            total += float(next_token_loss(model, chunk)) * chunk.shape[0]
    loss = total / n
    return {"loss": round(loss, 5), "perplexity": round(math.exp(min(loss, 50.0)), 4),
            "held_out_records": len(docs), "windows": n, "tokens": n * cfg.seq_len, "slice": spans}


def _classifier(payload: dict[str, Any], manifest: dict[str, Any], context: TaskContext,
                spec: EvalParams) -> dict[str, Any]:
    from kafeed.train.classifier import TextEncoder, held_out
    from kafeed.train.classifier import evaluate as accuracy_of
    from kafeed.train.models import build_classifier

    config = payload["config"]
    labels_n = int(config["num_labels"])

    def accept(msg: Any) -> tuple[str, int] | None:
        try:
            sample = decode_sample(msg.value(), topic=msg.topic(), partition=msg.partition(),
                                   offset=msg.offset())
        except KafeedError:
            return None
        if not sample.target_values or not held_out(sample.id):
            return None
        label = sample.target_values[0]
        if label != label or not 0 <= label < labels_n:
            return None
        return sample.input_data.decode("utf-8", errors="replace"), int(label)

    found, spans = read_slice(context.connection, run_starts(manifest), records=spec.records,
                              accept=accept, max_scan=spec.records * 40)
    if not found:
        raise KafeedError(f"No held-out records for step {manifest['step']}: none of the records "
                          "read is in the held-out tenth with a usable label.",
                          hint="Produce more labelled records to the topic; the retry reads them.")
    encode = TextEncoder(int(config["max_length"]), pretrained=bool(config["pretrained"]))
    model, _desc = build_classifier(labels_n, pretrained=bool(config["pretrained"]),
                                    vocab_size=encode.vocab_size)
    model.load_state_dict(payload["model"])
    accuracy, majority = accuracy_of(model, encode, [t for t, _ in found], [y for _, y in found])
    return {"accuracy": accuracy, "majority_rate": majority, "held_out_records": len(found),
            "slice": spans}


def append_evaluation(run_dir: Path, result: dict[str, Any]) -> None:
    """One line in ``RUN_DIR/evaluations.jsonl``, in one append write (workers share the file)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(result, separators=(",", ":")) + "\n").encode()
    fd = os.open(run_dir / EVALUATIONS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
