"""Secure aggregation of a federated round: the coordinator learns the sum of the sites' updates, never one.

Pure functions and small frozen types; no Kafka (the coordinator and the site trainer move the
bytes). The cryptography is the ``cryptography`` package's: X25519 key agreement, HKDF-SHA256
and AES-256-CTR as the mask generator. Nothing here implements a primitive.

One attempt of a round, for the sites of a roster (Bonawitz et al. 2017, double masking)::

    site u                                      coordinator
    keys = SiteKeys.generate()   ── public ──►  roster = {site: public bytes}, round_tag
    masked = mask(keys, site=u, roster, round_tag, vector, weight, fixed)
                                 ── masked.to_bytes() ──►  total = sum_masked(updates, roster, ...)
    reveal_seed(keys, site=u, roster, round_tag, received)
                                 ── 32 bytes ─────────►  unmask_mean(total, seeds, round_tag, fixed)
                                                         → (total_weight, weighted mean)

Each site uploads ``[w, w * q(x)]`` masked, ``w`` its sample count and ``q`` the fixed-point
quantization (clip to ``±clip``, scale by ``2**scale_bits``, round), as unsigned 64-bit integers
modulo ``2**64``, so that the masks cancel exactly and the coordinator gets the weighted mean from
the sum alone. The masked value is ``w·q(x) + PRG(self seed) + Σ_{v>u} PRG(s_uv) - Σ_{v<u} PRG(s_uv)``,
``s_uv`` the key both ``u`` and ``v`` derive from their X25519 agreement and the round tag. In the
sum the pairwise terms cancel; the self masks go once each site, having seen that every masked
update of the roster arrived, reveals its seed.

**Dropout: the round is redone without the dropped site, with fresh keys; there is no Shamir
recovery.** A site that does not deliver its masked update or its seed before the deadline leaves
the attempt unopenable; the coordinator starts the next attempt (a new ``round_tag``, see
:func:`round_tag`) with the sites that are left: each generates new keys and masks the same local
update again, no retraining. Why: kafeed federates a few sites, each a cluster (cross-silo), where
a dropout is rare and a redo costs one more exchange of 32-byte keys and one masked vector per
site. Bonawitz's recovery pays off for thousands of phones; it needs a second stage in which each
site sends encrypted Shamir shares of two secrets to every other, a threshold to choose, and a
Shamir implementation (Flower's uses pycryptodome's over 16-byte blocks), all for a case a redo
handles with what is already here.

What keeps a redo private, against a coordinator that follows the protocol but keeps everything it
sees (honest but curious), the model of Bonawitz et al.:

- The self mask. A late masked update of an abandoned attempt is useless without its seed, and a
  site reveals its seed only when the coordinator says every update of the roster arrived
  (:func:`reveal_seed` refuses otherwise).
- **One reveal per round, per site.** The site trainer records durably, before sending a seed,
  that it revealed one in round N, and refuses to reveal for another attempt of round N (say the
  site revealed for attempt 0, another site crashed before revealing, and the round went on to
  attempt 1 without it: revealing again would give the coordinator two sums whose difference is
  the crashed site's update). Such a round cannot be opened; the coordinator closes it without an
  aggregate and the sites' updates go into the next round's training.
- Fresh keys per attempt, and the round tag inside every key derivation, so no mask repeats.

What is not protected: the sum itself (with two sites, each learns the other's update from the sum
and its own); the sample counts' sum; a coordinator that lies about who is in the roster to
different sites (an active adversary: Bonawitz's malicious variant signs the rosters); the
clipping, which bounds what one site's values can be.

Fixed point: ``q(x) = round(clip(x, -clip, clip) * 2**scale_bits)``, so the error per value is at
most ``2**-(scale_bits+1)`` (plus what clipping cuts). The sum is exact while
``total_weight * clip * 2**scale_bits < 2**63``; :func:`mask` and :func:`unmask_mean` refuse a
weight that could overflow.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Self

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from kafeed.errors import SecureAggregationError

__all__ = [
    "FixedPoint",
    "MaskedUpdate",
    "SiteKeys",
    "mask",
    "quantize",
    "reveal_seed",
    "round_tag",
    "sum_masked",
    "unmask",
    "unmask_mean",
]

#: Length of a public key and of a self seed, in bytes.
KEY_BYTES = 32
_VERSION = 1
_MAGIC = b"KFSA"
_HEADER = struct.Struct("<4sBIHHQ")  # magic, version, reserved, len(tag), len(site), length
_OVERFLOW = 2**63


def round_tag(federation: str, round: int, attempt: int) -> str:
    """The tag that binds keys, masks and seeds to one attempt of one round of one federation."""
    if round < 0 or attempt < 0:
        raise SecureAggregationError(f"A round and an attempt are counted from 0, got {round}/{attempt}.")
    if not federation or "/" in federation:
        raise SecureAggregationError(f"A federation name must be non-empty without '/', got {federation!r}.")
    return f"{federation}/{round}/{attempt}"


@dataclass(frozen=True, kw_only=True)
class FixedPoint:
    """How floats become integers modulo 2**64: clipped to ``±clip``, scaled by ``2**scale_bits``.

    Every site of a federation and its coordinator use the same one (Flower's SecAgg+ defaults
    clip at 8.0 too). ``max_total_weight`` is the largest sum of sample counts that the 64-bit
    modulus holds exactly (about 6.9e10 at the defaults).
    """

    clip: float = 8.0
    scale_bits: int = 24

    def __post_init__(self) -> None:
        if not (0 < self.clip < 2**20) or not np.isfinite(self.clip):
            raise SecureAggregationError(f"FixedPoint.clip must be in (0, 2**20), got {self.clip}.")
        if not 1 <= self.scale_bits <= 40:
            raise SecureAggregationError(f"FixedPoint.scale_bits must be in 1..40, got {self.scale_bits}.")
        if self.max_total_weight < 1:
            raise SecureAggregationError("FixedPoint.clip * 2**scale_bits leaves no room for a weight.")

    @property
    def max_total_weight(self) -> int:
        """The largest sum of sample counts whose weighted sum stays exact modulo 2**64."""
        return int((_OVERFLOW - 1) // (int(np.ceil(self.clip * 2**self.scale_bits)) + 1))


@dataclass(frozen=True, eq=False)
class SiteKeys:
    """One site's secrets for one attempt of a round: an X25519 key pair and a 32-byte self seed.

    Never stored and never reused across attempts: a redo generates new keys.
    """

    _private: X25519PrivateKey
    _seed: bytes = field(repr=False)

    @classmethod
    def generate(cls) -> Self:
        """Fresh keys from the operating system's randomness."""
        return cls(X25519PrivateKey.generate(), os.urandom(KEY_BYTES))

    def public_bytes(self) -> bytes:
        """The 32 bytes a site publishes for the roster."""
        return self._private.public_key().public_bytes(serialization.Encoding.Raw,
                                                       serialization.PublicFormat.Raw)


