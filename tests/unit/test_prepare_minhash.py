"""MinHash-LSH near-duplicates: recall and precision on a corpus with known small edits."""

from __future__ import annotations

import gzip
import random
from importlib import resources

import numpy as np

from kafeed.prepare.global_dedup import GlobalDedupState
from kafeed.prepare.minhash import MinHasher, jaccard, shingle_hashes, word_hashes


def _corpus(n: int, words_per_doc: int = 350) -> list[str]:
    text = gzip.decompress(resources.files("kafeed.data").joinpath("tinyshakespeare.txt.gz")
                           .read_bytes()).decode()
    words = text.split()
    return [" ".join(words[i * words_per_doc:(i + 1) * words_per_doc]) for i in range(n)]


def _edit(text: str, edits: int, rng: random.Random) -> str:
    words = text.split()
    for _ in range(edits):
        words[rng.randrange(len(words))] = rng.choice(["lo", "verily", "anon", "prithee", "forsooth"])
    return " ".join(words)


def test_words_hash_the_same_wherever_they_stand() -> None:
    w = word_hashes("The cat  sat\non the MAT the cat")
    assert len(w) == 8 and w[0] == w[4] == w[6] and w[1] == w[7] and w[0] != w[1]
    assert len(shingle_hashes(w, 5)) == 4 and len(shingle_hashes(w[:2], 5)) == 1


def test_recall_and_precision_at_the_default_threshold() -> None:
    rng = random.Random(3)
    originals = _corpus(300)
    variants = [_edit(originals[i], rng.randint(1, 6), rng) for i in range(0, 300, 3)]  # 100
    sims = [jaccard(originals[i * 3], v) for i, v in enumerate(variants)]
    assert min(sims) > 0.8  # small edits: well above the 0.72 threshold
    # (text, which original it belongs to); shuffled, a variant may come before its original:
    # then the original is the near-duplicate, which is just as right.
    stream = [(t, i) for i, t in enumerate(originals)] + [(v, i * 3) for i, v in enumerate(variants)]
    rng.shuffle(stream)
    hasher = MinHasher()
    assert abs(hasher.threshold - 0.72) < 0.01
    keys = hasher.band_keys([t for t, _ in stream])
    state = GlobalDedupState()
    hits = state.check_groups([0] * len(stream), keys, [0] * len(stream))
    seen: set[int] = set()
    true_pos = false_pos = 0
    for (_, group), hit in zip(stream, hits, strict=True):
        if hit < 0:
            seen.add(group)
        elif group in seen:
            true_pos += 1
        else:
            false_pos += 1
    recall, precision = true_pos / len(variants), true_pos / max(1, true_pos + false_pos)
    assert recall >= 0.95 and precision == 1.0, (recall, precision)

    # Unrelated documents share no band key.
    unrelated = hasher.band_keys(_corpus(400)[300:])
    assert not np.isin(unrelated, keys).any()
