"""kafeed's AdamW: torch's AdamW + LambdaLR(cosine_lr) number for number, and its state."""

from __future__ import annotations

import pytest
import torch

from kafeed.errors import ResumeMismatch
from kafeed.train.optim import AdamW, cosine_lr


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 3))


def _train(model: torch.nn.Module, opt: AdamW | torch.optim.Optimizer, sched: object, steps: int,
           start: int = 0) -> None:
    gen = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 6, generator=gen), torch.randint(0, 3, (4,), generator=gen))
               for _ in range(start + steps)][start:]
    for x, y in batches:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        if sched is not None:
            sched.step()  # type: ignore[attr-defined]


def test_matches_torch_adamw_with_lambda_schedule() -> None:
    ours, theirs = _model(0), _model(0)
    opt = AdamW(ours.parameters(), lr=3e-3, weight_decay=0.01, warmup=3, total=12)
    ref = torch.optim.AdamW(theirs.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(ref, lambda s: cosine_lr(s, warmup=3, total=12))
    _train(ours, opt, None, 12)
    _train(theirs, ref, sched, 12)
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-7), (a - b).abs().max()
    assert opt.lr == pytest.approx(ref.param_groups[0]["lr"])


def test_state_round_trip_continues_exactly() -> None:
    straight = _model(0)
    opt = AdamW(straight.parameters(), lr=1e-2, weight_decay=0.01, warmup=2, total=10)
    _train(straight, opt, None, 10)

    first = _model(0)
    opt1 = AdamW(first.parameters(), lr=1e-2, weight_decay=0.01, warmup=2, total=10)
    _train(first, opt1, None, 4)
    saved_model, saved_opt = first.state_dict(), opt1.state_dict()
    resumed = _model(5)
    resumed.load_state_dict(saved_model)
    opt2 = AdamW(resumed.parameters(), lr=1e-2, weight_decay=0.01, warmup=2, total=10)
    opt2.load_state_dict(saved_opt)
    assert opt2.steps == 4
    _train(resumed, opt2, None, 6, start=4)
    for a, b in zip(resumed.parameters(), straight.parameters(), strict=True):
        assert torch.equal(a, b)


def test_refuses_foreign_or_misshapen_state() -> None:
    model = _model(0)
    opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.0, warmup=0, total=5)
    torch_state = torch.optim.AdamW(model.parameters()).state_dict()
    with pytest.raises(ResumeMismatch, match="not kafeed's AdamW state"):
        opt.load_state_dict(torch_state)
    _train(model, opt, None, 1)
    other = AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3, weight_decay=0.0, warmup=0, total=5)
    with pytest.raises(ResumeMismatch, match="another shape"):
        other.load_state_dict(opt.state_dict())
