"""One batch as columns a rule reads: texts, sources, lengths, ...; each built when a rule first asks.

Rules run a batch at a time (:meth:`kafeed.route.RuleSet.assign`): a condition takes
the indices still in question (a numpy array) and returns those that pass, reading a
column of this batch, so no per-record object is built and a field no rule uses is
never read. The language is detected only for the records a ``language`` condition
reaches, those of one condition together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from kafeed.route.language import detect_languages
from kafeed.schema.records_pb2 import TrainingSample

Headers = Sequence[tuple[str, bytes | None]] | None  # None: no headers
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


class Columns:
    """The samples, texts and headers of one batch, at the same index each."""

    __slots__ = ("_header_maps", "_labels", "_languages", "_lengths", "_sources", "headers", "samples",
                 "texts")

    def __init__(self, samples: Sequence[TrainingSample], texts: Sequence[str],
                 headers: Sequence[Headers]) -> None:
        self.samples = samples
        self.texts = texts
        self.headers = headers
        self._lengths: Ints | None = None
        self._sources: list[str] | None = None
        self._labels: list[float | None] | None = None
        self._languages: list[str | None] | None = None
        self._header_maps: list[Mapping[str, str] | None] | None = None

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def lengths(self) -> Ints:
        """Characters of each text."""
        if self._lengths is None:
            self._lengths = np.fromiter(map(len, self.texts), dtype=np.int64, count=len(self.texts))
        return self._lengths

    @property
    def sources(self) -> list[str]:
        if self._sources is None:
            self._sources = [s.source for s in self.samples]
        return self._sources

    def source_in(self, allowed: frozenset[str]) -> Bools:
        """Per record, whether its ``source`` is one of ``allowed``."""
        return np.array([s in allowed for s in self.sources], dtype=bool)

    @property
    def labels(self) -> list[float | None]:
        """``target_values[0]``, or None for a sample without targets."""
        if self._labels is None:
            self._labels = [s.target_values[0] if s.target_values else None for s in self.samples]
        return self._labels

    def metadata(self, i: int) -> Mapping[str, str]:
        return self.samples[i].metadata

    def header_map(self, i: int) -> Mapping[str, str]:
        """Record ``i``'s headers as text (the last value of a repeated name wins)."""
        if self._header_maps is None:
            self._header_maps = [None] * len(self.texts)
        have = self._header_maps[i]
        if have is None:
            have = {k: (v or b"").decode("utf-8", "replace") for k, v in self.headers[i] or ()}
            self._header_maps[i] = have
        return have

    def languages(self, idx: list[int]) -> list[str]:
        """The detected language of each text in ``idx`` (:func:`kafeed.route.detect_language`).

        Texts not asked about before are detected together (:func:`~kafeed.route.language.detect_languages`).
        """
        if self._languages is None:
            self._languages = [None] * len(self.texts)
        have = self._languages
        missing = [i for i in idx if have[i] is None]
        if missing:
            texts = self.texts
            for i, code in zip(missing, detect_languages([texts[i] for i in missing]), strict=True):
                have[i] = code
        return [have[i] for i in idx]  # type: ignore[misc]  # every one detected above
