"""The task queue's pure parts: the task model, retry policy, lease agreement, input errors."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError
from kafeed.tasks import QueueSettings, TaskResult, load_handler, make_task, read_task_file
from kafeed.tasks.model import Attempt, parse_params
from kafeed.tasks.queue import lock_ms, share_group_error
from kafeed.tasks.results import ResultsView
from tests.cli_support import usage_error


def test_backoff_doubles_up_to_the_cap_and_jitter_only_shortens() -> None:
    settings = QueueSettings(backoff_s=1.0, max_backoff_s=5.0, jitter=0.2)
    rng = random.Random(7)
    for attempt, base in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        delay = settings.backoff(attempt, rng)
        assert 0.8 * base <= delay <= base
    assert QueueSettings(jitter=0.0).backoff(3) == 4.0


def test_next_attempt_keeps_history_and_the_key() -> None:
    task = make_task(kind="evaluate", key="ckpt-3", params={"step": 3})
    failure = Attempt(attempt=1, worker="w", started_at=1.0, finished_at=2.0, error="boom")
    again = task.next_attempt(failure, not_before=10.0)
    assert (again.key, again.attempt, again.not_before, again.history) == ("ckpt-3", 2, 10.0, (failure,))
    assert task.attempt == 1 and task.history == ()


@pytest.mark.parametrize(("fields", "words"), [
    ({"kind": "no spaces", "key": "k"}, "kind"),
    ({"kind": "results", "key": "k"}, "kind"),
    ({"kind": "ok", "key": ""}, "key"),
    ({"kind": "ok", "key": "k", "params": {"x": float("nan")}}, "JSON"),
    ({"kind": "ok", "key": "k", "max_attempts": 0}, "max_attempts"),
])
def test_bad_tasks_are_one_config_error(fields: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        make_task(**fields)


def test_params_must_be_a_json_object() -> None:
    assert parse_params('{"a": [1, 2]}') == {"a": [1, 2]}
    with pytest.raises(ConfigError, match="not JSON"):
        parse_params("{a: 1}")
    with pytest.raises(ConfigError, match="JSON object"):
        parse_params("[1]")


def test_task_file_lines_and_their_errors(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"kind": "a", "key": "1", "params": {}}\n\n{"kind": "a", "key": "2", "params": {"n": 2},'
                    ' "priority": 5}\n')
    assert [(t.key, t.priority) for t in read_task_file(path)] == [("1", 0), ("2", 5)]
    path.write_text('{"kind": "a", "key": "1"}\n')
    with pytest.raises(ConfigError, match=r"tasks\.jsonl:1 .*kind, key and params"):
        list(read_task_file(path))
    path.write_text('{"kind": "a", "key": "1", "params": {}, "colour": 1}\n')
    with pytest.raises(ConfigError, match="colour"):
        list(read_task_file(path))


def test_handlers_that_cannot_be_loaded() -> None:
    assert load_handler("tests.integration.task_handlers:noop", "x")({}) is None
    with pytest.raises(ConfigError, match="Cannot import handler module 'no_such_mod'"):
        load_handler("no_such_mod:run", "x")
    with pytest.raises(ConfigError, match="has no 'nope'"):
        load_handler("tests.integration.task_handlers:nope", "x")
    with pytest.raises(ConfigError, match="module:function"):
        load_handler("just_a_module", "x")
    with pytest.raises(ConfigError, match="No handler for task kind"):
        load_handler(None, "kind-nobody-registered")


def test_lock_duration_follows_the_timeout_within_the_broker_range() -> None:
    assert (lock_ms(0.2), lock_ms(5), lock_ms(600)) == (1000, 5000, 60_000)


def test_a_broker_without_share_groups_is_named_by_share_version() -> None:
    from kafeed.errors import KafkaOperationError

    refused = KafkaOperationError("Could not configure group 'kafeed-tasks.x': Unknown group config "
                                  "name: share.auto.offset.reset.")
    err = share_group_error(refused, "kafeed-tasks.x")
    assert isinstance(err, ConfigError) and "share.version" in str(err)
    assert len(err.message.split(". ")) == 1


def _lease(key: str, lease_id: str, *, written: float, until: float, status: str = "running") -> TaskResult:
    return TaskResult(key=key, kind="k", status=status, worker=lease_id, lease_id=lease_id,  # type: ignore[arg-type]
                      written_at=written, lease_until=until)


def test_readers_agree_the_first_live_lease_wins_and_only_its_holder_ends_it() -> None:
    view = ResultsView(ConnectionSettings(bootstrap="localhost:1"), "t.results")
    view._apply(_lease("k", "a", written=100.0, until=110.0))
    view._apply(_lease("k", "b", written=101.0, until=111.0))  # a's lease is live: b loses
    assert view.holder("k", now=105.0).lease_id == "a"  # type: ignore[union-attr]
    view._apply(_lease("k", "b", written=102.0, until=0.0, status="retrying"))  # not b's to end
    assert view.holder("k", now=105.0).lease_id == "a"  # type: ignore[union-attr]
    view._apply(_lease("k", "a", written=106.0, until=116.0))  # heartbeat renews
    assert view.holder("k", now=112.0) is not None
    view._apply(_lease("k", "c", written=120.0, until=130.0))  # a's lease ran out: c takes over
    assert view.holder("k", now=121.0).lease_id == "c"  # type: ignore[union-attr]
    view._apply(_lease("k", "c", written=122.0, until=0.0, status="succeeded"))
    assert view.holder("k", now=123.0) is None and view.latest("k").status == "succeeded"  # type: ignore[union-attr]


def test_cli_bad_input_is_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(["tasks", "submit", "--kind", "k", "--key", "a", "--params", "{nope"], capsys)
    assert "not JSON" in line
    line = usage_error(["tasks", "submit", "--kind", "k"], capsys)
    assert "--key" in line
    line = usage_error(["tasks", "worker", "--kind", "k", "--handler", "no_such_mod:run"], capsys)
    assert "Cannot import handler module" in line
    line = usage_error(["tasks", "submit", "--kind", "ingest-file", "--dir", "/no/such/dir"], capsys)
    assert "/no/such/dir does not exist" in line
    line = usage_error(["tasks", "submit", "--dir", "."], capsys)
    assert "--dir needs --kind" in line


def test_a_heartbeat_written_after_the_final_result_does_not_revive_the_lease() -> None:
    view = ResultsView(ConnectionSettings(bootstrap="localhost:1"), "t.results")
    view._apply(_lease("k", "a", written=100.0, until=110.0))
    view._apply(_lease("k", "a", written=101.0, until=0.0, status="succeeded"))
    view._apply(_lease("k", "a", written=101.5, until=111.5))  # late renewal of the ended lease
    assert view.holder("k", now=102.0) is None and view.latest("k").status == "succeeded"  # type: ignore[union-attr]


def test_directory_tasks_one_per_file_keyed_by_topic_and_path(tmp_path: Path) -> None:
    from kafeed.tasks import directory_tasks

    for name in ("b.jsonl", "a.jsonl", ".hidden"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "sub").mkdir()
    tasks = directory_tasks("ingest-file", tmp_path, {"topic": "raw"}, max_attempts=5)
    assert [t.params["path"] for t in tasks] == [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert tasks[0].key == f"ingest-file:raw:{tmp_path / 'a.jsonl'}" and tasks[0].max_attempts == 5
    assert directory_tasks("x", tmp_path, {}, key_prefix="run-7")[1].key == f"run-7:{tmp_path / 'b.jsonl'}"


def test_builtin_kinds_need_no_handler_and_take_the_context() -> None:
    from kafeed.tasks.handlers import BUILTIN, wants_context

    evaluate = load_handler(None, "evaluate")
    assert evaluate.__name__ == "evaluate" and wants_context(evaluate)
    assert set(BUILTIN) == {"evaluate", "ingest-file"}
    assert wants_context(load_handler(None, "ingest-file"))
    # --handler still wins over a built-in kind
    assert not wants_context(load_handler("tests.integration.task_handlers:noop", "evaluate"))
