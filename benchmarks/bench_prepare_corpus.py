"""Prepare on realistic documents: kafeed prepare vs the tokenizer alone vs datatrove, side by side.

The corpus: ``--docs`` documents of 2-4 KB, each a random draw of tinyshakespeare
paragraphs under a unique first line, plus ``--dup-share`` of them again as exact
copies under new ids and keys (so they land in other partitions). Each round runs,
on the same texts, with one process each and the BERT WordPiece tokenizer (minilm,
truncation off everywhere):

1. the tokenizer alone: ``encode_batch`` over the normalized texts in memory, timed
   before and after the prepare runs of the round (both counted);
2. ``kafeed prepare`` end to end over a local broker: decode, normalize, filters,
   route by content hash, global exact dedup, tokenize, exactly-once commits
   (busy time: the first record any process consumed to the last commit of any);
   one process, and ``--processes`` (default 2) in one group, each a ``kafeed
   prepare`` process of its own; the processes join their groups before the corpus
   is written, so the records are shared out from the start;
3. the same with ``--near-dedup`` (``--near``);
   with ``--before-src DIR`` also one process running the code under ``DIR`` (another
   checkout's ``src/``), to compare two versions of prepare in the same run;
4. datatrove (``pip install 'kafeed[bench]'``): ``JsonlReader`` → Gopher repetition
   and quality filters → C4 quality filter → ``DocumentTokenizer`` writing local
   files, through its ``LocalPipelineExecutor`` (wall time of ``run()``; no dedup);
   ``--datatrove-docs N`` runs it on the first N records of the corpus only (its filters
   take ~20-40 ms per document here: the whole corpus would make one run many minutes);
5. datatrove reader → tokenizer only, to show what its filters cost.

Documents per CPU second (prepare's process from just before its first record to its
last commit, all its threads; the broker's CPU not counted) are printed beside the
documents per second: on a host shared with other work they move far less than wall
time.

Not a test.

    PYTHONPATH=src python benchmarks/bench_prepare_corpus.py --docs 6000 --rounds 2 --near
    PYTHONPATH=src python benchmarks/bench_prepare_corpus.py --docs 1500 --rounds 2 --processes 1 \\
        --datatrove-docs 600 --before-src /path/to/older/checkout/src
    PYTHONPATH=src python benchmarks/bench_prepare_corpus.py --docs 1000 --rounds 1 --no-datatrove \\
        --before-src /path/to/older/checkout/src
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.prepare import PrepareSettings, TokenizerSettings, load_tokenizer, normalize_text
from kafeed.prepare.tokenize import minilm_tokenizer_path
from kafeed.schema import make_sample
from kafeed.topics import TopicAdmin, plan_topic

SHAKESPEARE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


def corpus(n: int, dup_share: float, seed: int = 0) -> tuple[list[tuple[str, str]], int]:
    """(id, text) records: ``n`` distinct documents of 2-4 KB and copies under new ids; and n."""
    if SHAKESPEARE.exists():
        text = SHAKESPEARE.read_text()
    else:  # the copy bundled in the package
        import gzip
        from importlib import resources

        text = gzip.decompress(
            resources.files("kafeed.data").joinpath("tinyshakespeare.txt.gz").read_bytes()).decode()
    paras = [p for p in text.split("\n\n") if len(p.split()) >= 3]
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        size, parts = rng.randint(2048, 4096), [f"Document {i} of the collection."]
        while sum(map(len, parts)) < size:
            parts.append(rng.choice(paras))
        docs.append("\n\n".join(parts)[:size])
    records = [(uuid.UUID(int=rng.getrandbits(128)).hex, d) for d in docs]
    copies = int(n * dup_share)
    records += [(uuid.UUID(int=rng.getrandbits(128)).hex, rng.choice(docs)) for _ in range(copies)]
    rng.shuffle(records)
    return records, n


def write_raw(conn: ConnectionSettings, topic: str, records: list[tuple[str, str]]) -> None:
    from confluent_kafka import Producer

    producer = Producer(conn.client_config() | {
        "linger.ms": 50, "compression.type": "lz4", "enable.idempotence": True,
        "queue.buffering.max.messages": 1_000_000, "logger": logging.getLogger("kafeed.librdkafka")})
    for i, (doc_id, text) in enumerate(records):
        producer.produce(topic, key=doc_id.encode(),
                         value=make_sample(text, id=doc_id, source="bench").SerializeToString())
        if i % 5_000 == 0:
            producer.poll(0)
    producer.flush(120)


def tokenizer_alone(texts: list[str], settings: TokenizerSettings, chunk: int) -> tuple[float, float, int]:
    """Seconds, CPU seconds (its threads included) and tokens of ``encode_batch`` over ``texts``."""
    tok = load_tokenizer(settings)
    start, cpu = time.perf_counter(), time.process_time()
    tokens = 0
    for i in range(0, len(texts), chunk):
        tokens += int(tok.encode_batch(texts[i:i + chunk]).ids.size)
    return time.perf_counter() - start, time.process_time() - cpu, tokens


def untruncated_minilm(directory: Path) -> Path:
    """minilm's tokenizer.json with its 128-token truncation removed, as kafeed loads it."""
    spec = json.loads(minilm_tokenizer_path().read_text())
    spec["truncation"] = None
    spec["padding"] = None
    path = directory / "tokenizer.json"
    path.write_text(json.dumps(spec))
    return path


