"""Mixtures on the real broker: token proportions, exact resume (weights changed too), dry sources."""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import numpy as np
import pytest

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.loader.nodes.delivered import Delivered
from kafeed.loader.nodes.mixing import tokens_delivered
from kafeed.loader.nodes.mixture_stream import AHEAD
from kafeed.loader.workers.deferred_entry import DeferredEntry
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.loader_data import EOS, counts, produce_docs
from tests.stateful_harness import Stateful, check_save_resume

FIRST = {"web": 0, "code": 3000, "books": 6000}  # token value = document number + 1
WINDOW = 16


@pytest.fixture(scope="module")
def sources(kafka: ConnectionSettings, admin: TopicAdmin) -> dict[str, tuple[str, np.ndarray]]:
    """web / code / books, 2 partitions each (fresh for this module; the tests only read);
    books small enough to run dry first."""
    made: dict[str, tuple[str, np.ndarray]] = {}
    sizes = {"web": 1500, "code": 800, "books": 120}
    for i, (name, count) in enumerate(sizes.items()):
        topic = f"mix-{name}-{uuid.uuid4().hex[:8]}"
        admin.create(plan_topic(topic, brokers=1, partitions=2))
        made[name] = (topic, produce_docs(kafka.bootstrap, topic, count, seed=i, first=FIRST[name]))
    return made


def _mixture(kafka: ConnectionSettings, sources: dict[str, tuple[str, np.ndarray]],
             weights: dict[str, float], **kw: Any) -> kafeed.Mixture:
    return kafeed.Mixture({sources[n][0]: w for n, w in weights.items()}, seq_len=WINDOW - 1, eos_id=EOS,
                          connection=kafka, **kw)


def _source_of(window: np.ndarray) -> str:
    value = int(window[window != EOS][0])
    return "books" if value > FIRST["books"] else "code" if value > FIRST["code"] else "web"


def _windows(batches: list[Any]) -> list[str]:
    return [_source_of(w) for b in batches if b is not None for w in np.asarray(b["tokens"])]


def _share(names: list[str]) -> dict[str, float]:
    return {n: names.count(n) / len(names) for n in ("web", "code", "books")}


def test_token_proportions_follow_the_weights(kafka: ConnectionSettings,
                                              sources: dict[str, tuple[str, np.ndarray]]) -> None:
    weights = {"web": 0.6, "code": 0.3, "books": 0.1}
    loader = kafeed.StreamLoader(_mixture(kafka, sources, weights), batch_size=8, num_workers=2)
    batches = []
    for batch in loader:  # 160 batches: 1,280 windows, within what every source holds
        batches.append(batch)
        if len(batches) == 160:
            break
    got = _share(_windows(batches))
    for name, weight in weights.items():
        assert abs(got[name] - weight) <= 0.01, (name, got)
    # Per source tokens in the state (both workers), in the same proportions.
    delivered = tokens_delivered(loader.state_dict())
    assert sum(delivered.values()) == 160 * 8 * WINDOW
    assert abs(delivered[sources["web"][0]] / sum(delivered.values()) - 0.6) <= 0.01


def _loader_case(make: Any) -> Stateful[Any]:
    class Node:
        def __init__(self) -> None:
            self.obj = make()
            self.it: Any = None

    def step(node: Node) -> Any:
        if node.it is None:
            node.it = iter(node.obj)
        return next(node.it, None)

    return Stateful(make=Node, step=step, state=lambda node: node.obj.state_dict(),
                    load=lambda node, state: node.obj.load_state_dict(state))


def test_exact_resume_and_a_weight_change(kafka: ConnectionSettings,
                                          sources: dict[str, tuple[str, np.ndarray]]) -> None:
    first_w = {"web": 0.5, "code": 0.3, "books": 0.2}
    check_save_resume(_loader_case(lambda: kafeed.StreamLoader(
        _mixture(kafka, sources, first_w, shuffle_buffer=20, seed=3), batch_size=4)), 9, 12)

    # Phase 1 under the first weights, phase 2 resumed from its state under new ones.
    phase1 = kafeed.StreamLoader(_mixture(kafka, sources, first_w, on_dry="drop"), batch_size=8)
    it = iter(phase1)
    before = [next(it) for _ in range(10)]
    saved = json.loads(json.dumps(phase1.state_dict()))
    new_w = {"web": 0.2, "code": 0.8, "books": 0.0}

    def resumed() -> kafeed.StreamLoader:
        loader = kafeed.StreamLoader(_mixture(kafka, sources, new_w, on_dry="drop"), batch_size=8)
        loader.load_state_dict(saved)
        return loader

    # The resumed run is itself exactly resumable, and follows the new weights from there.
    _, after = check_save_resume(_loader_case(resumed), 5, 20)
    got = _share(_windows(after))
    assert got["books"] == 0 and abs(got["code"] - 0.8) <= 0.02, got
    # Nothing delivered twice or lost across the change: phase 2 to the end (books never
    # read again) plus phase 1 hold every web and code document exactly once.
    rest = list(resumed())
    web, code, books = (sources[n][1] for n in ("web", "code", "books"))
    got_tokens = counts([b["tokens"] for b in before + rest], len(books))
    assert np.array_equal(got_tokens[: len(web)], web)
    assert np.array_equal(got_tokens[FIRST["code"] + 1: len(code)], code[FIRST["code"] + 1:])
    books_seen = counts([b["tokens"] for b in before], len(books))[FIRST["books"] + 1:]
    assert 0 < books_seen.sum() < books.sum()


