"""Settings of `kafeed train`, validated once, before any connection or training work.

Each field is built from its entry in :data:`~kafeed.train.defaults.TRAIN_OPTIONS` (default,
bounds, help), where the command line's options come from too; only its type is written
here, for the type checker. The learning rate and the topic default by model
(:data:`DEFAULT_LR`, :data:`DEFAULT_TOPIC`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from kafeed.choices import ModelKind
from kafeed.config import directory_problem
from kafeed.formats import FormatSettings
from kafeed.train.defaults import DEFAULT_LR, DEFAULT_TOPIC, TRAIN_OPTIONS

__all__ = ["DEFAULT_LR", "DEFAULT_TOPIC", "TrainOptions"]


def _field(name: str) -> Any:
    """The pydantic field of option ``name``: its default, bounds and help."""
    option = TRAIN_OPTIONS[name]
    return Field(default=option.default, description=option.help, **option.bounds)


class TrainOptions(BaseModel):
    """One training run. Defaults train the small GPT a few hundred steps in minutes on 2 cores.

    ``mix`` also takes the command line's text (``"web=0.6,code=0.4"``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: ModelKind = _field("model")
    topic: str = _field("topic")
    # gpt only: read a mixture of these topics at these token proportions instead of --topic
    mix: dict[str, float] | None = _field("mix")
    steps: int = _field("steps")
    batch_size: int = _field("batch_size")
    seq_len: int = _field("seq_len")
    lr: float = _field("lr")
    warmup: int = _field("warmup")
    weight_decay: float = _field("weight_decay")
    d_model: int = _field("d_model")
    n_layers: int = _field("n_layers")
    n_heads: int = _field("n_heads")
    tokenizer: str = _field("tokenizer")
    num_workers: int = _field("num_workers")
    shuffle_buffer: int = _field("shuffle_buffer")
    seed: int = _field("seed")
    stream: bool = _field("stream")
    checkpoint_dir: Path = _field("checkpoint_dir")
    checkpoint_every: int = _field("checkpoint_every")
    keep: int = _field("keep")
    resume: bool = _field("resume")
    group: str = _field("group")
    run_dir: Path | None = _field("run_dir")
    log_every: int = _field("log_every")
    # classifier only
    num_labels: int = _field("num_labels")
    pretrained: bool = _field("pretrained")
    max_length: int = _field("max_length")
    # evaluation tasks (docs/tasks.md)
    eval_every: int = _field("eval_every")
    eval_records: int = _field("eval_records")
    tasks_prefix: str = _field("tasks_prefix")
    formats: FormatSettings | None = _field("formats")

    @model_validator(mode="before")
    @classmethod
    def _model_defaults(cls, data: Any) -> Any:
        """What an option defaults to for the model trained, unless told otherwise (the
        learning rate and the topic: ``by_model`` in TRAIN_OPTIONS)."""
        if isinstance(data, dict):
            model = data.get("model", "gpt")
            for name, option in TRAIN_OPTIONS.items():
                if option.by_model is not None and model in option.by_model and data.get(name) is None:
                    data = {**data, name: option.by_model[model]}
        return data

    @field_validator("mix", mode="before")
    @classmethod
    def _mix_from_text(cls, value: Any) -> Any:
        # Its own sentences (kafeed.errors.ConfigError) name the part that is wrong.
        if isinstance(value, str):
            from kafeed.loader.nodes.mixing import parse_mix

            return parse_mix(value)
        return value

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
