"""Out-of-range prepare settings are one ConfigError sentence naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from kafeed.errors import ConfigError
from kafeed.prepare import load_prepare_settings


@pytest.mark.parametrize(("overrides", "field"), [
    ({"kafka": {"batch_size": 0}}, "kafka.batch_size"),
    ({"kafka": {"linger_ms": -1}}, "kafka.linger_ms"),
    ({"kafka": {"transaction_timeout_ms": 3_600_000}}, "kafka.transaction_timeout_ms"),
    ({"kafka": {"consume_timeout_s": 0}}, "kafka.consume_timeout_s"),
    ({"idle_s": 0}, "idle_s"),
    ({"max_dlq_ratio": 1.5}, "max_dlq_ratio"),
    ({"filters": {"max_symbol_ratio": 2.0}}, "filters.max_symbol_ratio"),
    ({"filters": {"max_duplicate_line_fraction": -0.1}}, "filters.max_duplicate_line_fraction"),
    ({"filters": {"min_words": 50, "max_words": 10}}, "min_words (50) must not exceed max_words (10)"),
    ({"tokenizer": {"chunk_size": 0}}, "tokenizer.chunk_size"),
    ({"dedup": {"repartition_purge_s": -1}}, "dedup.repartition_purge_s"),
    ({"input": ""}, "input"),
    ({"output": "has space"}, "output"),
])
def test_bad_setting_is_one_config_error(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_prepare_settings(None, env={}, **overrides)
    message = info.value.message
    assert message.startswith("Invalid prepare settings:") and field in message
    assert "\n" not in message


def test_in_range_settings_pass() -> None:
    s = load_prepare_settings(None, env={}, max_dlq_ratio=0.0, kafka={"linger_ms": 0, "batch_size": 1})
    assert (s.max_dlq_ratio, s.kafka.linger_ms, s.kafka.batch_size) == (0.0, 0, 1)


def test_repartition_purge_reaches_the_dedup_step_only() -> None:
    s = load_prepare_settings(None, env={}, group="g", dedup={"repartition_purge_s": 5})
    assert s.dedup_settings().purge_input_every_s == 5
    assert s.route_settings().purge_input_every_s is None  # the user's input is never purged
    assert s.stream_settings().purge_input_every_s is None
    off = load_prepare_settings(None, env={}, group="g", dedup={"repartition_purge_s": 0})
    assert off.dedup_settings().purge_input_every_s is None
