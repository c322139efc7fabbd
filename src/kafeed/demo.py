"""The main job, end to end on one machine: what `make demo` and `kafeed demo` run.

Start (or reuse) a local cluster; plan and create this run's topics; ingest the
corpus; prepare it (normalize, filter, dedup, tokenize) exactly once until caught
up; train the small GPT on the packed token stream with checkpoints; summarize.

The bundled corpus is Tiny Shakespeare (public domain, about 1.1 MB, shipped
gzipped inside the package), one document per blank-line paragraph. ``data=``
runs the same on the user's own files. Each run gets its own topics
(``demo-<run>.raw`` / ``.tokens``) and directory (``runs/demo/<run>``), and removes
the topics of earlier demo runs, so running it twice works.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kafeed.broker import LocalCluster
from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin, plan_topic

CORPUS = "tinyshakespeare.txt.gz"


class DemoOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: Path | None = None
    port: int | None = Field(default=None, ge=1024, le=65534)
    data: tuple[Path, ...] = ()
    runs_dir: Path = Path("runs/demo")
    steps: int = Field(default=300, ge=1)
    batch_size: int = Field(default=8, ge=1)
    seq_len: int = Field(default=128, ge=8)
    tokenizer: str = "bytes"


def bundled_corpus(dest: Path) -> Path:
    """Write the bundled corpus to ``dest`` (plain text) and return it."""
    with resources.files("kafeed.data").joinpath(CORPUS).open("rb") as fh, gzip.open(fh) as src:
        dest.write_bytes(src.read())
    return dest


def _clear_old_demo_topics(admin: TopicAdmin, keep_prefix: str) -> list[str]:
    old = [t for t in admin.list(internal=True)
           if (t.startswith("demo-") or t.startswith("__kafeed_dedup_demo-")) and keep_prefix not in t]
    for topic in old:
        admin.delete(topic)
    return old


def run_demo(options: DemoOptions, *, say: Callable[[str], None]) -> dict[str, Any]:
    from kafeed.ingest import IngestOptions
    from kafeed.ingest.run import ingest
    from kafeed.prepare import PrepareSettings, TokenizerSettings, run_prepare
    from kafeed.train.gpt import train_gpt
    from kafeed.train.lineage import checkpoint_lineage
    from kafeed.train.options import TrainOptions

    t0 = time.monotonic()
    # A demo cluster lives for minutes beside a trainer on the same cores: the quick JIT.
    cluster = LocalCluster(options.data_dir, port=options.port, jit="quick")
    started = cluster.start()
    say(f"[1/5] Kafka {'started' if started else 'already running'} at {cluster.bootstrap}")
    conn = ConnectionSettings(bootstrap=cluster.bootstrap)
    admin = TopicAdmin(conn)

    run = time.strftime("%Y%m%d-%H%M%S")
    run_dir = (options.runs_dir / run).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    raw, tokens = f"demo-{run}.raw", f"demo-{run}.tokens"
    removed = _clear_old_demo_topics(admin, run)
    brokers = admin.broker_count()
    for name in (raw, tokens):
        admin.create(plan_topic(name, brokers=brokers, throughput_mbps=30, per_partition_mbps=10))
    say(f"[2/5] Topics {raw} and {tokens}: 3 partitions each (30 MB/s at 10 MB/s per partition)"
        + (f"; removed {len(removed)} topic(s) of earlier demo runs" if removed else ""))

    sources = [str(p) for p in options.data] or [str(bundled_corpus(run_dir / "corpus.txt"))]
    ing = ingest(sources, topic=raw, settings=conn,
                 options=IngestOptions(text_mode="paragraph", job_id=f"demo-{run}"))
    say(f"[3/5] Ingested {ing.records_in:,} records ({ing.produced:,} produced, "
        f"{ing.dead_lettered:,} dead-lettered) in {ing.seconds:.1f}s")

    prep = run_prepare(
        PrepareSettings(input=(raw,), output=tokens, group=f"demo-{run}-prepare",
                        tokenizer=TokenizerSettings(name=options.tokenizer)),
        conn, until_caught_up=True)
    say(f"[4/5] Prepared {prep.records_in:,} records: {prep.documents_out:,} documents, "
        f"{prep.tokens_out:,} tokens ({prep.filtered_total:,} filtered, {prep.duplicates:,} duplicates, "
        f"{prep.dead_lettered:,} dead-lettered)")

    say(f"[5/5] Training the small GPT for {options.steps} steps on {tokens}")
    result, describe = train_gpt(
        TrainOptions(topic=tokens, steps=options.steps, batch_size=options.batch_size,
                     seq_len=options.seq_len, tokenizer=options.tokenizer,
                     checkpoint_dir=run_dir / "checkpoints", checkpoint_every=100,
                     group=f"demo-{run}-train", run_dir=run_dir, log_every=25),
        conn, progress=say)
    lineage = checkpoint_lineage(run_dir / "checkpoints")
    return {
        "bootstrap": cluster.bootstrap,
        "run_dir": str(run_dir),
        "records_ingested": ing.records_in,
        "ingest_dead_lettered": ing.dead_lettered,
        "prepare_records_in": prep.records_in,
        "documents_out": prep.documents_out,
        "filtered": prep.filtered_total,
        "filtered_by": dict(sorted(prep.filtered.items())),
        "duplicates": prep.duplicates,
        "prepare_dead_lettered": prep.dead_lettered,
        "prepare_balanced": prep.balanced,
        "tokens_out": prep.tokens_out,
        "steps": result.steps,
        "tokens_trained": result.tokens,
        "tokens_per_s": round(result.tokens_per_second, 1),
        "data_wait_share": round(result.data_wait_share, 4),
        "first_loss": None if result.first_loss is None else round(result.first_loss, 4),
        "final_loss": None if result.final_loss is None else round(result.final_loss, 4),
        "checkpoint": result.checkpoint,
        "lineage_documents": lineage["documents"],
        "lineage_partitions": {k: f"{len(v['ranges'])} offset range(s) from {v['start']}, next {v['next']}"
                               for k, v in lineage["partitions"].items()},
        "parameters": describe["parameters"],
        "seconds": round(time.monotonic() - t0, 1),
    }
