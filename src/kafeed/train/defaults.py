"""The options of a training run, each declared once, as plain data: default, bounds, help.

:class:`~kafeed.train.options.TrainOptions` builds each of its fields from its entry here
(default, pydantic constraints, description), and ``kafeed train`` builds each of its
command-line options from the same entry (type, default, help), without importing pydantic
or torch, so ``kafeed train --help`` stays light. An option with ``by_model`` defaults by
the model kind (the learning rate, the topic); ``cli=False`` keeps one out of the command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafeed.choices import ModelKind

DEFAULT_LR: dict[str, float] = {"gpt": 3e-3, "classifier": 5e-5}
DEFAULT_TOPIC: dict[str, str] = {"gpt": "tokens", "classifier": "raw"}


@dataclass(frozen=True)
class TrainOption:
    """One option: its default, help, and what both sides build from them.

    ``cli_type`` is what a user types on the command line (``mix`` is text there, a mapping
    in the library); ``bounds`` are pydantic's constraints (``ge``, ``le``, ``pattern`` ...);
    ``by_model`` gives the default per model kind, the command line's default then being
    None ("the model's").
    """

    default: Any
    help: str
    cli_type: Any = None
    bounds: Mapping[str, Any] = field(default_factory=dict)
    by_model: Mapping[str, Any] | None = None
    cli: bool = True
    show_default: bool = True


def _opt(default: Any, help: str, cli_type: Any, **kwargs: Any) -> TrainOption:
    bounds: dict[str, Any] = {k: kwargs.pop(k) for k in ("ge", "gt", "le", "min_length", "max_length",
                                                           "pattern") if k in kwargs}
    return TrainOption(default, help, cli_type, bounds=bounds, **kwargs)


TRAIN_OPTIONS: dict[str, TrainOption] = {
    "model": _opt("gpt", "gpt (from scratch) or classifier (fine-tune).", ModelKind),
    "topic": _opt(DEFAULT_TOPIC["gpt"], f"Input topic (default: {DEFAULT_TOPIC['gpt']} for gpt, "
                  f"{DEFAULT_TOPIC['classifier']} for classifier).", str, by_model=DEFAULT_TOPIC,
                  show_default=False, min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$"),
    "mix": _opt(None, "Read a mixture instead of --topic: TOPIC=WEIGHT,... at those token proportions, "
                "e.g. web=0.6,code=0.3,books=0.1 (gpt).", str | None, show_default=False),
    "steps": _opt(300, "Optimizer steps (fewer if a bounded topic ends).", int, ge=1),
    "batch_size": _opt(8, "Windows (gpt) or samples per step.", int, ge=1, le=65_536),
    "seq_len": _opt(128, "Tokens per window (gpt).", int, ge=2, le=32_768),
    "lr": _opt(DEFAULT_LR["gpt"], f"Peak learning rate (default: {DEFAULT_LR['gpt']:g} gpt, "
               f"{DEFAULT_LR['classifier']:g} classifier).", float, by_model=DEFAULT_LR,
               show_default=False, gt=0, le=1),
    "warmup": _opt(20, "Learning-rate warmup steps.", int, cli=False, ge=0),
    "weight_decay": _opt(0.01, "AdamW weight decay.", float, cli=False, ge=0, le=1),
    "d_model": _opt(128, "GPT width (a multiple of --n-heads).", int, ge=8, le=16_384),
    "n_layers": _opt(2, "GPT layers.", int, ge=1, le=256),
    "n_heads": _opt(4, "GPT attention heads.", int, ge=1, le=1024),
    "tokenizer": _opt("bytes", "The tokenizer prepare used: bytes, minilm or a tokenizer.json path.",
                      str, min_length=1),
    "num_workers": _opt(0, "DataLoader workers per rank.", int, ge=0, le=256),
    "shuffle_buffer": _opt(256, "Records in the shuffle buffer (0: off).", int, ge=0),
    # numpy's seeds are 32-bit
    "seed": _opt(0, "Seed of model init, shuffle and dropout.", int, ge=0, le=2**32 - 1),
    "stream": _opt(False, "Keep reading new records (no end).", bool),
    "checkpoint_dir": _opt(Path("checkpoints"), "Where checkpoints go.", Path),
    "checkpoint_every": _opt(50, "Steps between checkpoints (0: only at the end).", int, ge=0),
    "keep": _opt(3, "Checkpoints kept.", int, ge=1),
    "resume": _opt(False, "Continue from the newest valid checkpoint.", bool),
    "group": _opt("kafeed-train", "Consumer group the offsets are mirrored to.", str, min_length=1),
    "run_dir": _opt(None, "Record metrics.jsonl here for `kafeed report`.", Path | None,
                    show_default=False),
    "log_every": _opt(10, "Steps between progress lines.", int, ge=1),
    "num_labels": _opt(2, "Classes (classifier).", int, ge=2),
    "pretrained": _opt(True, "Start the classifier from the bundled MiniLM weights when installed.", bool),
    # MiniLM's (and the random encoder's) position embeddings
    "max_length": _opt(128, "Tokens per classifier input.", int, cli=False, ge=8, le=512),
    "eval_every": _opt(0, "Also checkpoint every N steps and submit an evaluate task for every "
                       "checkpoint (0: none); run them with `kafeed tasks worker --kind evaluate`.",
                       int, ge=0),
    "eval_records": _opt(256, "Held-out records an evaluate task reads at most.", int, ge=1, le=1_000_000),
    "tasks_prefix": _opt("tasks", "Task queue prefix the evaluate tasks go to.", str,
                         pattern=r"^[A-Za-z0-9._-]{1,100}$"),
    # classifier: the topic's value format (docs/formats.md; None: kafeed's TrainingSample records),
    # built from the settings file's [formats] table and the --value-format flags
    "formats": _opt(None, "The input topic's value format and field mapping.", None, cli=False),
}

TRAIN_DEFAULTS: dict[str, Any] = {name: option.default for name, option in TRAIN_OPTIONS.items()}
"""Each option's default, for the library's pieces that take one on their own (the runner,
the checkpoint manager, the progress reporter)."""