@dataclass(frozen=True, eq=False)
class MaskedUpdate:
    """One site's masked ``[w, w * q(x)]``: what the coordinator stores, and all it sees of the site.

    ``values`` is unsigned 64-bit, ``length`` + 1 long (the weight first).
    """

    site: str
    round_tag: str
    values: npt.NDArray[np.uint64] = field(repr=False)

    @property
    def length(self) -> int:
        """The length of the model vector (without the weight)."""
        return int(self.values.shape[0]) - 1

    def to_bytes(self) -> bytes:
        """The wire form: a short header (magic, version, tag, site, length), then little-endian values."""
        tag, site = self.round_tag.encode(), self.site.encode()
        header = _HEADER.pack(_MAGIC, _VERSION, 0, len(tag), len(site), self.length)
        return header + tag + site + self.values.astype("<u8", copy=False).tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Read :meth:`to_bytes`'s form back; a torn or foreign record is refused."""
        if len(data) < _HEADER.size:
            raise SecureAggregationError(f"A masked update of {len(data)} bytes is too short to hold one.")
        magic, version, _, tag_len, site_len, length = _HEADER.unpack_from(data)
        if magic != _MAGIC or version != _VERSION:
            raise SecureAggregationError(f"Not a masked update of this version (magic {magic!r}, "
                                         f"version {version}).")
        start = _HEADER.size + tag_len + site_len
        if len(data) != start + 8 * (length + 1):
            raise SecureAggregationError(f"A masked update of length {length} should be "
                                         f"{start + 8 * (length + 1)} bytes, got {len(data)}.")
        tag = data[_HEADER.size:_HEADER.size + tag_len].decode()
        site = data[_HEADER.size + tag_len:start].decode()
        values = np.frombuffer(data, dtype="<u8", offset=start).astype(np.uint64)
        return cls(site, tag, values)


