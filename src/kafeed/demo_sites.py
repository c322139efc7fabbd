"""Two sites feeding one training run, on one machine: what `make demo-sites` and `kafeed demo --sites` run.

Start (or reuse) two site clusters and the training cluster; ingest half the corpus at
each site; mirror both sites into the training cluster with MirrorMaker 2 until caught
up (`site-a.demo-<run>.raw`, `site-b.demo-<run>.raw`); prepare each site's topic into its
own token topic; train the small GPT on a mixture weighting the two sites; and trace the
checkpoint's documents back to their site records (docs/federation.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafeed.broker import LocalCluster, free_port_block
from kafeed.broker.cluster import default_data_dir
from kafeed.config import ConnectionSettings
from kafeed.demo import DemoOptions, _clear_old_demo_topics, bundled_corpus
from kafeed.topics import TopicAdmin, plan_topic

SITES = ("site-a", "site-b")


def _site_cluster(name: str) -> LocalCluster:
    data_dir = default_data_dir().parent / f"demo-{name}"
    # A new site cluster gets free ports; an existing one keeps the ports it was created with.
    port = None if data_dir.exists() else free_port_block(2)
    return LocalCluster(data_dir, port=port, heap_mb=384, jit="quick")


def _halves(corpus: Path, run_dir: Path) -> list[Path]:
    """The corpus split at a paragraph boundary, one half per site."""
    paragraphs = corpus.read_text(errors="replace").split("\n\n")
    middle = len(paragraphs) // 2
    out = []
    for site, part in zip(SITES, (paragraphs[:middle], paragraphs[middle:]), strict=True):
        path = run_dir / f"corpus-{site}.txt"
        path.write_text("\n\n".join(part))
        out.append(path)
    return out


def run_sites_demo(options: DemoOptions, *, say: Callable[[str], None]) -> dict[str, Any]:
    from kafeed.ingest import IngestOptions
    from kafeed.ingest.run import ingest
    from kafeed.mirror import ClusterSettings, MirrorSettings, SiteSettings, run_mirror
    from kafeed.mirror.lineage import ranges_of, site_lineage
    from kafeed.prepare import PrepareSettings, TokenizerSettings, run_prepare
    from kafeed.train.gpt import train_gpt
    from kafeed.train.lineage import checkpoint_lineage
    from kafeed.train.options import TrainOptions

    t0 = time.monotonic()
    train = LocalCluster(options.data_dir, port=options.port, jit="quick")
    sites = {name: _site_cluster(name) for name in SITES}
    for name, cluster in (("train", train), *sites.items()):
        started = cluster.start()
        say(f"[1/6] Kafka {name} {'started' if started else 'already running'} at {cluster.bootstrap}")
    conn = ConnectionSettings(bootstrap=train.bootstrap)
    site_conns = {name: ConnectionSettings(bootstrap=c.bootstrap) for name, c in sites.items()}

    run = time.strftime("%Y%m%d-%H%M%S")
    run_dir = (options.runs_dir / f"sites-{run}").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    raw = f"demo-{run}.raw"
    target_admin = TopicAdmin(conn)
    _clear_old_demo_topics(target_admin, run)
    mirrored_before = tuple(f"{s}.demo-" for s in SITES)  # earlier runs' mirrored topics
    for old in [t for t in target_admin.list() if t.startswith(mirrored_before) and run not in t]:
        target_admin.delete(old)
    sources = [Path(p) for p in options.data] or [bundled_corpus(run_dir / "corpus.txt")]
    halves = _halves(sources[0], run_dir) if len(sources) == 1 else [sources[0], sources[1]]
    ingested = {}
    for (name, site), half in zip(site_conns.items(), halves, strict=False):
        admin = TopicAdmin(site)
        _clear_old_demo_topics(admin, run)
        admin.create(plan_topic(raw, brokers=admin.broker_count(), partitions=2))
        ing = ingest([str(half)], topic=raw, settings=site,
                     options=IngestOptions(text_mode="paragraph", job_id=f"demo-{run}-{name}"))
        ingested[name] = ing.records_in
    say("[2/6] Ingested at the sites: "
        + ", ".join(f"{n} {c:,} records into {raw}" for n, c in ingested.items()))

    mirror = MirrorSettings(
        target=ClusterSettings(alias="train", bootstrap=train.bootstrap),
        sites=tuple(SiteSettings(alias=name, bootstrap=c.bootstrap, topics=raw.replace(".", r"\."))
                    for name, c in sites.items()),
        work_dir=run_dir / "mirror", rebalance_delay_s=0, heap_mb=320)
    m0 = time.monotonic()
    mirrored = run_mirror(mirror, until_caught_up=True, jit="quick")
    say(f"[3/6] Mirrored {' and '.join(SITES)} into {train.bootstrap} up to their ends "
        f"({mirrored.records:,} offsets) as {', '.join(f'{s}.{raw}' for s in SITES)} "
        f"in {time.monotonic() - m0:.1f}s (exactly once)")

    tokens = {name: f"demo-{run}.{name}.tokens" for name in SITES}
    prepared = {}
    for name in SITES:
        prep = run_prepare(PrepareSettings(input=(f"{name}.{raw}",), output=tokens[name],
                                           group=f"demo-{run}-{name}-prepare",
                                           tokenizer=TokenizerSettings(name=options.tokenizer)),
                           conn, until_caught_up=True)
        prepared[name] = prep.documents_out
    say("[4/6] Prepared " + ", ".join(f"{name}.{raw} -> {tokens[name]}: {n:,} documents"
                                       for name, n in prepared.items()))

    mix = {tokens["site-a"]: 0.7, tokens["site-b"]: 0.3}
    say(f"[5/6] Training the small GPT for {options.steps} steps on a mixture: "
        + ", ".join(f"{t} {w:.0%}" for t, w in mix.items()))
    result, _ = train_gpt(
        TrainOptions(mix=mix, steps=options.steps, batch_size=options.batch_size, seq_len=options.seq_len,
                     tokenizer=options.tokenizer, checkpoint_dir=run_dir / "checkpoints",
                     checkpoint_every=100, group=f"demo-{run}-train", run_dir=run_dir, log_every=25),
        conn, progress=say)
    lineage = checkpoint_lineage(run_dir / "checkpoints")
    traced = site_lineage(conn, ranges_of(lineage["partitions"])).as_dict()
    first = traced["documents"][0] if traced["documents"] else None
    say(f"[6/6] The checkpoint's {lineage['documents']:,} documents trace back to "
        + ", ".join(f"{s} {n:,}" for s, n in traced["sites"].items())
        + (f"; e.g. {first['id'][:12]}… is {first['site']}/{first['topic']}[{first['partition']}]"
           f"@{first['offset']}" if first else ""))
    return {
        "bootstrap": train.bootstrap,
        "sites": {name: c.bootstrap for name, c in sites.items()},
        "run_dir": str(run_dir),
        "ingested": ingested,
        "mirrored_offsets": mirrored.records,
        "documents_out": prepared,
        "mix": mix,
        "steps": result.steps,
        "final_loss": None if result.final_loss is None else round(result.final_loss, 4),
        "checkpoint": result.checkpoint,
        "lineage_documents": lineage["documents"],
        "documents_per_site": traced["sites"],
        "seconds": round(time.monotonic() - t0, 1),
    }
