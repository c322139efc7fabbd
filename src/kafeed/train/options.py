"""Settings of `kafeed train`, validated once, before any connection or training work.

Each option has one default, declared here; the CLI takes its defaults from this model.
The learning rate and the topic default by model (:data:`DEFAULT_LR`, :data:`DEFAULT_TOPIC`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

ModelKind = Literal["gpt", "classifier"]

DEFAULT_LR: dict[str, float] = {"gpt": 3e-3, "classifier": 5e-5}
DEFAULT_TOPIC: dict[str, str] = {"gpt": "tokens", "classifier": "raw"}
MAX_SEQ_LEN = 32_768  # positions the GPT learns an embedding for; attention is quadratic in it
MAX_ENCODER_LENGTH = 512  # MiniLM's (and the random encoder's) position embeddings


class TrainOptions(BaseModel):
    """One training run. Defaults train the small GPT a few hundred steps in minutes on 2 cores."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: ModelKind = "gpt"
    topic: str = Field(default="tokens", min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    steps: int = Field(default=300, ge=1)
    batch_size: int = Field(default=8, ge=1, le=65_536)
    seq_len: int = Field(default=128, ge=2, le=MAX_SEQ_LEN)
    lr: float = Field(default=DEFAULT_LR["gpt"], gt=0, le=1)
    warmup: int = Field(default=20, ge=0)
    weight_decay: float = Field(default=0.01, ge=0, le=1)
    d_model: int = Field(default=128, ge=8, le=16_384)
    n_layers: int = Field(default=2, ge=1, le=256)
    n_heads: int = Field(default=4, ge=1, le=1024)
    tokenizer: str = Field(default="bytes", min_length=1)
    num_workers: int = Field(default=0, ge=0, le=256)
    shuffle_buffer: int = Field(default=256, ge=0)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)  # numpy's seeds are 32-bit
    stream: bool = False
    checkpoint_dir: Path = Path("checkpoints")
    checkpoint_every: int = Field(default=50, ge=0)
    keep: int = Field(default=3, ge=1)
    resume: bool = False
    group: str = Field(default="kafeed-train", min_length=1)
    run_dir: Path | None = None
    log_every: int = Field(default=10, ge=1)
    # classifier only
    num_labels: int = Field(default=2, ge=2)
    pretrained: bool = True
    max_length: int = Field(default=128, ge=8, le=MAX_ENCODER_LENGTH)

    @model_validator(mode="before")
    @classmethod
    def _model_defaults(cls, data: Any) -> Any:
        """The learning rate and topic a model trains with unless told otherwise."""
        if isinstance(data, dict):
            model = data.get("model", "gpt")
            if model in DEFAULT_LR:
                if data.get("lr") is None:
                    data = {**data, "lr": DEFAULT_LR[model]}
                if data.get("topic") is None:
                    data = {**data, "topic": DEFAULT_TOPIC[model]}
        return data

    @field_validator("n_heads")
    @classmethod
    def _heads_divide_width(cls, n_heads: int, info: ValidationInfo) -> int:
        d_model = info.data.get("d_model")
        if info.data.get("model") == "gpt" and d_model is not None and d_model % n_heads:
            raise ValueError(f"should divide d_model ({d_model}): each head gets d_model / n_heads")
        return n_heads