def quantize(vector: npt.ArrayLike, weight: int, fixed: FixedPoint) -> npt.NDArray[np.uint64]:
    """``[w, w * q(x)]`` modulo 2**64, before masking: what the unmasked sum adds up exactly."""
    x = np.asarray(vector)
    if x.ndim != 1 or not np.issubdtype(x.dtype, np.floating):
        raise SecureAggregationError(f"An update must be a flat float vector, got shape {x.shape} of "
                                     f"{x.dtype}.")
    if not np.all(np.isfinite(x)):
        raise SecureAggregationError("An update holds NaN or infinite values; nothing was masked.")
    if isinstance(weight, bool) or int(weight) != weight or not 0 < weight <= fixed.max_total_weight:
        raise SecureAggregationError(f"A weight must be a sample count in 1..{fixed.max_total_weight}, "
                                     f"got {weight}.")
    q = np.rint(np.clip(x.astype(np.float64), -fixed.clip, fixed.clip) * 2.0**fixed.scale_bits)
    out = np.empty(x.shape[0] + 1, dtype=np.uint64)
    out[0] = np.uint64(weight)
    # int64 products cannot overflow: |w * q| < max_total_weight * clip * 2**scale_bits < 2**63.
    out[1:] = (q.astype(np.int64) * np.int64(weight)).view(np.uint64)
    return out


def mask(keys: SiteKeys, *, site: str, roster: Mapping[str, bytes], round_tag: str,
         vector: npt.ArrayLike, weight: int, fixed: FixedPoint) -> MaskedUpdate:
    """Site ``site``'s masked ``[w, w * q(vector)]`` for the attempt ``round_tag``.

    ``roster`` maps every site of the attempt (this one included) to its public key bytes, as the
    coordinator announced it; this site's own entry must be its own key.
    """
    _check_roster(roster, site)
    if roster[site] != keys.public_bytes():
        raise SecureAggregationError(f"The roster's key for {site!r} is not this site's key for "
                                     f"{round_tag}; was it generated for another attempt?")
    plain = quantize(vector, weight, fixed)
    masked = plain + _stream(keys._seed, _info(b"self", round_tag, site), plain.shape[0])
    for peer, public in sorted(roster.items()):
        if peer == site:
            continue
        shared = keys._private.exchange(X25519PublicKey.from_public_bytes(public))
        pad = _stream(shared, _info(b"pair", round_tag, *sorted((site, peer))), plain.shape[0])
        # The lower id adds the pad and the higher one subtracts it, so each pair cancels in the sum.
        masked = masked + pad if site < peer else masked - pad
    return MaskedUpdate(site, round_tag, masked)


def sum_masked(updates: Iterable[MaskedUpdate], *, roster: Iterable[str], round_tag: str,
               length: int) -> npt.NDArray[np.uint64]:
    """The sum modulo 2**64 of one masked update from each site of the roster, still self-masked.

    Refused, naming the culprit: an update of another attempt, of the wrong length, from a site
    outside the roster, twice from one site, or a roster site missing (redo without it).
    """
    expected = set(roster)
    total = np.zeros(length + 1, dtype=np.uint64)
    seen: set[str] = set()
    for update in updates:
        if update.round_tag != round_tag:
            raise SecureAggregationError(f"The update of {update.site!r} belongs to {update.round_tag}, "
                                         f"not {round_tag}.")
        if update.site not in expected:
            raise SecureAggregationError(f"{update.site!r} is not in the roster of {round_tag}.")
        if update.site in seen:
            raise SecureAggregationError(f"{update.site!r} sent two updates for {round_tag}.")
        if update.values.shape != total.shape or update.values.dtype != np.uint64:
            raise SecureAggregationError(f"The update of {update.site!r} has {update.length} values, "
                                         f"the model {length}.")
        seen.add(update.site)
        total += update.values
    if missing := sorted(expected - seen):
        raise SecureAggregationError(f"No masked update from {', '.join(missing)} for {round_tag}.",
                                     hint="Redo the round without them, with fresh keys.")
    return total


