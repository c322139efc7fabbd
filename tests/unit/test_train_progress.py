"""The training loop's pieces that need no model: the progress windows and the checkpoint policy."""

from __future__ import annotations

from typing import Any

from kafeed.train.checkpoint_policy import CheckpointPolicy
from kafeed.train.progress import ProgressReporter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    def __init__(self) -> None:
        self.records: list[dict[str, float]] = []

    def record(self, **extra: float) -> None:
        self.records.append(extra)


def test_reports_every_log_every_steps_and_at_the_last_over_its_window() -> None:
    clock, lines, recorder = Clock(), [], Recorder()
    reporter = ProgressReporter(total_steps=5, log_every=2, world_size=2, show=lines.append,
                                lag_fn=lambda: 1234, recorder=recorder, clock=clock)
    reports: list[dict[str, Any] | None] = []
    for step in range(1, 6):
        clock.now += 1.0
        reports.append(reporter.step(step, loss=2.0 / step, tokens=100, waited=0.25))
    assert [r is not None for r in reports] == [False, True, False, True, True]
    second = reports[1]
    assert second is not None
    # two steps of 100 tokens in 2 s, times two ranks; a quarter second of wait per second
    assert second["tokens_per_s"] == 200.0 and second["data_wait_share"] == 0.25
    last = reports[4]
    assert last is not None and last["step"] == 5 and last["tokens_per_s"] == 200.0  # a 1-step window
    assert len(lines) == 3 and lines[0].startswith("step      2/5  loss 1.0000") and "lag 1,234" in lines[0]
    assert recorder.records[0] == {"tokens_per_s": 200.0, "data_wait_share": 0.25, "lag": 1234.0}


def test_only_rank_0_prints_and_unknown_lag_is_not_recorded() -> None:
    lines: list[str] = []
    recorder = Recorder()
    reporter = ProgressReporter(total_steps=1, log_every=10, rank=1, show=lines.append, recorder=recorder)
    figures = reporter.step(1, loss=1.0, tokens=8, waited=0.0)
    assert figures is not None and figures["lag"] is None
    assert lines == [] and "lag" not in recorder.records[0]


class Saves:
    """Stands in for ``Runner.save``: records each call; returns a path, or None like ranks but 0."""

    def __init__(self, path: str | None = "ck") -> None:
        self.path = path
        self.steps: list[int] = []
        self.step = 0

    def __call__(self) -> str | None:
        self.steps.append(self.step)
        return None if self.path is None else f"{self.path}-{self.step}"


def test_checkpoint_policy_saves_every_n_and_once_at_the_end() -> None:
    save = Saves()
    policy = CheckpointPolicy(every=2, saved_at=0)
    for save.step in range(1, 6):
        policy.after_step(save.step, save)
    policy.at_end(5, save)
    assert save.steps == [2, 4, 5] and policy.last == "ck-5"
    policy.at_end(5, save)
    assert save.steps == [2, 4, 5]  # the last step is saved already


def test_checkpoint_policy_without_periodic_saves_and_ranks_that_write_none() -> None:
    save = Saves()
    policy = CheckpointPolicy(every=0, saved_at=3)
    policy.at_end(3, save)
    assert save.steps == [] and policy.last is None  # resumed at 3, trained nothing: nothing to save
    for save.step in (4, 5):
        policy.after_step(save.step, save)
    assert save.steps == []
    other_rank = Saves(path=None)
    other_rank.step = 5
    policy.at_end(5, other_rank)
    assert other_rank.steps == [5] and policy.last is None and policy.saved_at == 5
