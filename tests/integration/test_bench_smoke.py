"""A seconds-long run of every benchmark in benchmarks/ on the session's broker, so that a change
to what a benchmark calls fails here and not on the day someone measures with it. Each run uses
the smallest sizes its benchmark accepts and asserts the figures it came back with are whole.
(bench_prepare_formats.py has its own, tests/integration/test_bench_prepare_formats.py.)"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import json
import math
import sys
import threading
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from kafeed.broker import LocalCluster
from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin, plan_topic

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def bench(name: str) -> ModuleType:
    """Import benchmarks/<name>.py by its name: some import one another, and a spawned child of
    one finds its function again by the module's name."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


def fresh(admin: TopicAdmin, partitions: int = 1) -> str:
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    admin.create(plan_topic(name, brokers=1, partitions=partitions))
    return name


def test_latency_sustained_rate_and_a_fresh_run(kafka: ConnectionSettings, admin: TopicAdmin) -> None:
    latency = bench("bench_latency")
    assert latency.sustained(kafka, fresh(admin), 64) > 0
    r = latency.run(kafka, fresh(admin), 200, 2.5, 0.02, 0)
    assert r["records"] > 0 and 0 < r["fill"] <= 1, r
    assert math.isfinite(r["p99"]) and r["p50"] <= r["p99"] <= r["max"], r


def test_data_wait_times_every_batch_of_a_short_run(kafka: ConnectionSettings, admin: TopicAdmin,
                                                   tmp_path: Path) -> None:
    data_wait = bench("bench_data_wait")
    topic = fresh(admin, partitions=3)
    assert data_wait.produce(kafka, topic, docs=300) == 300
    from kafeed.loader import stream_loader

    iterate = stream_loader.StreamLoader.__iter__
    wait = data_wait.run(kafka, tmp_path, 3, False, topic=topic)
    assert stream_loader.StreamLoader.__iter__ is iterate  # the benchmark's timing hook is taken off
    assert wait["steps"] == 3 and wait["first_ms"] > 0 and len(wait["later_ms"]) >= 2, wait
    assert 0 <= wait["data_wait_share"] <= 1, wait


def test_infer_serves_a_batch_size_beside_the_model_alone(kafka: ConnectionSettings, tmp_path: Path) -> None:
    infer = bench("bench_infer")
    ckpt = infer.make_checkpoint(tmp_path / "ck", pretrained=False)
    raw = f"smoke-{uuid.uuid4().hex[:8]}"
    (row,) = infer.measure(kafka, ckpt, infer.texts(8), [8], partitions=1, raw=raw)
    assert row["batch"] == 8 and row["model_alone"]["records_per_s"] > 0, row
    assert row["pipeline"]["records_per_s"] > 0 and row["ratio"] > 0, row


