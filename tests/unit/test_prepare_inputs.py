"""Prepare over a list or pattern of input topics, without a broker: settings, resolution, the
core's positions over several topics, and the lineage that names each copy's input topic."""

from __future__ import annotations

import pytest
from confluent_kafka import Message
from pydantic import ValidationError

from kafeed.errors import ConfigError
from kafeed.prepare import PrepareSettings, load_prepare_settings, resolve_inputs
from kafeed.prepare.rekey import DedupStage, RouteStage
from kafeed.prepare.tokenize import load_tokenizer
from kafeed.schema import make_sample
from kafeed.stream import Record, RecordBatch, StreamSettings

CLUSTER = ["raw", "site-a.raw", "site-b.raw", "site-a.events", "site-b.raw.dlq", "tokens"]


def test_a_list_is_split_once_each_and_one_plain_topic_keeps_its_dead_letter_topic() -> None:
    assert PrepareSettings().input == ("raw",) and PrepareSettings().dlq_topic == "raw.dlq"
    listed = load_prepare_settings(None, env={}, input=" site-a.raw, site-b.raw,site-a.raw,")
    assert listed.input == ("site-a.raw", "site-b.raw")
    assert listed.dlq_topic == "kafeed-prepare.dlq"  # several inputs: <group>.dlq
    as_toml_list = load_prepare_settings(None, env={}, input=["site-a.raw", "site-b.raw"])
    assert as_toml_list.input == listed.input
    pattern = PrepareSettings(input="site-*.raw", group="g", dlq=None)  # type: ignore[arg-type]
    assert pattern.dlq_topic == "g.dlq" and pattern.patterns == ("site-*.raw",)
    assert PrepareSettings(input="site-*.raw", dlq="sites.dlq").dlq_topic == "sites.dlq"  # type: ignore[arg-type]


@pytest.mark.parametrize(("overrides", "words"), [
    ({"input": "site-*.raw", "dedup": {"scope": "partition"}}, "dedup scope 'partition' reads one input"),
    ({"input": "a,b", "dedup": {"scope": "partition"}}, "dedup scope 'partition' reads one input"),
    ({"input": "raw,tokens", "output": "tokens"}, "must all differ"),
    ({"input": "bad name*"}, "input"),
    ({"input": "raw,a!b"}, "'a!b' is neither a topic name nor a pattern"),
])
def test_inputs_that_cannot_work_are_one_config_error(overrides: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_prepare_settings(None, env={}, **overrides)


def test_patterns_resolve_to_the_topics_they_match_in_name_order_and_keep_the_dead_letter_topic() -> None:
    settings = PrepareSettings(input="site-b.raw,site-*.raw", group="g")  # type: ignore[arg-type]
    resolved = resolve_inputs(settings, CLUSTER)
    assert resolved.input == ("site-b.raw", "site-a.raw")  # a topic named twice is read once
    assert resolved.dlq_topic == "g.dlq" and not resolved.patterns
    assert resolved.route_settings().inputs == ("site-b.raw", "site-a.raw")
    # A pattern never selects prepare's own outputs or dead letters, nor internal topics.
    everything = resolve_inputs(PrepareSettings(input="*", output="tokens", dlq="site-b.raw.dlq"),  # type: ignore[arg-type]
                                [*CLUSTER, "__consumer_offsets"])
    assert everything.input == ("raw", "site-a.events", "site-a.raw", "site-b.raw")
    plain = PrepareSettings(input="raw")  # type: ignore[arg-type]
    assert resolve_inputs(plain, []) is plain  # names alone: the core checks they exist


def test_a_pattern_that_matches_nothing_names_it_and_a_few_topics() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_inputs(PrepareSettings(input="site-*.logs"), [*CLUSTER, "x", "y"])  # type: ignore[arg-type]
    assert info.value.message == ("Input pattern 'site-*.logs' matches no topic; the cluster has "
                                  "raw, site-a.events, site-a.raw, site-b.raw, site-b.raw.dlq and 2 more.")
    with pytest.raises(ConfigError, match="the cluster has no topics"):
        resolve_inputs(PrepareSettings(input="site-*"), [])  # type: ignore[arg-type]


def test_unresolved_patterns_never_reach_the_core() -> None:
    with pytest.raises(ConfigError, match="not resolved"):
        PrepareSettings(input="site-*.raw").route_settings()  # type: ignore[arg-type]


def test_a_core_stage_with_state_reads_one_input() -> None:
    StreamSettings(inputs=("a", "b"), outputs=("out",), group="g", dlq_topic="g.dlq")
    with pytest.raises(ValidationError, match="reads one input topic"):
        StreamSettings(inputs=("a", "b"), outputs=("out",), group="g", dlq_topic="g.dlq", changelog_topic="c")


def test_positions_of_a_batch_from_several_topics() -> None:
    layout = [("site-b.raw", 0, 5), ("site-a.raw", 0, 2), ("site-b.raw", 1, 9), ("site-a.raw", 0, 1),
              ("site-b.raw", 0, 6)]
    messages = [Message(topic=t, partition=p, offset=o, value=b"v") for t, p, o in layout]
    batch = RecordBatch(messages)
    assert batch.positions() == {("site-a.raw", 0): 3, ("site-b.raw", 0): 7, ("site-b.raw", 1): 10}
    assert batch.topics() == [t for t, _, _ in layout]


def test_the_copy_that_survives_dedup_keeps_its_input_topic_and_site() -> None:
    settings = resolve_inputs(PrepareSettings(input="site-*.raw"), CLUSTER)  # type: ignore[arg-type]
    value = make_sample("The same words arrive from two sites today.", id="b-1").SerializeToString()
    origin = (("kafeed.mirror.origin", b"site-b/raw/0/41"),)
    routed = RouteStage(settings).process([Record("site-b.raw", 0, 7, b"k", value, origin)])
    (out,) = routed.outputs
    assert out.headers[0][1].endswith(b"site-b.raw")
    stage = DedupStage(settings, load_tokenizer(settings.tokenizer))
    try:
        source = stage._source(Record(settings.repartition_topic, 0, 0, out.key, out.value, out.headers))
        assert (source.topic, source.partition, source.offset) == ("site-b.raw", 0, 7)
        # A header written before the topic was carried names the first input.
        old = Record(settings.repartition_topic, 0, 0, out.key, out.value,
                     (("kafeed.lineage", out.headers[0][1][:12]),))
        assert stage._source(old).topic == "site-a.raw"
    finally:
        stage.close()
