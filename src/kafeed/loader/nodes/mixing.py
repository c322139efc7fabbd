"""Mixtures without torch: the weights, the schedule that interleaves windows, the state.

A mixture reads several sources (a source is one topic, or several named together) and
hands out windows from each at set *token* proportions. Every window holds ``seq_len + 1``
tokens whichever source it comes from, so a schedule over windows is a schedule over
tokens. :class:`MixSchedule` is a smooth weighted round-robin: each pick adds every
active source's weight to its credit and takes the source with the most credit, which
then pays the total weight back. Over any run the windows of each source stay within
one or two windows of ``weight x picks``, with no randomness to average out; the seed
only sets each reader's starting credits, so readers do not all open with the same source.

A mixture reader's entry in the loader state (kafeed.loader.state.checkpoint) is the
mixture node's state (kafeed.loader.nodes.node)::

    {"version": 1, "index": int,
     "sources": {"<source>": <a token stream's entry>},
     "schedule": {"version": 1, "weights": {...}, "credits": {...}},
     "tokens": {"<source>": int}, "dry": [...]}

``tokens`` counts the window tokens each source delivered (a padded tail window counts
whole). Weights may change at resume: the positions are kept, the credits start again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from kafeed.errors import ConfigError, ResumeMismatch
from kafeed.loader.nodes.node import NODE_VERSIONS, check_node, require_keys
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state.checkpoint import check_reader, fingerprint

OnDry = Literal["end", "drop"]
ENTRY_KEYS = ("index", "sources", "schedule", "tokens", "dry")  # besides "version"
SCHEDULE_KEYS = ("weights", "credits")


SAFE_WEIGHTS = (1e-300, 1e300)
"""The largest weight kept as given lies here; outside, the weights are divided by it."""


def check_weights(weights: Any) -> dict[str, float]:
    """``{source: weight}`` checked: numbers, finite, not negative, not all zero; scaled to
    a largest weight of 1 where the largest lies outside :data:`SAFE_WEIGHTS`."""
    if not isinstance(weights, Mapping) or not weights:
        raise ConfigError("A mixture needs a mapping of source to weight such as {'web': 0.6, 'code': 0.4}.")
    out: dict[str, float] = {}
    for name, weight in weights.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"Mixture source {name!r} is not a name; name each source by its topic.")
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ConfigError(f"Mixture weight of {name!r} is {weight!r}, not a number.")
        if not math.isfinite(weight):
            raise ConfigError(f"Mixture weight of {name!r} is {weight}; weights must be finite numbers.")
        if weight < 0:
            raise ConfigError(f"Mixture weight of {name!r} is {weight}; weights must not be negative.")
        out[name] = float(weight)
    top = max(out.values())
    if not top > 0:
        raise ConfigError("Every mixture weight is zero; give at least one source a positive weight.")
    if not SAFE_WEIGHTS[0] <= top <= SAFE_WEIGHTS[1]:
        # Only the proportions matter: near the ends of the float range their sum overflows
        # or their credits lose every bit (1e308 or 1e-320 each gave 33:6567 and 0:6600).
        out = {name: weight / top for name, weight in out.items()}
    return out


def parse_mix(text: str) -> dict[str, float]:
    """``"web=0.6,code=0.3"`` -> ``{"web": 0.6, "code": 0.3}`` (checked)."""
    weights: dict[str, float] = {}
    for part in text.split(","):
        raw, sep, value = part.strip().partition("=")
        name = raw.strip()
        if not sep or not name:
            raise ConfigError(f"--mix part {part.strip()!r} is not TOPIC=WEIGHT (e.g. web=0.6,code=0.4).")
        try:
            weight = float(value)
        except ValueError:
            raise ConfigError(f"Mixture weight of {name!r} is {value.strip()!r}, not a number.") from None
        if name in weights:
            raise ConfigError(f"--mix names {name!r} twice; give each topic once.")
        weights[name] = weight
    return check_weights(weights)


def normalised(weights: Mapping[str, float], active: Sequence[str]) -> dict[str, float]:
    """The weights of ``active`` sources scaled to sum to 1 (what a dropped source leaves)."""
    total = sum(weights[s] for s in active)
    return {s: weights[s] / total for s in active} if total > 0 else {}


class MixSchedule:
    """Which source each next window comes from (smooth weighted round-robin): the
    mixture's ``schedule`` node (kafeed.loader.nodes.node), its state its credits."""

    def __init__(self, weights: Mapping[str, float], *, seed: int, index: int) -> None:
        self.weights = dict(weights)
        self.names = sorted(weights)
        self.credits = self.initial_credits(seed, index)
        self._seed = (seed, index)

    def initial_credits(self, seed: int, index: int) -> dict[str, float]:
        """Seeded starting credits, below one round of weight each."""
        total = sum(self.weights.values())
        draws = np.random.Generator(np.random.PCG64([seed, index])).random(len(self.names))
        return {name: float(d) * self.weights[name] / total
                for name, d in zip(self.names, draws, strict=True)}

    def pick(self, count: int, dry: Sequence[str] = ()) -> list[str]:
        """The sources of the next ``count`` windows, skipping ``dry`` and zero-weight ones
        (their share goes to the rest in proportion); [] when none is left."""
        active = [s for s in self.names if self.weights[s] > 0 and s not in dry]
        if not active:
            return []
        weights = [self.weights[s] for s in active]
        total = sum(weights)
        credits = [self.credits[s] for s in active]
        sources = range(len(active))
        picks: list[str] = []
        for _ in range(count):  # a window at a time, on plain lists: this runs every batch
            best, best_credit = 0, -math.inf
            for i in sources:
                credit = credits[i] + weights[i]
                credits[i] = credit
                if credit > best_credit:  # ties go to the first name: deterministic
                    best, best_credit = i, credit
            credits[best] -= total
            picks.append(active[best])
        self.credits.update(zip(active, credits, strict=True))
        return picks

    def state(self) -> dict[str, Any]:
        return {"version": NODE_VERSIONS["schedule"], "weights": dict(self.weights),
                "credits": dict(self.credits)}

    def reset(self, state: dict[str, Any]) -> None:
        """Continue a saved schedule; with other weights than it was saved with, the
        credits start again (the new proportions hold from here on)."""
        check_node(state, "schedule", SCHEDULE_KEYS)
        if dict(state["weights"]) == self.weights:
            self.credits = {name: float(state["credits"][name]) for name in self.names}
        else:
            self.credits = self.initial_credits(*self._seed)


