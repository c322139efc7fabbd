"""Secure aggregation: what the coordinator stores reveals nothing of a site, and the sum is exact."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pytest

from kafeed.errors import KafeedError, SecureAggregationError
from kafeed.federate.secagg import (
    FixedPoint,
    MaskedUpdate,
    SiteKeys,
    mask,
    quantize,
    reveal_seed,
    round_tag,
    sum_masked,
    unmask,
    unmask_mean,
)

FIXED = FixedPoint()
LENGTH = 4_000


def _updates(sites: list[str], seed: int = 0) -> tuple[dict[str, npt.NDArray[np.float32]], dict[str, int]]:
    rng = np.random.default_rng(seed)
    vectors = {s: (rng.normal(size=LENGTH) * 0.05).astype(np.float32) for s in sites}
    weights = {s: int(rng.integers(1, 5_000)) for s in sites}
    return vectors, weights


Attempt = tuple[dict[str, SiteKeys], dict[str, bytes], dict[str, MaskedUpdate]]


def _attempt(sites: list[str], tag: str, vectors: Mapping[str, npt.NDArray[np.float32]],
             weights: Mapping[str, int]) -> Attempt:
    keys = {s: SiteKeys.generate() for s in sites}
    roster = {s: k.public_bytes() for s, k in keys.items()}
    masked = {s: MaskedUpdate.from_bytes(mask(keys[s], site=s, roster=roster, round_tag=tag,
                                              vector=vectors[s], weight=weights[s], fixed=FIXED).to_bytes())
              for s in sites}
    return keys, roster, masked


def _open(sites: list[str], tag: str, keys: Mapping[str, SiteKeys], roster: Mapping[str, bytes],
          masked: Mapping[str, MaskedUpdate]) -> npt.NDArray[np.uint64]:
    total = sum_masked(masked.values(), roster=roster, round_tag=tag, length=LENGTH)
    seeds = {s: reveal_seed(keys[s], site=s, roster=roster, round_tag=tag, received=masked) for s in sites}
    return unmask(total, seeds=seeds, round_tag=tag)


def _signed(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.float64]:
    return values.view(np.int64).astype(np.float64)


def test_a_stored_masked_update_is_not_the_sites_update_and_does_not_correlate_with_it() -> None:
    sites = ["a", "b", "c"]
    vectors, weights = _updates(sites)
    tag = round_tag("f", 0, 0)
    keys, roster, masked = _attempt(sites, tag, vectors, weights)
    for s in sites:
        plain = quantize(vectors[s], weights[s], FIXED)
        stored = masked[s].values
        assert np.count_nonzero(stored == plain) <= 2, s  # equal only by 2**-64 chance per value
        assert stored[0] != weights[s]  # the sample count is masked too
        assert abs(np.corrcoef(_signed(stored[1:]), vectors[s])[0, 1]) < 0.1, s
        # Even its own revealed seed leaves it masked by its pairs: a seed alone opens nothing.
        seed = reveal_seed(keys[s], site=s, roster=roster, round_tag=tag, received=sites)
        half_open = unmask(stored, seeds={s: seed}, round_tag=tag)
        assert np.count_nonzero(half_open == plain) <= 2, s
        assert abs(np.corrcoef(_signed(half_open[1:]), vectors[s])[0, 1]) < 0.1, s


@pytest.mark.parametrize("count", [2, 3, 7])
def test_masks_cancel_and_the_unmasked_sum_is_the_sum_of_the_quantized_vectors_exactly(count: int) -> None:
    sites = [f"site-{i}" for i in range(count)]
    vectors, weights = _updates(sites, seed=count)
    tag = round_tag("f", 3, 0)
    keys, roster, masked = _attempt(sites, tag, vectors, weights)
    got = _open(sites, tag, keys, roster, masked)
    expected = np.zeros(LENGTH + 1, dtype=np.uint64)
    for s in sites:
        expected += quantize(vectors[s], weights[s], FIXED)
    np.testing.assert_array_equal(got, expected)

    total = sum_masked(masked.values(), roster=roster, round_tag=tag, length=LENGTH)
    seeds = {s: reveal_seed(keys[s], site=s, roster=roster, round_tag=tag, received=sites) for s in sites}
    weight, mean = unmask_mean(total, seeds=seeds, round_tag=tag, fixed=FIXED)
    assert weight == sum(weights.values())
    weighted = sum(weights[s] * vectors[s].astype(np.float64) for s in sites) / weight
    # The only error is the fixed point's rounding, at most 2**-25 per value.
    assert mean.dtype == np.float32 and np.max(np.abs(mean - weighted)) < 2.0**-24


def test_negative_values_and_clipping_decode_as_documented() -> None:
    sites = ["a", "b"]
    vectors = {"a": np.array([-1.5, 100.0, -100.0, 0.25] + [0.0] * (LENGTH - 4), dtype=np.float32),
               "b": np.array([0.5, 0.0, 0.0, -0.75] + [0.0] * (LENGTH - 4), dtype=np.float32)}
    weights = {"a": 3, "b": 1}
    tag = round_tag("f", 0, 0)
    keys, roster, masked = _attempt(sites, tag, vectors, weights)
    total = sum_masked(masked.values(), roster=roster, round_tag=tag, length=LENGTH)
    seeds = {s: reveal_seed(keys[s], site=s, roster=roster, round_tag=tag, received=sites) for s in sites}
    weight, mean = unmask_mean(total, seeds=seeds, round_tag=tag, fixed=FIXED)
    assert weight == 4
    np.testing.assert_array_equal(mean[:4], np.array([-1.0, 6.0, -6.0, 0.0], dtype=np.float32))


def test_wrong_shape_wrong_round_tag_and_missing_peer_are_refused() -> None:
    sites = ["a", "b", "c"]
    vectors, weights = _updates(sites)
    tag = round_tag("f", 1, 0)
    keys, roster, masked = _attempt(sites, tag, vectors, weights)

    short = MaskedUpdate("c", tag, masked["c"].values[:-1])
    with pytest.raises(SecureAggregationError, match="'c' has 3999 values, the model 4000"):
        sum_masked([masked["a"], masked["b"], short], roster=roster, round_tag=tag, length=LENGTH)
    with pytest.raises(SecureAggregationError, match="flat float vector"):
        mask(keys["a"], site="a", roster=roster, round_tag=tag, vector=np.zeros((2, 3), np.float32),
             weight=1, fixed=FIXED)
    with pytest.raises(SecureAggregationError, match="should be"):
        MaskedUpdate.from_bytes(masked["a"].to_bytes()[:-8])

    other = round_tag("f", 2, 0)
    stale = mask(keys["a"], site="a", roster=roster, round_tag=other, vector=vectors["a"],
                 weight=weights["a"], fixed=FIXED)
    with pytest.raises(SecureAggregationError, match="belongs to f/2/0, not f/1/0"):
        sum_masked([stale, masked["b"], masked["c"]], roster=roster, round_tag=tag, length=LENGTH)
    total = sum_masked(masked.values(), roster=roster, round_tag=tag, length=LENGTH)
    seeds = {s: reveal_seed(keys[s], site=s, roster=roster, round_tag=tag, received=sites) for s in sites}
    with pytest.raises(SecureAggregationError, match="not a sample count"):
        unmask_mean(total, seeds=seeds, round_tag=other, fixed=FIXED)

    with pytest.raises(SecureAggregationError, match=r"No masked update from c for f/1/0") as missing:
        sum_masked([masked["a"], masked["b"]], roster=roster, round_tag=tag, length=LENGTH)
    assert missing.value.hint and "Redo" in missing.value.hint
    with pytest.raises(SecureAggregationError, match="'d' is not in the roster"):
        mask(SiteKeys.generate(), site="d", roster=roster, round_tag=tag, vector=vectors["a"], weight=1,
             fixed=FIXED)
    with pytest.raises(SecureAggregationError, match="sent two updates"):
        sum_masked([*masked.values(), masked["a"]], roster=roster, round_tag=tag, length=LENGTH)
    with pytest.raises(SecureAggregationError, match="not this site's key"):
        mask(SiteKeys.generate(), site="a", roster=roster, round_tag=tag, vector=vectors["a"], weight=1,
             fixed=FIXED)
    with pytest.raises(SecureAggregationError, match="two sites or more"):
        mask(keys["a"], site="a", roster={"a": roster["a"]}, round_tag=tag, vector=vectors["a"], weight=1,
             fixed=FIXED)
    assert issubclass(SecureAggregationError, KafeedError)


def test_bad_values_and_weights_are_refused_before_masking() -> None:
    keys = {s: SiteKeys.generate() for s in ("a", "b")}
    roster = {s: k.public_bytes() for s, k in keys.items()}
    kwargs = {"site": "a", "roster": roster, "round_tag": round_tag("f", 0, 0), "fixed": FIXED}
    with pytest.raises(SecureAggregationError, match="NaN"):
        mask(keys["a"], vector=np.array([0.0, np.nan], np.float32), weight=1, **kwargs)
    for weight in (0, -3, FIXED.max_total_weight + 1):
        with pytest.raises(SecureAggregationError, match="sample count"):
            mask(keys["a"], vector=np.zeros(3, np.float32), weight=weight, **kwargs)
    with pytest.raises(SecureAggregationError, match="clip"):
        FixedPoint(clip=0.0)
    with pytest.raises(SecureAggregationError, match="counted from 0"):
        round_tag("f", -1, 0)


def test_a_dropout_after_masking_redoes_the_round_without_the_site_with_fresh_keys() -> None:
    sites = ["a", "b", "c", "d"]
    vectors, weights = _updates(sites, seed=7)
    first = round_tag("f", 5, 0)
    keys, roster, masked = _attempt(sites, first, vectors, weights)
    arrived = {s: masked[s] for s in ("a", "b", "c")}  # d masked, then dropped

    with pytest.raises(SecureAggregationError, match="No masked update from d"):
        sum_masked(arrived.values(), roster=roster, round_tag=first, length=LENGTH)
    with pytest.raises(SecureAggregationError, match="only for a complete roster"):
        reveal_seed(keys["a"], site="a", roster=roster, round_tag=first, received=arrived)

    left = ["a", "b", "c"]
    second = round_tag("f", 5, 1)
    keys2, roster2, masked2 = _attempt(left, second, vectors, weights)
    assert not set(roster2.values()) & set(roster.values())  # fresh keys
    total = sum_masked(masked2.values(), roster=roster2, round_tag=second, length=LENGTH)
    seeds = {s: reveal_seed(keys2[s], site=s, roster=roster2, round_tag=second, received=left) for s in left}
    weight, mean = unmask_mean(total, seeds=seeds, round_tag=second, fixed=FIXED)
    assert weight == sum(weights[s] for s in left)
    weighted = sum(weights[s] * vectors[s].astype(np.float64) for s in left) / weight
    assert np.max(np.abs(mean - weighted)) < 2.0**-24

    # d's masked update arrives late: with every attempt-0 sum the coordinator can open (the
    # survivors never revealed attempt-0 seeds, and d never revealed any), the difference from the
    # redone sum is still noise, not d's update.
    late_total = sum_masked(masked.values(), roster=roster, round_tag=first, length=LENGTH)
    opened = unmask(total, seeds=seeds, round_tag=second)
    difference = late_total - opened
    d_plain = quantize(vectors["d"], weights["d"], FIXED)
    assert np.count_nonzero(difference == d_plain) <= 2
    assert abs(np.corrcoef(_signed(difference[1:]), vectors["d"])[0, 1]) < 0.1
