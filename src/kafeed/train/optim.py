"""AdamW with its warmup-cosine schedule, without ``torch.optim.Optimizer``.

Every ``torch.optim.Optimizer`` imports ``torch._dynamo`` when it is built (its
``add_param_group`` is wrapped by ``torch._disable_dynamo``) and again in every
``step()``: about 5 s of imports on 2 CPU cores before the first batch, for a compiler
the reference trainers never use. This class keeps the parameters' moments itself and
calls torch's functional ``torch.optim.adam.adam`` with ``decoupled_weight_decay=True``:
the update ``torch.optim.AdamW`` computes, number for number, without the import.

The learning rate of step ``k`` (0-based) is ``lr * cosine_lr(k, warmup, total)``, what
``LambdaLR`` over ``cosine_lr`` gave. The state is small and versioned:
``{"version", "steps", "moments": [None | {"step", "exp_avg", "exp_avg_sq"}, ...]}``,
one entry per parameter in order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch.optim.adam import adam

from kafeed.errors import ResumeMismatch

STATE_VERSION = 1


def cosine_lr(step: int, *, warmup: int, total: int) -> float:
    """Linear warmup then cosine decay to 10%, as a multiplier of the peak rate."""
    if step < warmup:
        return (step + 1) / max(1, warmup)
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


class AdamW:
    """AdamW (betas 0.9/0.999, eps 1e-8) at ``lr * cosine_lr(step)``; parameters without a
    gradient in a step are left alone, as torch's optimizers do."""

    def __init__(self, params: Iterable[torch.nn.Parameter], *, lr: float, weight_decay: float,
                 warmup: int, total: int, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params = list(params)
        self.peak_lr = lr
        self.weight_decay = weight_decay
        self.warmup = warmup
        self.total = total
        self.betas = betas
        self.eps = eps
        self.steps = 0
        self._moments: list[dict[str, torch.Tensor] | None] = [None] * len(self.params)

    @property
    def lr(self) -> float:
        """The rate the next step uses."""
        return self.peak_lr * cosine_lr(self.steps, warmup=self.warmup, total=self.total)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        params: list[torch.Tensor] = []
        grads: list[torch.Tensor] = []
        exp_avgs: list[torch.Tensor] = []
        exp_avg_sqs: list[torch.Tensor] = []
        steps: list[torch.Tensor] = []
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            moments = self._moments[i]
            if moments is None:
                moments = self._moments[i] = {
                    "step": torch.tensor(0.0),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
            params.append(p)
            grads.append(p.grad)
            exp_avgs.append(moments["exp_avg"])
            exp_avg_sqs.append(moments["exp_avg_sq"])
            steps.append(moments["step"])
        if params:
            adam(params, grads, exp_avgs, exp_avg_sqs, [], steps, decoupled_weight_decay=True,
                 amsgrad=False, beta1=self.betas[0], beta2=self.betas[1], lr=self.lr,
                 weight_decay=self.weight_decay, eps=self.eps, maximize=False)
        self.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "steps": self.steps,
                "moments": [None if m is None else dict(m) for m in self._moments]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; refuses a state of another version or model shape."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ResumeMismatch(
                "The checkpoint's optimizer state is not kafeed's AdamW state "
                f"(version {STATE_VERSION}); it was written by another kafeed version.",
                hint="Start a fresh run in another --checkpoint-dir.")
        moments = state["moments"]
        shapes_match = len(moments) == len(self.params) and all(
            m is None or m["exp_avg"].shape == p.shape for m, p in zip(moments, self.params, strict=False))
        if not shapes_match:
            raise ResumeMismatch("The checkpoint's optimizer state belongs to a model of another shape.",
                                 hint="Resume with the model options the checkpoint was trained with.")
        self.steps = int(state["steps"])
        self._moments = [None if m is None else
                         {"step": m["step"].cpu(),  # on the CPU, as torch keeps it
                          "exp_avg": m["exp_avg"].to(p.device), "exp_avg_sq": m["exp_avg_sq"].to(p.device)}
                         for m, p in zip(moments, self.params, strict=True)]