def reveal_seed(keys: SiteKeys, *, site: str, roster: Mapping[str, bytes], round_tag: str,
                received: Iterable[str]) -> bytes:
    """The site's self seed for ``round_tag``, given only when every roster site's update arrived.

    ``received`` is the coordinator's list of the sites whose masked updates it holds. The caller
    records durably that it revealed in this round before sending, and never calls this for a
    second attempt of the same round (see the module docstring).
    """
    _check_roster(roster, site)
    if roster[site] != keys.public_bytes():
        raise SecureAggregationError(f"These keys are not {site!r}'s keys for {round_tag}.")
    got = set(received)
    if got != set(roster):
        raise SecureAggregationError(
            f"{round_tag}: the coordinator holds updates from {sorted(got)}, the roster is "
            f"{sorted(roster)}; a seed is revealed only for a complete roster.",
            hint="The coordinator redoes the round without the missing sites.")
    return keys._seed


def unmask(total: npt.NDArray[np.uint64], *, seeds: Mapping[str, bytes],
           round_tag: str) -> npt.NDArray[np.uint64]:
    """Remove the self masks from :func:`sum_masked`'s total: the exact sum of the sites' ``quantize``.

    ``seeds`` holds each roster site's revealed seed.
    """
    if total.ndim != 1 or total.dtype != np.uint64 or total.shape[0] < 1:
        raise SecureAggregationError(f"A masked total is a flat uint64 vector, got {total.shape} of "
                                     f"{total.dtype}.")
    plain = total.copy()
    for site, seed in sorted(seeds.items()):
        if len(seed) != KEY_BYTES:
            raise SecureAggregationError(f"The seed of {site!r} is {len(seed)} bytes, not {KEY_BYTES}.")
        plain -= _stream(seed, _info(b"self", round_tag, site), total.shape[0])
    return plain


def unmask_mean(total: npt.NDArray[np.uint64], *, seeds: Mapping[str, bytes], round_tag: str,
                fixed: FixedPoint) -> tuple[int, npt.NDArray[np.float32]]:
    """:func:`unmask`, then decoded: ``(total_weight, weighted mean)``.

    A missing or wrong seed, or a total of another attempt, is refused: the weight it would
    decode is not a plausible sample count (a random one passes with odds of about 2**-28 at the defaults).
    """
    plain = unmask(total, seeds=seeds, round_tag=round_tag)
    weight = int(plain[0])
    if not 0 < weight <= fixed.max_total_weight:
        raise SecureAggregationError(
            f"{round_tag}: the unmasked total weight is {weight}, not a sample count; a seed is missing "
            "or wrong, or an update was masked for another roster.",
            hint="Redo the round with fresh keys.")
    signed = plain[1:].view(np.int64).astype(np.float64)
    mean = signed / (float(weight) * 2.0**fixed.scale_bits)
    return weight, mean.astype(np.float32)


def _check_roster(roster: Mapping[str, bytes], site: str) -> None:
    if site not in roster:
        raise SecureAggregationError(f"{site!r} is not in the roster ({sorted(roster)}).")
    if len(roster) < 2:
        raise SecureAggregationError("A roster of one site would hand the coordinator its update; "
                                     "secure aggregation needs two sites or more.")
    for peer, public in roster.items():
        if not peer or len(public) != KEY_BYTES:
            raise SecureAggregationError(f"The roster's entry for {peer!r} is not a {KEY_BYTES}-byte "
                                         "public key.")
    if len(set(roster.values())) != len(roster):
        raise SecureAggregationError("Two sites of the roster share a public key.")


def _info(kind: bytes, round_tag: str, *sites: str) -> bytes:
    parts = [b"kafeed-secagg-v1", kind, round_tag.encode(), *(s.encode() for s in sites)]
    # Length-prefixed, so that no two different (tag, sites) give the same info.
    return b"".join(struct.pack("<I", len(p)) + p for p in parts)


def _stream(secret: bytes, info: bytes, count: int) -> npt.NDArray[np.uint64]:
    """``count`` pseudo-random uint64s: AES-256-CTR keyed by HKDF-SHA256(secret, info)."""
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(secret)
    # Each key is used for one stream only (the info names the attempt and the sites), so a zero
    # counter block is safe.
    encryptor = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    data = encryptor.update(bytes(8 * count)) + encryptor.finalize()
    return np.frombuffer(data, dtype="<u8").astype(np.uint64)