# kafka-python 3 warns on its own import and on the naive producer's lambda serializer.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_ingest_kafeed_and_the_naive_producer(kafka: ConnectionSettings, admin: TopicAdmin,
                                              tmp_path: Path) -> None:
    # ProducerPerformance (a JVM start, seconds of CPU) is left to the full run.
    ingest = bench("bench_ingest")
    corpus = tmp_path / "corpus.jsonl"
    assert ingest.make_corpus(corpus, 200, 40) > 200 * 40
    stats, cpu = ingest.kafeed_run(kafka, corpus, fresh(admin), ingest.IngestOptions())
    assert stats.produced == 200 and stats.produce_seconds > 0 and stats.bytes_serialized > 0 and cpu > 0
    assert ingest.run_naive(kafka.bootstrap, fresh(admin), corpus) > 0


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_loader_reads_the_same_tokens_every_way(kafka: ConnectionSettings, admin: TopicAdmin,
                                               tmp_path: Path) -> None:
    loader = bench("bench_loader")
    topic = fresh(admin, partitions=2)
    # Short documents: the bare read's clock starts after its first consume of up to 2,000 records.
    data = loader.produce(kafka.bootstrap, topic, 30_000, 8, tmp_path / "tokens.bin")
    assert data["tokens"] >= 30_000 and data["docs"] > 2000
    common = {"bootstrap": kafka.bootstrap, "topic": topic, "partitions": 2, "docs": data["docs"],
              "tokens": data["tokens"], "seq_len": 127, "batch": 4, "file": str(tmp_path / "tokens.bin")}
    reads = {"bare": common, "bare-batches": common, "kafeed": {**common, "workers": 0}, "memmap": common}
    for fmt in ("arrow", "parquet"):
        loader.write_files(tmp_path / "tokens.bin", tmp_path / fmt, 2, fmt)
        reads[f"files {fmt}"] = {**common, "dir": str(tmp_path / fmt), "workers": 0}
    # The comparisons' packages are in the `bench` extra: read with them where they are installed.
    if has("litdata"):
        loader.write_litdata(tmp_path / "tokens.bin", tmp_path / "litdata")
        reads["litdata"] = {**common, "dir": str(tmp_path / "litdata")}
    if has("streaming"):
        loader.write_mosaic(tmp_path / "tokens.bin", tmp_path / "mds", 128)
        reads["mosaic"] = {**common, "dir": str(tmp_path / "mds")}
    for name, params in reads.items():
        got = loader.READS[name.split()[0]](params)
        assert 0 < got["tokens"] <= data["tokens"] + data["docs"] and got["s"] > 0, (name, got)
    # kafeed's reads count the start too: its first batch, and every token from the build on.
    got = loader.READS["kafeed"]({**common, "workers": 0})
    assert 0 < got["first_s"] < got["every_s"] and got["every_tokens"] > got["tokens"], got
    assert got["every_cpu_s"] > got["cpu_s"] > 0, got  # building the loader and the first batch too
    # The first batch, shuffling, fresh and from a saved state (in this process: no workers).
    state = tmp_path / "state.json"
    loader.READS["save-state"]({**common, "shuffle": 16, "skip": 3, "state_file": str(state)})
    for extra in ({}, {"state_file": str(state)}):
        first = loader.READS["first-kafeed"]({**common, "workers": 0, "shuffle": 16, **extra})
        assert first["first_s"] > 0, first
    # Every read of the full run is a child process: one, through the same path.
    apart = loader.read_apart("bare", common)
    assert apart["tokens"] > 0 and apart["cpu_s"] >= 0, apart

    def row(start_rate: float, start_cpu: float) -> dict[str, float]:
        return {"tokens_s": 2.0, "cpu_ns_token": 1.0,
                "tokens_s_start": start_rate, "cpu_ns_token_start": start_cpu}

    rows = {"kafeed w0": row(1.0, 2.0), "kafeed wN": row(0.5, 3.0), "baseline w0": row(2.0, 1.0),
            "bare": {"tokens_s": 4.0, "cpu_ns_token": 0.5}}
    text, ratios = loader.table(rows, 2)
    assert ratios["kafeed/bare"] == {"tokens_s": 0.5, "cpu_ns_token": 2.0} and "kafeed/bare" in text
    assert ratios["workers/w0, start included"] == {"tokens_s_start": 0.5} and "w2/w0, start included" in text
    assert ratios["kafeed/baseline, start incl."] == {"tokens_s_start": 0.5, "cpu_ns_token_start": 2.0}


def test_mixture_reads_the_single_topic_and_the_mixture(kafka: ConnectionSettings, admin: TopicAdmin) -> None:
    mixture = bench("bench_mixture")
    prefix = f"smoke-{uuid.uuid4().hex[:8]}-"
    for name in mixture.SHARES:
        admin.create(plan_topic(prefix + name, brokers=1, partitions=2))
    admin.create(plan_topic(prefix + "all", brokers=1, partitions=2))
    mixture.produce(kafka, 60_000, 256, prefix=prefix)  # books: 23 documents, three windows of 2,049
    for name in ("single", "mixture"):
        rate, start, cpu_rate = mixture.read(mixture.dataset(name, kafka, prefix=prefix), 4098, batch_size=1)
        assert rate > 0 and start > 0 and cpu_rate > 0, name


def test_prepare_beside_the_tokenizer_alone(kafka: ConnectionSettings, admin: TopicAdmin) -> None:
    prepare = bench("bench_prepare")
    raw = fresh(admin)
    docs = prepare.texts(200, prepare.SHAKESPEARE)
    prepare.write_raw(kafka, raw, docs)
    (rd,) = prepare.measure(kafka, docs, 1, ["both"], prepare.TokenizerSettings(name="bytes"), batch_size=100,
                            linger_ms=5, compression="lz4", changelog_format="hash", raw=raw)
    run = rd["prepare"]["both"]
    assert run["balanced"] and run["documents_out"] == 200 and run["records_per_s"] > 0, rd
    assert rd["tokenizer_alone"]["tokens_per_s"] > 0, rd


