"""Settings of `kafeed train`, validated once, before any connection or training work.

Each option has one default, declared here; the CLI takes its defaults from this model.
The learning rate and the topic default by model (:data:`DEFAULT_LR`, :data:`DEFAULT_TOPIC`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from kafeed.choices import ModelKind
from kafeed.config import directory_problem
from kafeed.formats import FormatSettings
from kafeed.train.defaults import DEFAULT_LR, DEFAULT_TOPIC, TRAIN_DEFAULTS

_D = TRAIN_DEFAULTS

MAX_SEQ_LEN = 32_768  # positions the GPT learns an embedding for; attention is quadratic in it
MAX_ENCODER_LENGTH = 512  # MiniLM's (and the random encoder's) position embeddings


class TrainOptions(BaseModel):
    """One training run. Defaults train the small GPT a few hundred steps in minutes on 2 cores."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: ModelKind = _D["model"]
    topic: str = Field(default=_D["topic"], min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    # gpt only: read a mixture of these topics at these token proportions instead of --topic
    mix: dict[str, float] | None = _D["mix"]
    steps: int = Field(default=_D["steps"], ge=1)
    batch_size: int = Field(default=_D["batch_size"], ge=1, le=65_536)
    seq_len: int = Field(default=_D["seq_len"], ge=2, le=MAX_SEQ_LEN)
    lr: float = Field(default=_D["lr"], gt=0, le=1)
    warmup: int = Field(default=_D["warmup"], ge=0)
    weight_decay: float = Field(default=_D["weight_decay"], ge=0, le=1)
    d_model: int = Field(default=_D["d_model"], ge=8, le=16_384)
    n_layers: int = Field(default=_D["n_layers"], ge=1, le=256)
    n_heads: int = Field(default=_D["n_heads"], ge=1, le=1024)
    tokenizer: str = Field(default=_D["tokenizer"], min_length=1)
    num_workers: int = Field(default=_D["num_workers"], ge=0, le=256)
    shuffle_buffer: int = Field(default=_D["shuffle_buffer"], ge=0)
    seed: int = Field(default=_D["seed"], ge=0, le=2**32 - 1)  # numpy's seeds are 32-bit
    stream: bool = _D["stream"]
    checkpoint_dir: Path = _D["checkpoint_dir"]
    checkpoint_every: int = Field(default=_D["checkpoint_every"], ge=0)
    keep: int = Field(default=_D["keep"], ge=1)
    resume: bool = _D["resume"]
    group: str = Field(default=_D["group"], min_length=1)
    run_dir: Path | None = _D["run_dir"]
    log_every: int = Field(default=_D["log_every"], ge=1)
    # classifier only
    num_labels: int = Field(default=_D["num_labels"], ge=2)
    pretrained: bool = _D["pretrained"]
    max_length: int = Field(default=_D["max_length"], ge=8, le=MAX_ENCODER_LENGTH)
    # evaluation tasks (docs/tasks.md)
    eval_every: int = Field(default=_D["eval_every"], ge=0)
    eval_records: int = Field(default=_D["eval_records"], ge=1, le=1_000_000)
    tasks_prefix: str = Field(default=_D["tasks_prefix"], pattern=r"^[A-Za-z0-9._-]{1,100}$")
    # classifier: the topic's value format (docs/formats.md; None: kafeed's TrainingSample records)
    formats: FormatSettings | None = _D["formats"]

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

    @model_validator(mode="after")
    def _mix_is_for_gpt(self) -> TrainOptions:
        if self.mix is not None and self.model != "gpt":
            raise ValueError("mix: --mix reads token topics, which only --model gpt trains on")
        return self

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics this run reads: the mixture's, else ``topic``."""
        return tuple(self.mix) if self.mix else (self.topic,)

    @property
    def source(self) -> str:
        """What the run reads, for progress lines: ``topic T`` or ``mixture a=0.6,b=0.4``."""
        if self.mix:
            return "mixture " + ",".join(f"{name}={weight:g}" for name, weight in self.mix.items())
        return f"topic {self.topic}"

    @field_validator("checkpoint_dir", "run_dir")
    @classmethod
    def _a_directory(cls, value: Path | None) -> Path | None:
        # A file here would fail the first checkpoint or metrics write, after training began.
        problem = None if value is None else directory_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("n_heads")
    @classmethod
    def _heads_divide_width(cls, n_heads: int, info: ValidationInfo) -> int:
        d_model = info.data.get("d_model")
        if info.data.get("model") == "gpt" and d_model is not None and d_model % n_heads:
            raise ValueError(f"should divide d_model ({d_model}): each head gets d_model / n_heads")
        return n_heads
