"""`kafeed prepare` over several input topics (a pattern or a list): two sites' mirrored topics
(`site-a.raw`, `site-b.raw`, produced here directly) become one tokens topic, exactly once, with a
document both sites produced kept once and still naming the site it came from."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.mirror.origin import ORIGIN_HEADER
from kafeed.prepare import PrepareSettings, run_prepare
from kafeed.schema import decode_document, make_sample
from kafeed.topics import TopicAdmin, plan_topic
from tests.prepare_support import (
    Raw,
    high_watermarks,
    paragraphs,
    prepare_command,
    prepare_env,
    produce,
    read_topic,
    start_and_kill,
)

SITES = ("site-a", "site-b")


def _site_topics(admin: TopicAdmin, partitions: int = 2) -> tuple[str, dict[str, str]]:
    """A fresh run prefix and per site its mirrored topic, ``<run>.<site>.raw``."""
    run = f"in{uuid.uuid4().hex[:8]}"
    topics = {site: f"{run}.{site}.raw" for site in SITES}
    for topic in topics.values():
        admin.create(plan_topic(topic, brokers=1, partitions=partitions))
    return run, topics


def _mirrored(site: str, texts: Iterable[tuple[str, str]], *, first: int = 0) -> list[Raw]:
    """Records as the mirror writes them from ``site`` (its offsets from ``first``): the site's ids
    and keys, and the origin header."""
    out: list[Raw] = []
    for n, (name, text) in enumerate(texts, start=first):
        doc_id = f"{site}:{name}"
        value = make_sample(text, id=doc_id, source=site).SerializeToString()
        out.append((doc_id.encode(), value, [(ORIGIN_HEADER, f"{site}/raw/0/{n}".encode())]))
    return out


def _corpus(unique: int, shared: int, *, seed: str) -> dict[str, list[tuple[str, str]]]:
    """Per site ``unique`` texts of its own, then ``shared`` texts that both sites have."""
    both = [(f"shared-{seed}-{i}", t) for i, t in enumerate(paragraphs(shared, seed=f"{seed}-both"))]
    return {site: [(f"own-{seed}-{i}", t) for i, t in enumerate(paragraphs(unique, seed=f"{seed}-{site}"))]
            + both for site in SITES}


def _check_documents(kafka: ConnectionSettings, output: str, topics: dict[str, str],
                     corpus: dict[str, list[tuple[str, str]]]) -> None:
    """Each text once; each survivor's id, input topic and origin header name the same site record."""
    docs = [decode_document(m.value()) for m in read_topic(kafka, output)]
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids)), "a document was prepared twice"
    texts = {text for entries in corpus.values() for _, text in entries}
    assert len(docs) == len(texts), "a text is missing or kept twice"
    names = {site: [name for name, _ in entries] for site, entries in corpus.items()}
    shared = {name for name in names[SITES[0]] if name.startswith("shared-")}
    kept = [d.id.split(":", 1)[1] for d in docs if d.id.split(":", 1)[1] in shared]
    assert sorted(kept) == sorted(shared), "a document both sites produced is not kept exactly once"
    for d in docs:
        site, name = d.id.split(":", 1)
        assert d.input_topic == topics[site], (d.id, d.input_topic)
        assert d.metadata[ORIGIN_HEADER] == f"{site}/raw/0/{names[site].index(name)}", d.id


def test_a_pattern_then_a_list_over_two_sites_drain_once_and_keep_a_shared_document_once(
        kafka: ConnectionSettings, admin: TopicAdmin) -> None:
    run, topics = _site_topics(admin)
    corpus = _corpus(60, 5, seed=run)
    for site, topic in topics.items():
        produce(kafka, topic, _mirrored(site, corpus[site]))
    settings = PrepareSettings(input=f"{run}.site-*.raw", output=f"{run}.tokens", group=f"g-{run}",  # type: ignore[arg-type]
                               idle_s=1.0, kafka={"batch_size": 20})  # type: ignore[arg-type]
    assert settings.dlq_topic == f"g-{run}.dlq"  # a pattern: one dead-letter topic for the group
    stats = run_prepare(settings, kafka, until_caught_up=True)
    assert stats.balanced and stats.global_dedup, stats
    assert (stats.records_in, stats.documents_out, stats.duplicates) == (130, 125, 5)
    _check_documents(kafka, settings.output, topics, corpus)

    # The same group given the topics as a list goes on where the pattern's run stopped, and its
    # dedup state remembers the texts of both sites: one site sends an old text of the other's.
    later = _corpus(10, 2, seed=f"{run}-later")
    later["site-b"].append(("again-0", corpus["site-a"][0][1]))
    for site, topic in topics.items():
        produce(kafka, topic, _mirrored(site, later[site], first=len(corpus[site])))
        corpus[site] += later[site]
    listed = settings.model_copy(update={"input": tuple(topics.values())})
    again = run_prepare(listed, kafka, until_caught_up=True)
    assert listed.dlq_topic == settings.dlq_topic
    assert again.balanced and (again.records_in, again.documents_out, again.duplicates) == (25, 22, 3)
    _check_documents(kafka, settings.output, topics, corpus)


