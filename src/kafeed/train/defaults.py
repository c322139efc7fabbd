"""The defaults of a training run, declared once, as plain data.

:class:`~kafeed.train.options.TrainOptions` validates with them and ``kafeed train --help``
shows them, without importing pydantic or torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DEFAULT_LR: dict[str, float] = {"gpt": 3e-3, "classifier": 5e-5}
DEFAULT_TOPIC: dict[str, str] = {"gpt": "tokens", "classifier": "raw"}

TRAIN_DEFAULTS: dict[str, Any] = {
    "model": "gpt",
    "topic": DEFAULT_TOPIC["gpt"],
    "mix": None,  # gpt: topic=weight pairs read as a mixture instead of topic
    "formats": None,  # classifier: the topic's value format (kafeed.formats), None: TrainingSample
    "steps": 300,
    "batch_size": 8,
    "seq_len": 128,
    "lr": DEFAULT_LR["gpt"],
    "warmup": 20,
    "weight_decay": 0.01,
    "d_model": 128,
    "n_layers": 2,
    "n_heads": 4,
    "tokenizer": "bytes",
    "num_workers": 0,
    "shuffle_buffer": 256,
    "seed": 0,
    "stream": False,
    "checkpoint_dir": Path("checkpoints"),
    "checkpoint_every": 50,
    "keep": 3,
    "resume": False,
    "group": "kafeed-train",
    "run_dir": None,
    "log_every": 10,
    "num_labels": 2,
    "pretrained": True,
    "max_length": 128,
    "eval_every": 0,  # steps between evaluated checkpoints (0: no evaluate tasks)
    "eval_records": 256,  # held-out records an evaluate task reads at most
    "tasks_prefix": "tasks",  # the task queue evaluate tasks go to
}