def test_route_beside_the_bare_copy(kafka: ConnectionSettings, admin: TopicAdmin,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    route = bench("bench_route")
    prefix = f"smoke-{uuid.uuid4().hex[:8]}-"
    for name in ("raw", "copy", *route.parse_rules(route.RULES).topics):
        admin.create(plan_topic(prefix + name, brokers=1, partitions=1))
    records = route.docs(200)
    route.write(kafka, prefix + "raw", records)
    assert route.bare_copy(kafka, prefix + "raw", prefix + "copy", len(records), 100) > 0
    capsys.readouterr()
    route.route_only(kafka.bootstrap, f"{prefix}group", 100, prefix)  # what route_once runs in a child
    stats = json.loads(capsys.readouterr().out)
    assert stats["balanced"] and stats["records_in"] == 200 and stats["records_per_s"] > 0, stats


def test_tasks_one_worker_rate_and_latency(kafka: ConnectionSettings, tmp_path: Path) -> None:
    tasks = bench("bench_tasks")
    r = tasks.run(kafka.bootstrap, 1, 20, 2, tmp_path)
    assert r["tasks_per_s"] > 0 and 0 <= r["p50_ms"] <= r["p99_ms"], r


def test_tiered_reads_the_same_windows_from_kafka_and_from_the_table(kafka: ConnectionSettings,
                                                                     tmp_path: Path) -> None:
    tiered = bench("bench_tiered")
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    r = tiered.measure(kafka, tmp_path / "wh", topic, docs=100, tokens=64, partitions=1, seq_len=127,
                       batch=4, shuffle=10, repeat=1)
    assert r["tokens"] > 0 and r["kafka_tokens_per_s"] > 0 and r["table_tokens_per_s"] > 0, r


def test_archive_sink_beside_the_bare_consume(kafka: ConnectionSettings, admin: TopicAdmin, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    archive = bench("bench_archive")
    topic = fresh(admin)
    assert archive.produce(kafka, topic, 100, 64) > 0
    assert archive.bare_consume(kafka, topic, 1, 100) > 0
    from kafeed.archive.sink import ArchiveSink

    on_assign = ArchiveSink._on_assign
    capsys.readouterr()
    # What archive_once runs in a child (which costs an interpreter's start), here in process.
    archive.archive_only(kafka.bootstrap, "bench.smoke", str(tmp_path / "wh"), 32, topic)
    out = json.loads(capsys.readouterr().out)
    assert ArchiveSink._on_assign is on_assign  # the benchmark's timing hook is taken off
    assert out["rows"] == 100 and out["commits"] >= 1 and out["busy_s"] > 0, out


def test_secure_ingest_and_loader_rates_on_the_plaintext_side(kafka_cluster: LocalCluster,
                                                               tmp_path: Path) -> None:
    # The secured side's cluster (certificates, SCRAM users, ACLs) costs 20-30 s of CPU to start:
    # the full run's; the same functions run here on the session's plaintext cluster.
    secure = bench("bench_secure")
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    corpus = tmp_path / "corpus.jsonl"
    secure.make_corpus(corpus, 100)
    secure.setup(kafka_cluster, 4 * 2048, topic=f"{name}-tokens")
    assert secure.ingest_rate(kafka_cluster, corpus, 100, 0, raw=f"{name}-raw") > 0
    assert secure.loader_rate(kafka_cluster, topic=f"{name}-tokens") > 0


def test_train_start_marks_a_cli_run(kafka: ConnectionSettings, admin: TopicAdmin, tmp_path: Path) -> None:
    train_start = bench("bench_train_start")
    topic = fresh(admin, partitions=2)
    train_start.produce(kafka.bootstrap, topic, 20)
    marks = train_start.one_run(kafka.bootstrap, topic, tmp_path / "ck")
    assert marks["exit"] == 0, marks
    # The child's consumer hook found its first fetch, and the CLI's lines were recognised.
    assert marks["first_fetch_s"] > 0 and 0 < marks["ready_s"] < marks["first_step_s"], marks


def test_scaleout_bare_and_kafeed_readers(kafka: ConnectionSettings, admin: TopicAdmin,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    scaleout = bench("bench_scaleout")
    topic = fresh(admin, partitions=2)
    data = scaleout.produce(kafka.bootstrap, 20_000, 64, topic)
    bare = scaleout.side_by_side("bare", kafka.bootstrap, 2, 127, 4, topic=topic)
    assert bare["items"] == data["docs"] and bare["wall_s"] > 0, bare  # the bare readers count records
    # A kafeed reader as side_by_side's children run it, here in process (a child imports torch):
    # it waits for its go on stdin.
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.StringIO("go\n"))
    scaleout.reader("kafeed", kafka.bootstrap, 0, 1, 127, 4, topic)
    ready, result = capsys.readouterr().out.splitlines()[-2:]
    ours = json.loads(result)
    assert ready == "ready" and ours["items"] >= data["tokens"] - 4 * 128 and ours["t1"] >= ours["t0"], ours


def test_prepare_corpus_child_beside_the_tokenizer_alone(kafka: ConnectionSettings, admin: TopicAdmin,
                                                         tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    corpus = bench("bench_prepare_corpus")
    records, distinct = corpus.corpus(40, 0.25)
    assert distinct == 40 and len(records) == 50
    raw = fresh(admin, partitions=2)
    corpus.write_raw(kafka, raw, records)
    settings = corpus.TokenizerSettings(name="minilm")
    seconds, cpu, tokens = corpus.tokenizer_alone([corpus.normalize_text(t) for _, t in records],
                                                  settings, 20)
    # 2-4 KB each: past the 128-token truncation minilm's own tokenizer.json has
    assert seconds > 0 and cpu > 0 and tokens > 50 * 128
    capsys.readouterr()
    # What prepare_processes runs in each child, here in process on records already written.
    corpus.prepare_child({"bootstrap": kafka.bootstrap, "input": raw, "output": f"{raw}-tokens",
                          "group": f"{raw}-group", "idle_s": 1.0, "near": False, "batch_size": 20})
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["balanced"] and out["records_in"] == 50 and out["duplicates"] == 10, out
    assert out["documents_out"] == 40 and out["last"] >= out["first"] > 0, out
    tokenizer = corpus.untruncated_minilm(tmp_path)
    if has("datatrove"):  # the comparison, from the bench extra
        assert corpus.datatrove_run(records, tmp_path / "datatrove", tokenizer)["seconds"] > 0


def test_mirror_latency_probe_and_settings_on_the_session_broker(kafka: ConnectionSettings, admin: TopicAdmin,
                                                                 tmp_path: Path) -> None:
    # The mirror itself (a MirrorMaker 2 node: a JVM and a Connect group, tens of seconds) runs in
    # tests/integration/test_mirror.py; here the benchmark's own parts around it, on one cluster.
    mirror = bench("bench_mirror")
    from kafeed.mirror import run_mirror
    from kafeed.mirror.config import load_mirror_settings

    topic = fresh(admin)
    direct = mirror.latencies(kafka, topic, kafka, topic, 50, 0.4, 64)
    assert direct.size == 20 and (direct >= 0).all(), direct
    # A site is another cluster than the target (refused otherwise); settings are not connected.
    train = type("Site", (), {"bootstrap": kafka.bootstrap})()
    site = type("Site", (), {"bootstrap": "127.0.0.1:1"})()
    settings = mirror.mirror_settings({"train": train, "site-a": site}, ("site-a",), topic,
                                      tmp_path / "mm")
    assert settings.sites[0].alias == "site-a" and settings.target.bootstrap == kafka.bootstrap
    # The calls timed_mirror and the latency run make (run_mirror's own test runs it).
    inspect.signature(run_mirror).bind(settings, until_caught_up=True)
    inspect.signature(run_mirror).bind(settings=settings, stop_event=threading.Event())
    # bench_mirror_latency hands the same settings to `kafeed mirror run --config` as TOML.
    latency = bench("bench_mirror_latency")
    (tmp_path / "mirror.toml").write_text(latency.mirror_toml(settings))
    assert load_mirror_settings(tmp_path / "mirror.toml") == settings


def test_federate_transport_round_trips_a_blob_of_several_chunks(kafka: ConnectionSettings,
                                                                 admin: TopicAdmin) -> None:
    r = bench("bench_federate_transport").run(kafka, fresh(admin), 1.5)
    assert r["chunks"] == r["expected_chunks"] >= 3 and r["round_trip_mb_s"] > 0, r


# 5-6 s warm (topics, loader opens, group joins, one round), more in a worker that has not yet
# imported torch._dynamo: under -m slow, to keep the default run's budget; the in-process rounds
# of the same benchmark run in the default suite (tests/unit/test_bench_smoke.py).
@pytest.mark.slow
def test_federated_rounds_over_the_broker_train_the_global_model(kafka: ConnectionSettings,
                                                                 tmp_path: Path) -> None:
    federated = bench("bench_federated")
    setup = federated.BrokerSetup(rounds=1, local_steps=2, docs_per_site=40, eval_batches=2)
    got = federated.compare_over_broker(kafka.bootstrap, setup, None, tmp_path)
    core = got["kafeed"]
    assert got["flower"] is None and len(core["round_seconds"]) == 1, core
    assert core["update_bytes"][0] > 4 * core["params"], core  # float32 deltas, chunked
    assert core["loss"] < core["initial_loss"], core