def test_a_pattern_that_matches_nothing_exits_2_naming_it_and_writes_nothing(
        kafka: ConnectionSettings, admin: TopicAdmin, tmp_path: Path) -> None:
    run, _ = _site_topics(admin, partitions=1)
    pattern, output = f"{run}.site-*.logs", f"{run}.tokens"
    done = subprocess.run(prepare_command(kafka.bootstrap, pattern, output, f"g-{run}", "--until-caught-up"),
                          env=prepare_env(str(tmp_path)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert f"Input pattern '{pattern}' matches no topic; the cluster has " in said, said
    assert "Traceback" not in done.stderr
    assert not admin.exists(output) and not admin.exists(f"g-{run}.dlq")


def _prepare_kills(kafka: ConnectionSettings, admin: TopicAdmin, tmp_path: Path, kills: int, *,
                   drain_list: bool) -> None:
    """Rounds of both sites' records, prepare over the pattern SIGKILLed mid-round each time, then
    one drain (given the topics as a list with ``drain_list``: the same inputs, group and DLQ)."""
    run, topics = _site_topics(admin, partitions=3)
    rounds = [_corpus(150, 10, seed=f"{run}-{k}") for k in range(kills + 1)]
    corpus = {site: [e for r in rounds for e in r[site]] for site in SITES}
    offsets = dict.fromkeys(SITES, 0)

    def produce_round(k: int) -> None:
        for site, topic in topics.items():
            records = _mirrored(site, corpus[site])[offsets[site]:offsets[site] + len(rounds[k][site])]
            offsets[site] += len(records)
            produce(kafka, topic, records)

    output = f"{run}.tokens"
    command = prepare_command(kafka.bootstrap, f"{run}.site-*.raw", output, f"g-{run}", "--batch-size", "20")
    drain = prepare_command(kafka.bootstrap, ",".join(topics.values()) if drain_list else f"{run}.site-*.raw",
                            output, f"g-{run}", "--batch-size", "20")
    env = prepare_env(str(tmp_path))
    # The drain waits out the dead member's session once: the broker's shortest keeps the test short.
    (tmp_path / "kafeed.toml").write_text("[prepare.kafka]\nsession_timeout_ms = 6000\n")
    env["KAFEED_CONFIG"] = str(tmp_path / "kafeed.toml")
    for k in range(kills):
        produce_round(k)
        before = high_watermarks(kafka, output)
        # killed once it wrote some documents
        start_and_kill(command, env, lambda b=before: high_watermarks(kafka, output) > b)
    produce_round(kills)  # records the dead member's partitions get after it died
    t0 = time.monotonic()
    done = subprocess.run([*drain, "--until-caught-up", "--json"], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    print(f"prepare over two sites, drain after {kills} kill(s): {time.monotonic() - t0:.1f} s")
    assert json.loads(done.stdout)["balanced"]
    # Several inputs: one dead-letter topic for the group, none per input.
    assert admin.exists(f"g-{run}.dlq") and not admin.exists(f"{topics[SITES[0]]}.dlq")
    _check_documents(kafka, output, topics, corpus)


# Each drain after a kill waits out the dead member's session: 24 s for one kill on an idle
# machine, over the default run's budget for this file.
@pytest.mark.slow
@pytest.mark.parametrize(("kills", "drain_list"), [(1, True), (3, False)])
def test_a_drain_after_kills_mid_run_is_exact(kills: int, drain_list: bool, kafka: ConnectionSettings,
                                              admin: TopicAdmin, tmp_path: Path) -> None:
    _prepare_kills(kafka, admin, tmp_path, kills=kills, drain_list=drain_list)


@pytest.mark.slow
def test_two_workers_over_a_pattern_share_every_site_partition(kafka: ConnectionSettings, admin: TopicAdmin,
                                                               tmp_path: Path) -> None:
    run, topics = _site_topics(admin, partitions=2)
    corpus = _corpus(100, 10, seed=run)
    for site, topic in topics.items():
        produce(kafka, topic, _mirrored(site, corpus[site]))
    output = f"{run}.tokens"
    done = subprocess.run(
        [*prepare_command(kafka.bootstrap, f"{run}.site-*.raw", output, f"g-{run}", "--batch-size", "20"),
         "--workers", "2", "--until-caught-up", "--json"],
        env=prepare_env(str(tmp_path)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = done.stdout[done.stdout.rindex('{\n  "peak_workers"'):]  # after the workers' own tables
    assert json.loads(summary)["peak_workers"] == 2, done.stdout
    _check_documents(kafka, output, topics, corpus)
