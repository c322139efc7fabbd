"""Two `kafeed prepare` workers, SIGKILLed at random: copies under new ids still removed exactly once."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.schema import decode_document, unpack_tokens
from tests.prepare_support import (
    document_ids,
    high_watermarks,
    paragraphs,
    prepare_command,
    prepare_env,
    produce,
    read_topic,
    sample_record,
)


def _copy(text: str) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]] | None]:
    fresh = uuid.uuid4().hex
    return sample_record(text, id=fresh, key=fresh)


def _two_workers_killed(kafka: ConnectionSettings, make_topic, tmp_path: Path,  # type: ignore[no-untyped-def]
                        kills: int, n_docs: int) -> None:
    rng = random.Random(kills)
    raw = make_topic(partitions=4)
    good = paragraphs(n_docs)
    copies = [_copy(t) for t in good[::5]]
    records = [_copy(t) for t in good] + copies
    rng.shuffle(records)
    produce(kafka, raw, records)
    output, group = f"{raw}.tokens", f"g-{raw}"
    env = prepare_env(str(tmp_path))
    base = prepare_command(kafka.bootstrap, raw, output, group, "--batch-size", "20")

    for k in range(kills):
        # Both workers run; one of them dies once the output has grown past a random point.
        procs = [subprocess.Popen(base, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for _ in range(2)]
        target = int(n_docs * (k + rng.random()) / (kills + 1))
        deadline = time.monotonic() + 120
        while high_watermarks(kafka, output) < target and time.monotonic() < deadline:
            for p in procs:
                assert p.poll() is None, p.stderr.read() if p.stderr else ""
            time.sleep(0.05)
        time.sleep(rng.random() * 0.3)
        victim = rng.randrange(2)
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        # The survivor takes over the victim's partitions; then it dies too.
        time.sleep(rng.random() * 0.5)
        procs[1 - victim].send_signal(signal.SIGKILL)
        procs[1 - victim].wait()
        for p in procs:
            if p.stderr:
                p.stderr.close()

    finish = [subprocess.Popen([*base, "--until-caught-up", "--json"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for p in finish:
            try:
                stdout, stderr = p.communicate(timeout=150)
            except subprocess.TimeoutExpired:
                p.kill()
                _, stderr = p.communicate()
                raise AssertionError(f"a worker did not catch up within 150 s; it said:\n{stderr}") from None
            assert p.returncode == 0, stderr
            assert json.loads(stdout)["balanced"]
    finally:
        for p in finish:  # a worker left running would leave its pipes to the next test
            if p.poll() is None:
                p.kill()
            p.communicate()
    out = read_topic(kafka, output)
    ids = document_ids(out)
    assert len(ids) == len(set(ids)), "a document was written twice"
    assert len(ids) == n_docs, f"{len(ids)} documents for {n_docs} distinct texts"
    # Each distinct text exactly once (the bytes tokenizer's ids are the text's UTF-8 bytes).
    docs = [decode_document(m.value()) for m in out]
    assert sorted(bytes(unpack_tokens(d.tokens, d.dtype).tolist()).decode() for d in docs) == sorted(good)


def test_two_workers_killed_keep_global_dedup(kafka: ConnectionSettings, make_topic,  # type: ignore[no-untyped-def]
                                              tmp_path: Path) -> None:
    _two_workers_killed(kafka, make_topic, tmp_path, kills=1, n_docs=800)


@pytest.mark.slow
def test_two_workers_killed_many_times(kafka: ConnectionSettings, make_topic,  # type: ignore[no-untyped-def]
                                       tmp_path: Path) -> None:
    _two_workers_killed(kafka, make_topic, tmp_path, kills=6, n_docs=4000)
