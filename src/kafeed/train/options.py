"""Settings of `kafeed train`, validated once."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from kafeed.choices import ModelKind


class TrainOptions(BaseModel):
    """One training run. Defaults train the small GPT a few hundred steps in minutes on 2 cores."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelKind = "gpt"
    topic: str = "tokens"
    steps: int = Field(default=300, ge=1)
    batch_size: int = Field(default=8, ge=1)
    seq_len: int = Field(default=128, ge=2)
    lr: float = Field(default=3e-3, gt=0)
    warmup: int = Field(default=20, ge=0)
    weight_decay: float = Field(default=0.01, ge=0)
    d_model: int = Field(default=128, ge=8)
    n_layers: int = Field(default=2, ge=1)
    n_heads: int = Field(default=4, ge=1)
    tokenizer: str = "bytes"
    num_workers: int = Field(default=0, ge=0)
    shuffle_buffer: int = Field(default=256, ge=0)
    seed: int = 0
    stream: bool = False
    checkpoint_dir: Path = Path("checkpoints")
    checkpoint_every: int = Field(default=50, ge=0)
    keep: int = Field(default=3, ge=1)
    resume: bool = False
    group: str = "kafeed-train"
    run_dir: Path | None = None
    log_every: int = Field(default=10, ge=1)
    # classifier only
    num_labels: int = Field(default=2, ge=2)
    pretrained: bool = True
    max_length: int = Field(default=128, ge=8)
    eval_every: int = Field(default=10, ge=2)