def test_a_dry_source_ends_the_mixture_or_is_dropped(kafka: ConnectionSettings,
                                                     sources: dict[str, tuple[str, np.ndarray]]) -> None:
    weights = {"web": 0.3, "code": 0.3, "books": 0.4}
    ended = list(kafeed.StreamLoader(_mixture(kafka, sources, weights, on_dry="end"), batch_size=8))
    names = _windows(ended)
    books_windows = names.count("books")
    # Books (120 short documents) runs out first; the mixture stops there, web barely read.
    assert ended and books_windows > 0 and names.count("web") < 2 * books_windows
    books = sources["books"][1]
    assert counts([b["tokens"] for b in ended], len(books))[FIRST["books"] + 1:].sum() == books.sum()

    dropped = kafeed.StreamLoader(_mixture(kafka, sources, weights, on_dry="drop"), batch_size=8)
    batches = list(dropped)
    every = {n: counts([b["tokens"] for b in batches], len(sources[n][1]))[FIRST[n] + 1:] for n in sources}
    for name, (_, expected) in sources.items():  # every source read to its end, each token once
        assert np.array_equal(every[name], expected[FIRST[name] + 1:]), name
    dry = dropped.state_dict()["readers"]["0"]["dry"]
    assert sorted(dry) == sorted(t for t, _ in sources.values())


def test_an_unknown_topic_is_one_sentence(kafka: ConnectionSettings,
                                          sources: dict[str, tuple[str, np.ndarray]]) -> None:
    mix = kafeed.Mixture({sources["web"][0]: 0.5, "no-such-topic-mix": 0.5}, seq_len=15, eos_id=EOS,
                         connection=kafka, broker_timeout_s=5)
    with pytest.raises(kafeed.KafeedError, match="no-such-topic-mix") as err:
        next(iter(kafeed.StreamLoader(mix, batch_size=2)))
    assert str(err.value.message).count(". ") == 0


@pytest.mark.parametrize("n", [3, 7])
def test_resume_in_the_middle_of_a_block(kafka: ConnectionSettings,
                                         sources: dict[str, tuple[str, np.ndarray]], n: int) -> None:
    """Each source's windows are cut a block ahead of the batches (kafeed.loader.nodes.windows_ahead);
    a state saved with every block partly handed out resumes to the same batches, document
    starts included, and N + M batches on has the same state as a run never stopped."""
    weights = {"web": 0.5, "code": 0.3, "books": 0.2}

    def make() -> kafeed.StreamLoader:
        return kafeed.StreamLoader(_mixture(kafka, sources, weights, return_boundaries=True, seed=5),
                                   batch_size=4)

    first, _ = check_save_resume(_loader_case(make), n, 14)
    handed = {name: _windows(first).count(name) for name in weights}
    for name, weight in weights.items():
        block = math.ceil(weight / sum(weights.values()) * 4 * AHEAD)
        assert handed[name] % block > 0, (name, handed[name], block)  # saved inside a block
    assert all("doc_start" in batch for batch in first)


def test_an_elastic_resume_in_the_middle_of_a_block_delivers_every_token_once(
        kafka: ConnectionSettings, sources: dict[str, tuple[str, np.ndarray]]) -> None:
    """Saved by one reader with blocks partly handed out, resumed by two: the records of the
    windows not handed out, and the rest of a document cut across the save, are read again
    by their new owners; nothing is lost or delivered twice."""
    weights = {"web": 0.5, "code": 0.3, "books": 0.2}
    one = kafeed.StreamLoader(_mixture(kafka, sources, weights, on_dry="drop"), batch_size=4)
    it = iter(one)
    before = [next(it) for _ in range(7)]
    saved = json.loads(json.dumps(one.state_dict()))
    two = kafeed.StreamLoader(_mixture(kafka, sources, weights, on_dry="drop"), batch_size=4, num_workers=2)
    two.load_state_dict(saved)
    batches = before + list(two)
    for name, (_, expected) in sources.items():
        got = counts([b["tokens"] for b in batches], len(expected))[FIRST[name] + 1:]
        assert np.array_equal(got, expected[FIRST[name] + 1:]), name


