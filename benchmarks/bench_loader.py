"""Loader throughput: kafeed vs a bare consume loop, litdata and Mosaic, in one run (a script, not a test).

Starts a LocalCluster on free ports in a temp dir, produces ``--tokens`` token ids as
TokenizedDocument records, writes the same token stream (each document followed by EOS)
as local shards for litdata (``TokensLoader`` chunks) and MosaicML streaming (MDS shards of
2,049-token windows), then measures, each read in a process of its own:

- bare:          a confluent-kafka consume(num_messages=...) loop with the loader's fetch
                 settings that only touches each message (the Python ceiling);
- bare batches:  the same loop making kafeed's batches with the least work: each record
                 parsed, its tokens as an array, cut into the same int64 windows; no order,
                 state or delivery tracking (what exactness costs is kafeed's row less this);
- kafeed w0/wN:  StreamLoader(KafkaTokenDataset) yielding (B, seq_len+1) int64 batches,
                 num_workers=0 and ``--workers``;
- baseline w0/wN: the same with the kafeed of ``--baseline-src`` (another commit's ``src/``,
                 e.g. ``git worktree add /tmp/base <rev>``), so before/after are one run;
                 and ``baseline files arrow``, the files arrow read below with it;
- files arrow / files parquet: StreamLoader(FileTokenDataset) over the same documents as
                 Arrow IPC or Parquet files (a row per document, one file per partition),
                 num_workers=0: the files source against litdata and Mosaic on local shards;
- litdata:       ``StreamingDataset(item_loader=TokensLoader(block_size=seq_len+1))`` in a
                 DataLoader (batch ``--batch``, num_workers=0), batches made int64;
- mosaic:        ``streaming.StreamingDataset`` over the MDS shards, the same way;
- memmap:        ``np.memmap`` of the token file cut into the same batches (the ceiling).

And, what a user waits for first, each in a fresh process after its imports: the seconds
from building the loader to its **first batch**, the shuffle buffer on (``--shuffle``):
kafeed with no workers and with ``--workers``, fresh and resumed from a state saved 20
batches in (the baseline's too), beside litdata's ``StreamingDataset(shuffle=True)`` in a
DataLoader with as many workers. The kafeed and files rows also give tokens/s and CPU ns per
token **start included** (every token over the seconds, and the CPU seconds of the process and
its workers, from building the loader to its last batch): a fetch made before the first batch
is in these and not in the rate from the first batch on. Their ``wN/w0`` ratio is what two
workers bring to a whole read.

Each row is the best of ``--repeat`` interleaved runs (the machine may be shared): tokens/s
over the whole read, and CPU ns per token: the CPU time of the reading process (every
thread, librdkafka's included) and of its DataLoader workers, per token handed out. The
CPU figure moves less with the machine's load than the wall-clock one. Each read's process
imports what it uses and freezes it out of the cyclic collector before it starts, as
kafeed's trainer does (``settle``), so the first full pass after importing torch is not in
any read; the full passes inside a read are counted and shown. Prints one table
of rates and ratios; ``--json FILE`` writes the same as JSON.

    PYTHONPATH=src python benchmarks/bench_loader.py --tokens 20_000_000 --baseline-src /tmp/base/src
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

QUIET = logging.getLogger("kafeed.librdkafka")
EOS = 0
TICK = os.sysconf("SC_CLK_TCK")


# -- data -------------------------------------------------------------------------------------
def produce(bootstrap: str, topic: str, tokens: int, doc_tokens: int, token_file: Path) -> dict[str, Any]:
    from confluent_kafka import Producer

    from kafeed.schema import make_document

    rng = np.random.default_rng(0)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "logger": QUIET})
    made = docs = payload = 0
    lengths: list[int] = []
    pool = rng.integers(1, 50000, size=doc_tokens * 4, dtype=np.uint16)
    eos = np.array([EOS], dtype=np.uint16).tobytes()
    with token_file.open("wb") as out:
        while made < tokens:
            n = int(rng.integers(doc_tokens // 2, doc_tokens * 3 // 2))
            start = int(rng.integers(0, len(pool) - n))
            ids = pool[start : start + n]
            value = make_document(ids, id=f"d{docs}", vocab_size=50000).SerializeToString()
            while True:
                try:
                    p.produce(topic, key=f"d{docs}".encode(), value=value)
                    break
                except BufferError:
                    p.poll(0.1)
            out.write(ids.tobytes())
            out.write(eos)
            lengths.append(n)
            payload += len(value)
            made += n
            docs += 1
            if docs % 500 == 0:
                p.poll(0)
    p.flush(120)
    np.save(token_file.with_suffix(".lengths.npy"), np.array(lengths, dtype=np.int64))
    return {"tokens": made, "docs": docs, "bytes": payload}


def write_files(token_file: Path, out: Path, shards: int, fmt: str) -> None:
    """The same documents as ``shards`` Arrow IPC or Parquet files, a row per document (its ids,
    without the EOS the stream file has after each), as ``kafeed.FileTokenDataset`` reads them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = np.fromfile(token_file, dtype=np.uint16)
    lengths = np.load(token_file.with_suffix(".lengths.npy"))
    starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]])  # each document is followed by an EOS
    out.mkdir()
    for shard, rows in enumerate(np.array_split(np.arange(len(lengths)), shards)):
        values = np.concatenate([ids[starts[r]: starts[r] + lengths[r]] for r in rows]).astype(np.int32)
        offsets = np.concatenate([[0], np.cumsum(lengths[rows])]).astype(np.int32)
        table = pa.table({"input_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))})
        if fmt == "arrow":
            with pa.ipc.new_file(str(out / f"part-{shard:03d}.arrow"), table.schema) as w:
                for batch in table.to_batches(max_chunksize=1024):
                    w.write_batch(batch)
        else:
            pq.write_table(table, out / f"part-{shard:03d}.parquet", row_group_size=1024, compression="none")


def write_litdata(token_file: Path, out: Path, piece: int = 1 << 20) -> None:
    """The token stream as litdata chunks (what ``litdata.optimize(item_loader=TokensLoader())``
    writes), in pieces of ``piece`` ids: TokensLoader reads blocks across items."""
    import torch
    from litdata.streaming.item_loader import TokensLoader
    from litdata.streaming.writer import BinaryWriter

    ids = np.fromfile(token_file, dtype=np.uint16)
    writer = BinaryWriter(str(out), chunk_bytes="64MB", item_loader=TokensLoader())
    for i, start in enumerate(range(0, len(ids), piece)):
        writer.add_item(i, torch.from_numpy(ids[start : start + piece].copy()))
    writer.done()
    writer.merge()


def write_mosaic(token_file: Path, out: Path, window: int) -> None:
    """The token stream as MDS shards of ``window``-id samples (a trailing part window dropped)."""
    from streaming import MDSWriter

    ids = np.fromfile(token_file, dtype=np.uint16)
    rows = ids[: len(ids) // window * window].reshape(-1, window)
    with MDSWriter(out=str(out), columns={"tokens": f"ndarray:uint16:{window}"}, size_limit=1 << 26) as w:
        for row in rows:
            w.write({"tokens": row})


# -- the reads, each in a process of its own ---------------------------------------------------
class CpuClock:
    """CPU seconds of this process (every thread) and of its descendants (DataLoader
    workers are children of a forkserver, so their time is read from /proc): the
    descendants are found once, at the start, and read again at most every ``every``
    seconds and at the end.

    A worker that ended before the end (DataLoader ends its workers with the last batch) is
    counted from what its parent, still running, was told when it reaped it (``cutime`` and
    ``cstime``), less what the worker had spent before the clock started: its own figures, last
    read up to ``every`` before it ended, would miss the rest of its CPU."""

    def __init__(self, every: float = 0.25) -> None:
        self.every = every
        self.parents = dict(self._descendants())
        self.seen: dict[int, tuple[float, float]] = {}  # pid: (its own CPU, its reaped children's)
        self.last = 0.0
        self.sample(force=True)
        self.before = dict(self.seen)
        self.start = time.process_time()

    @staticmethod
    def _descendants() -> Iterator[tuple[int, int]]:
        """(pid, parent pid) of each process below this one."""
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
        todo = [(pid, os.getpid()) for pid in children.get(os.getpid(), [])]
        while todo:
            pid, ppid = todo.pop()
            yield pid, ppid
            todo.extend((child, pid) for child in children.get(pid, []))

    def sample(self, force: bool = False) -> set[int]:
        """Read the descendants' CPU now (at most every ``every`` s unless ``force``): the
        pids still there."""
        now = time.perf_counter()
        if not self.parents or (not force and now - self.last < self.every):
            return set()
        self.last = now
        me = os.getpid()  # its own time is process_time(); its reaped children's, rusage's
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.seen[me] = (0.0, kids.ru_utime + kids.ru_stime)
        alive = {me}
        for pid in self.parents:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == "Z":
                continue  # ended, not yet reaped: its parent's figures do not hold it yet
            alive.add(pid)
            # utime + stime, then cutime + cstime (its children that it waited for)
            self.seen[pid] = ((int(fields[11]) + int(fields[12])) / TICK,
                              (int(fields[13]) + int(fields[14])) / TICK)
        return alive

    def whole(self, since: float) -> float:
        """CPU seconds since this process's ``process_time()`` was ``since``, with its
        descendants' whole lives (a read's workers all start after it began)."""
        alive = self.sample(force=True)
        spent = time.process_time() - since
        for pid, (own, reaped) in self.seen.items():
            if pid in alive:
                spent += own + reaped
            elif self.parents[pid] not in alive:
                spent += own  # no parent to ask: the last figures read
        return spent

    def total(self) -> float:
        alive = self.sample(force=True)
        spent = time.process_time() - self.start
        for pid, (own, reaped) in self.seen.items():
            was_own, was_reaped = self.before.get(pid, (0.0, 0.0))
            if pid in alive:
                spent += own - was_own + reaped - was_reaped
            elif self.parents[pid] not in alive:
                spent += own - was_own  # no parent to ask: the last figures read
        for pid in set(self.parents) - alive:  # in their parent's reaped figures, whole
            if self.parents[pid] in alive:
                spent -= self.before.get(pid, (0.0, 0.0))[0]
        return spent


class FullCollections:
    """The cyclic collector's full passes in this process while it is on (gc.callbacks): how
    many, and their seconds."""

    def __init__(self) -> None:
        self.count = 0
        self.s = 0.0
        self._began = 0.0

    def __enter__(self) -> FullCollections:
        gc.callbacks.append(self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.count += 1
            self.s += time.perf_counter() - self._began


def timed(batches: Iterable[Any], warm: int = 1,
          start: tuple[float, float] | None = None) -> dict[str, float]:
    """Read every batch (a (B, T) int64 tensor, or a dict with ``tokens``): the tokens, and
    the seconds and CPU seconds, from the ``warm``-th batch on (with workers, one each:
    starting processes and opening consumers are a fixed cost per run, not a rate); and the
    collector's full passes in the reading process meanwhile. With ``start`` (the
    ``perf_counter()`` and ``process_time()`` when the read began building its loader): also
    the seconds to the first batch and, start included, every token over the seconds and the
    CPU seconds from then to the end (what a fetch before the first batch costs is in these,
    not in the rate from the ``warm``-th batch)."""
    clock: CpuClock | None = None
    t0 = 0.0
    tokens = every = 0
    first = None
    with FullCollections() as full:
        for seen, batch in enumerate(batches, start=1):
            if first is None:
                first = time.perf_counter()
            n = (batch["tokens"] if isinstance(batch, dict) else batch).numel()
            every += n
            if clock is not None:
                tokens += n
                clock.sample()
            elif seen >= warm:
                clock = CpuClock()
                t0 = time.perf_counter()
                full.count, full.s = 0, 0.0
    end = time.perf_counter()
    assert clock is not None and first is not None, "no batch was read"
    out = {"tokens": tokens, "s": end - t0, "cpu_s": clock.total(), "full_gc": full.count,
           "full_gc_s": full.s}
    if start is not None:
        out.update(first_s=first - start[0], every_tokens=every, every_s=end - start[0],
                   every_cpu_s=clock.whole(start[1]))
    return out


class _Count:
    def __init__(self, n: int) -> None:
        self.n = n

    def numel(self) -> int:
        return self.n


def bare_consumer(args: dict[str, Any], group: str) -> Any:
    """A consumer of the whole topic from its start, with the loader's own fetch settings, so
    the bare reads are a fair ceiling (kafeed/loader/sources/read_ahead.py)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": args["bootstrap"], "group.id": group,
                  "enable.auto.commit": False, "queued.max.messages.kbytes": 131072,
                  "fetch.max.bytes": 32 * 1024 * 1024,
                  "max.partition.fetch.bytes": 8 * 1024 * 1024, "logger": QUIET})
    c.assign([TopicPartition(args["topic"], p, 0) for p in range(args["partitions"])])
    return c


def read_bare(args: dict[str, Any]) -> dict[str, float]:
    c = bare_consumer(args, "bench-bare")
    docs = args["docs"]

    def batches() -> Iterator[Any]:
        seen = 0
        while seen == 0:  # the clocks start at the first records
            seen += sum(1 for m in c.consume(num_messages=2000, timeout=1.0) if m.error() is None)
        yield _Count(0)
        start = seen
        while seen < docs:
            # No more than is left: a call for more would wait out its timeout at the end.
            for m in c.consume(num_messages=min(2000, docs - seen), timeout=1.0):
                if m.error() is None:
                    m.value()
                    seen += 1
        yield _Count(args["tokens"] * (docs - start) // docs)  # the tokens after the clock started

    out = timed(batches())
    c.close()
    return out


def read_bare_batches(args: dict[str, Any]) -> dict[str, float]:
    """The least work that gives kafeed's batches: the bare loop, plus parsing each record,
    its tokens as an array and the same (batch, seq_len + 1) int64 windows, with no order,
    no state and no delivery tracking."""
    import torch

    from kafeed.schema import TokenizedDocument

    c = bare_consumer(args, "bench-bare-batches")
    docs = args["docs"]
    need = args["batch"] * (args["seq_len"] + 1)
    eos = np.array([EOS], dtype=np.uint16)

    def batches() -> Iterator[Any]:
        pieces: list[Any] = []
        have = seen = 0
        while seen < docs:
            for m in c.consume(num_messages=min(2000, docs - seen), timeout=1.0):
                if m.error() is not None:
                    continue
                seen += 1
                doc = TokenizedDocument()
                doc.ParseFromString(m.value())
                pieces.append(np.frombuffer(doc.tokens, dtype=np.uint16))
                pieces.append(eos)
                have += doc.num_tokens + 1
                while have >= need:
                    flat = np.concatenate(pieces, dtype=np.int64)
                    yield torch.from_numpy(flat[:need].reshape(args["batch"], -1))
                    pieces, have = [flat[need:]], have - need

    out = timed(batches())
    c.close()
    return out


def read_kafeed(args: dict[str, Any]) -> dict[str, float]:
    import kafeed

    start = time.perf_counter(), time.process_time()
    ds = kafeed.KafkaTokenDataset(args["topic"], seq_len=args["seq_len"], bootstrap=args["bootstrap"],
                                  eos_id=EOS)
    loader = kafeed.StreamLoader(ds, batch_size=args["batch"], num_workers=args["workers"])
    return timed(loader, warm=max(1, args["workers"]), start=start)


def read_files(args: dict[str, Any]) -> dict[str, float]:
    import kafeed

    start = time.perf_counter(), time.process_time()
    ds = kafeed.FileTokenDataset(args["dir"], seq_len=args["seq_len"], eos_id=EOS)
    loader = kafeed.StreamLoader(ds, batch_size=args["batch"], num_workers=args["workers"])
    return timed(loader, warm=max(1, args["workers"]), start=start)


# -- the first batch: a fresh process builds its loader (fresh or from a saved state) --------
def _shuffled_loader(args: dict[str, Any]) -> Any:
    import kafeed

    ds = kafeed.KafkaTokenDataset(args["topic"], seq_len=args["seq_len"], bootstrap=args["bootstrap"],
                                  eos_id=EOS, shuffle_buffer=args["shuffle"])
    return kafeed.StreamLoader(ds, batch_size=args["batch"], num_workers=args["workers"])


def save_state(args: dict[str, Any]) -> dict[str, float]:
    """Read ``args["skip"]`` shuffled batches without workers and save the state to resume from."""
    loader = _shuffled_loader({**args, "workers": 0})
    batches = iter(loader)
    for _ in range(args["skip"]):
        next(batches)
    Path(args["state_file"]).write_text(json.dumps(loader.state_dict()))
    return {}


def first_kafeed(args: dict[str, Any]) -> dict[str, float]:
    """Seconds from building the loader (and loading ``state_file``, if given) to its first
    batch, the shuffle buffer on."""
    start = time.perf_counter()
    loader = _shuffled_loader(args)
    if args.get("state_file"):
        loader.load_state_dict(json.loads(Path(args["state_file"]).read_text()))
    next(iter(loader))
    return {"first_s": time.perf_counter() - start}


def first_litdata(args: dict[str, Any]) -> dict[str, float]:
    import torch
    from litdata import StreamingDataset
    from litdata.streaming.item_loader import TokensLoader

    start = time.perf_counter()
    ds = StreamingDataset(args["dir"], item_loader=TokensLoader(block_size=args["seq_len"] + 1), shuffle=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=args["batch"], num_workers=args["workers"])
    next(iter(loader))
    return {"first_s": time.perf_counter() - start}


def read_litdata(args: dict[str, Any]) -> dict[str, float]:
    import torch
    from litdata import StreamingDataset
    from litdata.streaming.item_loader import TokensLoader

    ds = StreamingDataset(args["dir"], item_loader=TokensLoader(block_size=args["seq_len"] + 1),
                          shuffle=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=args["batch"], num_workers=0)
    return timed(b.to(torch.int64) for b in loader)


def read_mosaic(args: dict[str, Any]) -> dict[str, float]:
    import torch
    from streaming import StreamingDataset

    ds = StreamingDataset(local=args["dir"], batch_size=args["batch"], shuffle=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=args["batch"], num_workers=0)
    return timed(b["tokens"].to(torch.int64) for b in loader)


def read_memmap(args: dict[str, Any]) -> dict[str, float]:
    import torch

    mm = np.memmap(args["file"], dtype=np.uint16, mode="r")
    step = args["batch"] * (args["seq_len"] + 1)
    return timed(torch.from_numpy(mm[i * step : (i + 1) * step].astype(np.int64).reshape(args["batch"], -1))
                 for i in range(len(mm) // step))


READS = {"bare": read_bare, "bare-batches": read_bare_batches, "kafeed": read_kafeed, "files": read_files,
         "litdata": read_litdata, "mosaic": read_mosaic, "memmap": read_memmap,
         "save-state": save_state, "first-kafeed": first_kafeed, "first-litdata": first_litdata}
# What each read imports, loaded before it starts (see settle).
IMPORTS = {"bare": ["confluent_kafka"], "bare-batches": ["confluent_kafka", "torch", "kafeed.schema"],
           "kafeed": ["kafeed.loader.stream_loader"], "files": ["kafeed.loader.stream_loader", "pyarrow"],
           "litdata": ["torch", "litdata"], "mosaic": ["torch", "streaming"], "memmap": ["torch"],
           "save-state": ["kafeed.loader.stream_loader"], "first-kafeed": ["kafeed.loader.stream_loader"],
           "first-litdata": ["torch", "litdata"]}


def settle(kind: str) -> None:
    """Import what the read ``kind`` uses, then freeze it out of the cyclic collector, as
    kafeed's trainer does when it starts (kafeed.train.runner), for every read alike. Else
    the first full pass after importing torch (70-100 ms, once per process) falls inside
    the read and is charged to its tokens: 1 ns per token of a 100M-token read. The read's
    own full passes are still timed and reported."""
    import importlib

    for name in IMPORTS[kind]:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()


def read_apart(kind: str, args: dict[str, Any], src: str | None = None, *,
               script: str = __file__) -> dict[str, float]:
    """One read in a process of its own, with the kafeed of ``src`` (default: this one):
    ``script --child kind args`` (this script's, or another benchmark's) prints its result."""
    path = [src] if src else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path + sys.path)}
    out = subprocess.run([sys.executable, script, "--child", kind, json.dumps(args)],
                         capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} read failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# -- the table -------------------------------------------------------------------------------
# (label, row, row over which) or, with a fourth field, the ratio of that field only.
RATIOS: list[tuple[str, ...]] = [
    ("kafeed/bare", "kafeed w0", "bare"),
    ("kafeed/bare batches", "kafeed w0", "bare batches"),
    ("kafeed/litdata", "kafeed w0", "litdata"),
    ("kafeed/mosaic", "kafeed w0", "mosaic"),
    ("kafeed/memmap", "kafeed w0", "memmap"),
    ("files arrow/litdata", "files arrow", "litdata"),
    ("files arrow/mosaic", "files arrow", "mosaic"),
    ("files parquet/litdata", "files parquet", "litdata"),
    ("files parquet/mosaic", "files parquet", "mosaic"),
    ("workers/w0", "kafeed wN", "kafeed w0"),
    ("workers/w0, start included", "kafeed wN", "kafeed w0", "tokens_s_start"),
    ("kafeed/baseline", "kafeed w0", "baseline w0"),
    ("kafeed/baseline, workers", "kafeed wN", "baseline wN"),
    ("baseline workers/w0", "baseline wN", "baseline w0"),
    ("files/baseline", "files arrow", "baseline files arrow"),
    ("kafeed/baseline, start incl.", "kafeed w0", "baseline w0", "tokens_s_start", "cpu_ns_token_start"),
    ("kafeed/baseline, wN, start incl.", "kafeed wN", "baseline wN", "tokens_s_start", "cpu_ns_token_start"),
    ("files/baseline, start incl.", "files arrow", "baseline files arrow", "tokens_s_start",
     "cpu_ns_token_start"),
]


def table(rows: dict[str, dict[str, float]], workers: int) -> tuple[str, dict[str, dict[str, float]]]:
    lines = [f"{'read':<20} {'M tokens/s':>11} {'CPU ns/token':>13}   start included: "
             f"{'M tokens/s':>11} {'CPU ns/token':>13}"]
    for name, row in rows.items():
        line = (f"{name.replace('wN', f'w{workers}'):<20} {row['tokens_s'] / 1e6:>11.1f} "
                f"{row['cpu_ns_token']:>13.2f}")
        if "tokens_s_start" in row:
            line += f"{'':>19}{row['tokens_s_start'] / 1e6:>11.1f} {row['cpu_ns_token_start']:>13.2f}"
        lines.append(line)
    lines.append(f"{'ratio':<34} {'tokens/s':>9} {'CPU/token':>10}")
    ratios: dict[str, dict[str, float]] = {}
    for label, a, b, *keys in RATIOS:
        if a in rows and b in rows:
            if keys:  # over the whole read, building the loader included
                if not all(key in rows[a] and key in rows[b] for key in keys):
                    continue
                ratios[label] = {key: rows[a][key] / rows[b][key] for key in keys}
                lines.append(f"{label.replace('workers', f'w{workers}').replace('wN', f'w{workers}'):<34} "
                             + " ".join(f"{ratios[label][key]:>8.2f}x " for key in keys))
                continue
            ratios[label] = {"tokens_s": rows[a]["tokens_s"] / rows[b]["tokens_s"],
                             "cpu_ns_token": rows[a]["cpu_ns_token"] / rows[b]["cpu_ns_token"]}
            lines.append(f"{label.replace('workers', f'w{workers}'):<34} {ratios[label]['tokens_s']:>8.2f}x "
                         f"{ratios[label]['cpu_ns_token']:>9.2f}x")
    return "\n".join(lines), ratios


def first_reads(args: argparse.Namespace, common: dict[str, Any], tmp: Path,
                skip: set[str]) -> dict[str, tuple[str, dict[str, Any], str | None]]:
    """The first-batch reads: kafeed without and with workers, fresh and resumed from a state
    saved 20 batches in (the baseline's too), and litdata's, all shuffling."""
    if "first" in skip:
        return {}
    out: dict[str, tuple[str, dict[str, Any], str | None]] = {}
    counts = [0, args.workers] if args.workers else [0]
    sources: list[tuple[str, str | None]] = [("kafeed", None)]
    if args.baseline_src:
        sources.append(("baseline", args.baseline_src))
    for label, src in sources:
        state = tmp / ("state.json" if src is None else "baseline-state.json")
        for w in counts:
            params = {**common, "workers": w, "shuffle": args.shuffle}
            tag = "w0" if w == 0 else "wN"
            out[f"{label} {tag} fresh"] = ("first-kafeed", params, src)
            out[f"{label} {tag} resumed"] = ("first-kafeed", {**params, "state_file": str(state)}, src)
    if "litdata" not in skip:
        for w in counts:
            params = {**common, "workers": w, "dir": str(tmp / "litdata")}
            out[f"litdata {'w0' if w == 0 else 'wN'}"] = ("first-litdata", params, None)
    return out


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        settle(sys.argv[2])
        print(json.dumps(READS[sys.argv[2]](json.loads(sys.argv[3]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=float, default=50e6, help="token ids in the topic (default 50M)")
    ap.add_argument("--doc-tokens", type=int, default=1024, help="mean document length")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers for the wN rows (0: none)")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved runs of every read (best is kept)")
    ap.add_argument("--baseline-src", default=None,
                    help="also read with the kafeed of this source tree (another commit's src/)")
    ap.add_argument("--skip", default="",
                    help="reads to leave out, comma-separated (bare, kafeed, files, litdata, mosaic, memmap, "
                         "first: the first-batch reads)")
    ap.add_argument("--shuffle", type=int, default=1024,
                    help="shuffle buffer (windows) of the first-batch reads")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args()
    skip = {s for s in args.skip.split(",") if s}

    from kafeed.broker import LocalCluster, free_port_block
    from kafeed.config import ConnectionSettings
    from kafeed.topics import TopicAdmin, plan_topic

    results: dict[str, Any] = {"args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp_name:
        tmp = Path(tmp_name)
        cluster = LocalCluster(tmp / "kafka", nodes=1, port=free_port_block(2), heap_mb=1024)
        cluster.start()
        try:
            bootstrap = cluster.bootstrap
            # Uncompressed: random token ids do not compress.
            TopicAdmin(ConnectionSettings(bootstrap=bootstrap)).create(
                plan_topic("bench-tokens", brokers=1, partitions=args.partitions, compression="none"))
            t0 = time.perf_counter()
            data = produce(bootstrap, "bench-tokens", int(args.tokens), args.doc_tokens, tmp / "tokens.bin")
            data["produce_s"] = round(time.perf_counter() - t0, 1)
            window = args.seq_len + 1
            if "litdata" not in skip:
                write_litdata(tmp / "tokens.bin", tmp / "litdata")
            if "mosaic" not in skip:
                write_mosaic(tmp / "tokens.bin", tmp / "mds", window)
            if "files" not in skip:
                for fmt in ("arrow", "parquet"):
                    write_files(tmp / "tokens.bin", tmp / fmt, args.partitions, fmt)
            data["shards_s"] = round(time.perf_counter() - t0 - data["produce_s"], 1)
            results["data"] = data
            print(f"topic: {data['tokens'] / 1e6:.1f}M tokens, {data['docs']} docs, "
                  f"{data['bytes'] / 1e6:.0f} MB (produced in {data['produce_s']} s, "
                  f"shards in {data['shards_s']} s)", flush=True)
            common = {"bootstrap": bootstrap, "topic": "bench-tokens", "partitions": args.partitions,
                      "docs": data["docs"], "tokens": data["tokens"], "seq_len": args.seq_len,
                      "batch": args.batch, "file": str(tmp / "tokens.bin")}
            runs: dict[str, tuple[str, dict[str, Any], str | None]] = {
                "bare": ("bare", common, None),
                "bare batches": ("bare-batches", common, None),
                "kafeed w0": ("kafeed", {**common, "workers": 0}, None),
                "kafeed wN": ("kafeed", {**common, "workers": args.workers}, None),
                "files arrow": ("files", {**common, "dir": str(tmp / "arrow"), "workers": 0}, None),
                "files parquet": ("files", {**common, "dir": str(tmp / "parquet"), "workers": 0}, None),
                "litdata": ("litdata", {**common, "dir": str(tmp / "litdata")}, None),
                "mosaic": ("mosaic", {**common, "dir": str(tmp / "mds")}, None),
                "memmap": ("memmap", common, None),
            }
            if args.baseline_src:
                runs["baseline w0"] = ("kafeed", {**common, "workers": 0}, args.baseline_src)
                runs["baseline wN"] = ("kafeed", {**common, "workers": args.workers}, args.baseline_src)
                runs["baseline files arrow"] = ("files", {**runs["files arrow"][1]}, args.baseline_src)
            runs = {k: v for k, v in runs.items()
                    if k.split()[0] not in skip and not (k.endswith("wN") and not args.workers)
                    and not (k.startswith("baseline files") and "files" in skip)}
            firsts = first_reads(args, common, tmp, skip)
            rows: dict[str, dict[str, float]] = {}
            first: dict[str, float] = {}
            read_apart("bare", common)  # warm the page cache
            if firsts:  # the states the resumed first batches start from
                saving = {**common, "shuffle": args.shuffle, "skip": 20}
                read_apart("save-state", {**saving, "state_file": str(tmp / "state.json")})
                if args.baseline_src:
                    read_apart("save-state", {**saving, "state_file": str(tmp / "baseline-state.json")},
                               args.baseline_src)
            for attempt in range(args.repeat):
                for name, (kind, params, src) in firsts.items():
                    took = read_apart(kind, params, src)["first_s"]
                    first[name] = min(first.get(name, took), took)
                    print(f"run {attempt + 1} first batch, {name}: {took * 1000:.0f} ms", flush=True)
                for name, (kind, params, src) in runs.items():
                    got = read_apart(kind, params, src)
                    row = {"tokens": got["tokens"], "s": got["s"], "cpu_s": got["cpu_s"],
                           "tokens_s": got["tokens"] / got["s"],
                           "cpu_ns_token": got["cpu_s"] / got["tokens"] * 1e9,
                           "full_gc": got["full_gc"], "full_gc_s": got["full_gc_s"]}
                    if "every_s" in got:  # the start included: building the loader to its last batch
                        row["tokens_s_start"] = got["every_tokens"] / got["every_s"]
                        row["cpu_ns_token_start"] = got["every_cpu_s"] / got["every_tokens"] * 1e9
                    best = rows.get(name)
                    rows[name] = row if best is None else {
                        **row, "tokens_s": max(best["tokens_s"], row["tokens_s"]),
                        "cpu_ns_token": min(best["cpu_ns_token"], row["cpu_ns_token"]),
                        **({"tokens_s_start": max(best["tokens_s_start"], row["tokens_s_start"]),
                            "cpu_ns_token_start": min(best["cpu_ns_token_start"], row["cpu_ns_token_start"])}
                           if "tokens_s_start" in row else {})}
                    print(f"run {attempt + 1} {name}: {row['tokens_s'] / 1e6:.1f}M tokens/s, "
                          f"{row['cpu_ns_token']:.2f} CPU ns/token, {row['full_gc']:.0f} full GC pass(es) "
                          f"({row['full_gc_s'] * 1000:.0f} ms), load {os.getloadavg()[0]:.1f}",
                          flush=True)
        finally:
            cluster.stop(timeout=30, purge=True)
    text, ratios = table(rows, args.workers)
    print(text)
    if first:
        print(f"{'first batch (shuffle ' + str(args.shuffle) + ')':<34} {'ms':>6}")
        for name, took in first.items():
            print(f"{name.replace('wN', f'w{args.workers}'):<34} {took * 1000:>6.0f}")
    results["rows"] = rows
    results["ratios"] = ratios
    results["first_batch_s"] = first
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