# -- the state ---------------------------------------------------------------------------
def mixture_fingerprint(settings: LoaderSettings, sources: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """What must not change between save and resume: the token loader's fingerprint plus
    which topics make each source (the weights may change)."""
    return {**fingerprint(settings), "sources": {name: sorted(sources[name]) for name in sorted(sources)}}


def _fail(path: str, problem: str) -> ResumeMismatch:
    return ResumeMismatch(f"The saved loader state's {path} {problem}.",
                          hint="Pass a state taken from a StreamLoader over the same Mixture, unchanged.")


def check_entry(entry: Any, path: str, source_settings: Mapping[str, LoaderSettings]) -> None:
    """A mixture reader's entry: one checked token stream entry per source, the schedule
    and the counts."""
    check_node(entry, "mixture", ENTRY_KEYS, path)
    index = entry["index"]
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise _fail(f"{path}.index", f"is not a reader number (got {index!r})")
    require_keys(entry["sources"], sorted(source_settings), f"{path}.sources")
    for name, settings in source_settings.items():
        reader = entry["sources"][name]
        check_reader(reader, f"{path}.sources[{name!r}]", settings)
        if reader["index"] != index:
            raise _fail(f"{path}.sources[{name!r}].index", f"is {reader['index']}, not {index}")
    schedule = entry["schedule"]
    check_node(schedule, "schedule", SCHEDULE_KEYS, f"{path}.schedule")
    names = sorted(source_settings)
    for key in SCHEDULE_KEYS:
        require_keys(schedule[key], names, f"{path}.schedule.{key}")
        for name, value in schedule[key].items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise _fail(f"{path}.schedule.{key}[{name!r}]", f"is not a finite number (got {value!r})")
    require_keys(entry["tokens"], names, f"{path}.tokens")
    for name, value in entry["tokens"].items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _fail(f"{path}.tokens[{name!r}]", f"is not a token count (got {value!r})")
    dry = entry["dry"]
    if not isinstance(dry, list) or any(n not in source_settings for n in dry) or len(set(dry)) != len(dry):
        raise _fail(f"{path}.dry", f"is not a list of distinct sources (got {dry!r})")


def source_state(state: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The plain loader state of one source, cut out of a (checked) mixture state: what
    that source's reader resumes from, exactly or elastically (kafeed.loader.state.resume)."""
    if not state["readers"]:
        return None
    return {**state, "readers": {key: reader["sources"][name] for key, reader in state["readers"].items()}}


def tokens_delivered(state: Mapping[str, Any]) -> dict[str, int]:
    """Window tokens each source delivered, over every reader of a (merged) mixture state."""
    totals: dict[str, int] = {}
    for reader in state.get("readers", {}).values():
        for name, count in reader.get("tokens", {}).items():
            totals[name] = totals.get(name, 0) + int(count)
    return dict(sorted(totals.items()))