@pytest.mark.parametrize("on_dry,bounded", [("end", True), ("drop", True), ("end", False)])
def test_a_deferred_entry_equals_the_entry_of_its_batch(kafka: ConnectionSettings,
                                                        sources: dict[str, tuple[str, np.ndarray]],
                                                        on_dry: str, bounded: bool) -> None:
    """In the main process each batch's entry comes deferred, built when a state is asked
    for from what was recorded at the batch: built after the run, every one equals the entry
    the live stream gave right after its batch, and so do the positions for the metrics,
    across blocks and cuts to the end of the mixture (unbounded: a block per batch)."""
    extra: dict[str, Any] = {} if bounded else {"end": None}
    mixture = _mixture(kafka, sources, {"web": 0.5, "code": 0.3, "books": 0.2}, on_dry=on_dry, seed=3,
                       **extra)
    deferred: list[DeferredEntry] = []
    live: list[dict[str, Any]] = []
    for _, batch, entry, delivered in mixture.iter_batches(4):
        if batch is None:
            continue
        if not bounded and len(live) == 200:
            break
        assert isinstance(entry, DeferredEntry)
        now = mixture.state_dict()["readers"]["0"]
        assert delivered.positions == Delivered.of(({}, []), now).positions
        deferred.append(entry)
        live.append(now)
    assert len(live) > 8 * AHEAD  # many blocks of every source
    built = [entry.build() for entry in deferred]
    assert built == live
    assert built[0] is not deferred[0].build()  # fresh containers each time


CORPUS_FIRST = 9000  # the file corpus's documents: token value = CORPUS_FIRST + row number + 1


def _corpus(root: Any, files: int = 2, rows: int = 150) -> np.ndarray:
    """Parquet files of documents numbered from CORPUS_FIRST + 1 (row groups of 17 rows);
    returns the expected count of each token value."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sizes = np.random.default_rng(9).integers(1, 40, size=files * rows)
    expected = np.zeros(CORPUS_FIRST + files * rows + 1, dtype=np.int64)
    for f in range(files):
        docs = []
        for i in range(f * rows, (f + 1) * rows):
            docs.append([CORPUS_FIRST + i + 1] * int(sizes[i]))
            expected[CORPUS_FIRST + i + 1] = sizes[i]
        pq.write_table(pa.table({"input_ids": docs}), root / f"shard-{f}.parquet", row_group_size=17)
    return expected


def _topic_and_files(kafka: ConnectionSettings, topic: str, root: Any, **kw: Any) -> kafeed.Mixture:
    return kafeed.Mixture({topic: 0.5, "corpus": 0.5}, sources={"corpus": {"files": str(root)}},
                          seq_len=WINDOW - 1, eos_id=EOS, connection=kafka, **kw)


def test_a_topic_and_a_file_corpus_mix_and_resume_in_the_middle_of_a_file(
        kafka: ConnectionSettings, sources: dict[str, tuple[str, np.ndarray]], tmp_path: Any) -> None:
    corpus = _corpus(tmp_path)
    topic, web = sources["web"]

    def make() -> kafeed.StreamLoader:
        return kafeed.StreamLoader(_topic_and_files(kafka, topic, tmp_path, shuffle_buffer=10, seed=2,
                                                    on_dry="drop"), batch_size=4)

    check_save_resume(_loader_case(make), 9, 25)
    # Saved in the middle of the first file, resumed by a new loader: every token of the topic
    # and of the files arrives exactly once.
    one = make()
    it = iter(one)
    before = [next(it) for _ in range(9)]
    saved = json.loads(json.dumps(one.state_dict()))
    position = saved["readers"]["0"]["sources"]["corpus"]["reader"]["partitions"]["corpus:0"]["next"]
    assert 0 < position < 150, position
    two = make()
    two.load_state_dict(saved)
    batches = before + list(two)
    assert np.array_equal(counts([b["tokens"] for b in batches], len(web)), web)
    got = counts([b["tokens"] for b in batches], len(corpus))[CORPUS_FIRST + 1:]
    assert np.array_equal(got, corpus[CORPUS_FIRST + 1:])


def test_a_live_topic_mixes_with_a_file_corpus(kafka: ConnectionSettings,
                                               sources: dict[str, tuple[str, np.ndarray]],
                                               tmp_path: Any) -> None:
    _corpus(tmp_path)
    topic, _ = sources["web"]
    loader = kafeed.StreamLoader(_topic_and_files(kafka, topic, tmp_path, end=None), batch_size=8)
    batches = []
    for batch in loader:
        batches.append(batch)
        if len(batches) == 20:
            break
    values = np.concatenate([np.asarray(b["tokens"]).reshape(-1) for b in batches])
    from_files = np.count_nonzero(values > CORPUS_FIRST) / np.count_nonzero(values)
    assert 0.4 <= from_files <= 0.6, from_files