def datatrove_run(records: list[tuple[str, str]], work: Path, tokenizer: Path, *,
                  filters: bool = True) -> dict[str, Any]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.filters import C4QualityFilter, GopherQualityFilter, GopherRepetitionFilter
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    data = work / "in"
    data.mkdir(parents=True)
    with (data / "part.jsonl").open("w") as f:
        for doc_id, text in records:
            f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    steps: list[Any] = [JsonlReader(str(data))]
    if filters:
        steps += [GopherRepetitionFilter(), GopherQualityFilter(),
                  C4QualityFilter(filter_no_terminal_punct=False)]
    steps.append(DocumentTokenizer(str(work / "out"), tokenizer_name_or_path=str(tokenizer)))
    executor = LocalPipelineExecutor(pipeline=steps, tasks=1, workers=1, logging_dir=str(work / "logs"))
    start = time.perf_counter()
    executor.run()
    return {"seconds": time.perf_counter() - start}


def prepare_child(spec: dict[str, Any]) -> None:
    """One prepare process (``--child``): runs until caught up, prints its span and counts as JSON."""
    if spec.get("cores"):
        os.sched_setaffinity(0, spec["cores"])
    from kafeed.prepare.processor import GlobalPrepare

    settings = PrepareSettings(
        input=spec["input"], output=spec["output"], group=spec["group"], idle_s=spec["idle_s"],
        tokenizer=TokenizerSettings(name="minilm"), dedup={"near": spec["near"]},  # type: ignore[arg-type]
        kafka={"batch_size": spec["batch_size"]})  # type: ignore[arg-type]
    cpu = {"start": time.process_time(), "end": 0.0, "last": None}

    def progress(_: object) -> None:
        # CPU time of this process (all threads, the tokenizer's included) from just before
        # the first record to the last commit: sampled at each step's progress callback.
        now = time.process_time()
        if run.route.counters.first_data is None:
            cpu["start"] = now
        if run.dedup.counters.last_commit != cpu["last"]:
            cpu["end"], cpu["last"] = now, run.dedup.counters.last_commit

    run = GlobalPrepare(settings, ConnectionSettings(bootstrap=spec["bootstrap"]), on_progress=progress)
    st = run.run(until_caught_up=True)
    print(json.dumps({"first": run.route.counters.first_data, "last": run.dedup.counters.last_commit,
                      "cpu_s": cpu["end"] - cpu["start"],
                      "records_in": st.records_in, "documents_out": st.documents_out,
                      "duplicates": st.duplicates, "near_duplicates": st.near_duplicates,
                      "balanced": st.balanced}), flush=True)


