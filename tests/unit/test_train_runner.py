"""The training loop's answer to SIGTERM/SIGINT, without a broker: real signals, fake data."""

from __future__ import annotations

import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from kafeed.loader.state.rank_states import loadable_state
from kafeed.signals import install, stop_request
from kafeed.train.checkpoint import CheckpointManager
from kafeed.train.optim import AdamW
from kafeed.train.runner import Runner


class Batches:
    """Three batches; ``on_next(i)`` runs before batch ``i`` is handed out."""

    def __init__(self, on_next: Callable[[int], None] = lambda _i: None, count: int = 3) -> None:
        self.on_next = on_next
        self.count = count
        self.handed_out = 0

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for i in range(self.count):
            self.on_next(i)
            self.handed_out += 1
            yield {"x": torch.full((2, 4), float(i))}

    def state_dict(self) -> dict[str, Any]:
        return {"handed_out": self.handed_out}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.handed_out = loadable_state(state)["handed_out"]


def _runner(loader: Batches, ckpt: Path, step_hook: Callable[[int], None] = lambda _s: None) -> Runner:
    model = torch.nn.Linear(4, 1)
    opt = AdamW(model.parameters(), lr=1e-2, weight_decay=0.0, warmup=0, total=3)
    done = []

    def step_fn(batch: dict[str, torch.Tensor]) -> tuple[float, int]:
        step_hook(len(done))
        loss = model(batch["x"]).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        done.append(1)
        return float(loss.detach()), 8

    return Runner(model=model, optimizer=opt, loader=loader, step_fn=step_fn,
                  checkpoints=CheckpointManager(ckpt), checkpoint_every=0, total_steps=3,
                  progress=lambda _line: None)


@pytest.fixture
def stop() -> Iterator[Any]:
    request = install()
    yield request
    request.uninstall()
    request.reset()


def test_signal_before_the_run_stops_it_before_the_first_batch(stop: Any, tmp_path: Path) -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # arrives "while torch imports": only remembered
    loader = Batches()
    result = _runner(loader, tmp_path).run()
    assert result.stopped_by_signal and result.steps == 0 and loader.handed_out == 0
    assert result.checkpoint is None and not any(tmp_path.iterdir())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_while_waiting_for_data_leaves_the_wait(stop: Any, tmp_path: Path, sig: int) -> None:
    def on_next(i: int) -> None:
        if i == 1:  # the broker has nothing: the loader blocks, and the signal comes meanwhile
            threading.Timer(0.2, os.kill, (os.getpid(), sig)).start()
            time.sleep(60)

    t0 = time.monotonic()
    result = _runner(Batches(on_next), tmp_path).run()
    assert time.monotonic() - t0 < 30
    assert result.stopped_by_signal and result.steps == 1 and stop.exit_code == 128 + sig
    assert result.checkpoint == str(tmp_path / "step-00000001.pt")
    saved = CheckpointManager(tmp_path).load_latest()
    assert saved is not None and saved.payload["loader"]["ranks"] == [{"handed_out": 1}]


def test_signal_during_a_step_finishes_it_then_checkpoints(stop: Any, tmp_path: Path) -> None:
    def step_hook(step: int) -> None:
        if step == 0:
            os.kill(os.getpid(), signal.SIGTERM)

    loader = Batches()
    result = _runner(loader, tmp_path, step_hook).run()
    assert result.stopped_by_signal and result.steps == 1 and loader.handed_out == 1
    assert result.checkpoint == str(tmp_path / "step-00000001.pt")


def test_library_run_gives_the_signals_back(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    result = _runner(Batches(), tmp_path).run()
    assert result.steps == 3 and not result.stopped_by_signal
    assert signal.getsignal(signal.SIGTERM) == before and not stop_request().requested


def test_eval_every_adds_checkpoints_and_each_checkpoint_is_announced(stop: Any, tmp_path: Path) -> None:
    from dataclasses import replace

    seen: list[tuple[int, str]] = []
    runner = replace(_runner(Batches(count=5), tmp_path), total_steps=5, eval_every=2,
                     on_checkpoint=lambda step, path: seen.append((step, path)))
    runner.run()
    # every 2 steps and the end; each written checkpoint passed on with its path
    assert [step for step, _ in seen] == [2, 4, 5]
    assert [Path(path).name for _, path in seen] == [f"step-{s:08d}.pt" for s in (2, 4, 5)]
    assert all(Path(path).exists() for _, path in seen)


def test_each_batch_is_freed_after_its_step_before_the_wait_for_the_next(tmp_path: Path) -> None:
    """Freed inside the timed wait, a batch let the prefetch thread take the GIL there."""
    refs: list[weakref.ref[torch.Tensor]] = []
    freed_when_asked: list[bool] = []

    class Tracked(Batches):
        def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
            for i in range(self.count):
                freed_when_asked.append(all(ref() is None for ref in refs))
                self.handed_out += 1
                x = torch.full((2, 4), float(i))
                refs.append(weakref.ref(x))
                yield {"x": x}
                del x

    result = _runner(Tracked(), tmp_path).run()
    assert result.steps == 3
    assert freed_when_asked == [True, True, True]


def test_the_setup_objects_are_frozen_for_the_run_and_handed_back_after(tmp_path: Path) -> None:
    import gc

    seen: list[int] = []
    before = gc.get_freeze_count()
    result = _runner(Batches(), tmp_path, step_hook=lambda _s: seen.append(gc.get_freeze_count())).run()
    assert result.steps == 3 and len(seen) == 3
    assert before == 0 and all(n > 0 for n in seen)  # the model, torch's modules: out of the passes
    assert gc.get_freeze_count() == 0  # unfrozen at the end, as it was before


def test_objects_the_caller_froze_stay_frozen_after_the_run(tmp_path: Path) -> None:
    import gc

    gc.freeze()
    try:
        assert gc.get_freeze_count() > 0
        _runner(Batches(), tmp_path).run()
        # Still frozen (the run's gc.unfreeze() would empty the permanent generation); the
        # count itself may drop: a frozen object is still freed when its last reference goes.
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