def group_members(conn: ConnectionSettings, groups: list[str]) -> int:
    """The smallest number of members with partitions among ``groups``."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(conn.client_config())
    fewest = 1 << 30
    for future in admin.describe_consumer_groups(groups, request_timeout=10).values():
        try:
            desc = future.result()
        except Exception:
            return 0
        fewest = min(fewest, sum(1 for m in desc.members if m.assignment.topic_partitions))
    return fewest


def prepare_processes(conn: ConnectionSettings, records: list[tuple[str, str]], *, name: str,
                      processes: int, partitions: int, batch_size: int, near: bool = False,
                      src: str | None = None, cores_per_process: int | None = None) -> dict[str, Any]:
    """``processes`` prepare processes in one group over a fresh topic written once they joined.

    With ``cores_per_process`` K, process i runs on cores iK .. iK+K-1 only (modulo the
    host's), with K tokenizer threads.
    """
    topic, group = f"raw-{name}", f"bench-{name}"
    TopicAdmin(conn).create(plan_topic(topic, brokers=1, partitions=partitions, compression="lz4"))
    spec = {"bootstrap": conn.bootstrap, "input": topic, "output": f"tokens-{name}", "group": group,
            "idle_s": 15.0, "near": near, "batch_size": batch_size}
    env = os.environ | {"PYTHONPATH": os.path.abspath(src or "src")}
    specs = [spec] * processes
    if cores_per_process:
        env |= {"RAYON_RS_NUM_CPUS": str(cores_per_process), "RAYON_NUM_THREADS": str(cores_per_process)}
        host = os.cpu_count() or 1
        specs = [spec | {"cores": [(i * cores_per_process + c) % host for c in range(cores_per_process)]}
                 for i in range(processes)]
    children = [subprocess.Popen([sys.executable, __file__, "--child", json.dumps(s)], env=env,
                                 stdout=subprocess.PIPE, text=True) for s in specs]
    try:
        deadline = time.monotonic() + 60
        while group_members(conn, [group, f"{group}.dedup"]) < min(processes, partitions):
            if time.monotonic() > deadline or any(c.poll() is not None for c in children):
                raise RuntimeError(f"{name}: the prepare processes did not join their groups")
            time.sleep(0.2)
        write_raw(conn, topic, records)
        outs = [json.loads(c.communicate(timeout=300)[0].strip().splitlines()[-1]) for c in children]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
    span = max(o["last"] for o in outs if o["last"]) - min(o["first"] for o in outs if o["first"])
    total = sum(o["records_in"] for o in outs)
    cpu = sum(o["cpu_s"] for o in outs)
    return {"docs_per_s": total / span, "busy_s": span, "processes": processes,
            "docs_per_cpu_s": total / cpu, "cpu_s": cpu,
            "records_in": total, "documents_out": sum(o["documents_out"] for o in outs),
            "duplicates": sum(o["duplicates"] for o in outs),
            "near_duplicates": sum(o["near_duplicates"] for o in outs),
            "balanced": all(o["balanced"] for o in outs)}


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)
        prepare_child(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=6000, help="distinct documents")
    ap.add_argument("--dup-share", type=float, default=0.1, help="copies under new ids, as a share of --docs")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--near", action="store_true", help="also run prepare with --near-dedup")
    ap.add_argument("--processes", type=int, default=2, help="prepare processes in one group, beside one")
    ap.add_argument("--cores-per-process", type=int,
                    help="pin the prepare runs: each process on its own K cores, K tokenizer threads "
                         "(scaling with cores: --processes N against one process, both pinned)")
    ap.add_argument("--before-src", help="another checkout's src/: its prepare runs too, one process")
    ap.add_argument("--no-datatrove", action="store_true")
    ap.add_argument("--datatrove-docs", type=int, help="datatrove on the first N records only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)

    records, distinct = corpus(args.docs, args.dup_share)
    normalized = [normalize_text(t) for _, t in records]
    tok_settings = TokenizerSettings(name="minilm")
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
        tokenizer_json = untruncated_minilm(Path(tmp))
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            # The broker's first transactions and fetches run cold (JIT, page cache): a short
            # unmeasured run first, so that the run measured first is not the slow one.
            prepare_processes(conn, records[:200], name="warmup", processes=1,
                              partitions=args.partitions, batch_size=args.batch_size)
            for r in range(args.rounds):
                row: dict[str, Any] = {}
                seconds, cpu, tokens = tokenizer_alone(normalized, tok_settings, 500)
                runs: list[tuple[str, int, bool, str | None]] = [("prepare", 1, False, None)]
                if args.before_src:
                    runs.append(("prepare_before", 1, False, args.before_src))
                if args.processes > 1:
                    runs.append((f"prepare_{args.processes}p", args.processes, False, None))
                if args.near:
                    runs.append(("prepare_near", 1, True, None))
                for name, n, near, src in runs:
                    row[name] = prepare_processes(
                        conn, records, name=f"{name}-{r}", processes=n, partitions=args.partitions,
                        batch_size=args.batch_size, near=near, src=src,
                        cores_per_process=args.cores_per_process)
                # The tokenizer alone is timed before and after the prepare runs (the sum of
                # both), so a change of the host's load during the round weighs on both sides.
                after = tokenizer_alone(normalized, tok_settings, 500)
                seconds, cpu, tokens = seconds + after[0], cpu + after[1], tokens + after[2]
                docs = 2 * len(records)
                row["tokenizer"] = {"docs_per_s": docs / seconds, "tokens_per_s": tokens / seconds,
                                    "docs_per_cpu_s": docs / cpu}
                if not args.no_datatrove:
                    subset = records[:args.datatrove_docs] if args.datatrove_docs else records
                    dt = datatrove_run(subset, Path(tmp) / f"datatrove-{r}", tokenizer_json)
                    row["datatrove"] = {"docs_per_s": len(subset) / dt["seconds"], "seconds": dt["seconds"],
                                        "records": len(subset)}
                    dt = datatrove_run(subset, Path(tmp) / f"datatrove-tok-{r}", tokenizer_json,
                                       filters=False)
                    row["datatrove_tokenize_only"] = {"docs_per_s": len(subset) / dt["seconds"],
                                                      "seconds": dt["seconds"], "records": len(subset)}
                rounds.append(row)
                print(json.dumps({"round": r, **row}, default=round), flush=True)
        finally:
            cluster.stop()
    summary: dict[str, Any] = {"records": len(records), "distinct": distinct}
    for key in rounds[0]:
            summary[f"{key}_docs_per_s"] = round(statistics.median(x[key]["docs_per_s"] for x in rounds))
    for key, first in rounds[0].items():
        if "docs_per_cpu_s" in first:
            summary[f"{key}_docs_per_cpu_s"] = round(
                statistics.median(x[key]["docs_per_cpu_s"] for x in rounds))
    p = summary["prepare_docs_per_s"]
    summary["prepare_vs_tokenizer_cpu"] = round(
        summary["prepare_docs_per_cpu_s"] / summary["tokenizer_docs_per_cpu_s"], 3)
    summary["prepare_vs_tokenizer"] = round(p / summary["tokenizer_docs_per_s"], 3)
    if "datatrove_docs_per_s" in summary:
        summary["prepare_vs_datatrove"] = round(p / summary["datatrove_docs_per_s"], 3)
    if "prepare_before_docs_per_s" in summary:
        summary["before_vs_tokenizer"] = round(
            summary["prepare_before_docs_per_s"] / summary["tokenizer_docs_per_s"], 3)
        summary["after_vs_before"] = round(p / summary["prepare_before_docs_per_s"], 3)
    if f"prepare_{args.processes}p_docs_per_s" in summary:
        summary[f"{args.processes}p_vs_1p"] = round(summary[f"prepare_{args.processes}p_docs_per_s"] / p, 3)
    if "prepare_near_docs_per_s" in summary:
        summary["near_vs_prepare"] = round(summary["prepare_near_docs_per_s"] / p, 3)
    print(json.dumps(summary, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
