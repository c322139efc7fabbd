"""The files' datasets: :class:`FileTokenDataset`, a token loader over local Parquet/Arrow files.

It is a :class:`kafeed.KafkaTokenDataset` whose source is files (kafeed.loader.sources.file_source)
instead of a topic: the same windows, shuffle, state, StreamLoader and workers, so a team
can start from files and later move to Kafka without changing its training loop.

A position in a file is only as good as the file it names. The dataset resolves its files
once, when it is made, and its state's fingerprint names each shard's file (its path
relative to the directory or pattern that found it) and size, in shard order
(:class:`FileSet`). Resuming keeps every saved file at its shard number and numbers files
added since after them, so they are read from their start; a saved file that is gone or
whose size changed is refused with :class:`~kafeed.errors.ResumeMismatch` (its row count
is checked against the saved ``end`` when it opens). A state saved without names (kafeed
before file names were kept) resumes as it was taken: shards in sorted path order.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafeed.errors import ConfigError, ResumeMismatch
from kafeed.loader.dataset import KafkaTokenDataset
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.file_rows import named
from kafeed.loader.state.checkpoint import check_state, empty_state, fingerprint
from kafeed.loader.state.rank_states import loadable_state

DEFAULT_NAME = "files"
STATE_FILES = "files"  # the fingerprint's key for the files, in shard order

Files = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]

_CHANGED_HINT = ("Put the files back as they were to resume, or start without the state; "
                 "files may be added beside them, never changed, renamed or removed.")


def file_options(files: Files, name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The loader settings' fields that make ``files`` a source named ``name``."""
    paths = [files] if isinstance(files, str | os.PathLike) else list(files)
    if not paths:
        raise ConfigError("files= names no file (an empty list).",
                          hint="Pass Parquet or Arrow files, a directory of them, or a glob that "
                          "matches some.")
    return {**options, "files": tuple(os.fspath(p) for p in paths), "topics": (name,)}


@dataclass(frozen=True)
class FileSet:
    """The files a dataset reads, in shard order: each one's path, name and size in bytes."""

    files: tuple[tuple[Path, str, int], ...]

    @classmethod
    def scan(cls, specs: tuple[str, ...]) -> FileSet:
        """The files ``specs`` name, in sorted path order (how a fresh start numbers them)."""
        found = sorted(named(specs), key=lambda pn: str(pn[0]))
        return cls(tuple((path, name, path.stat().st_size) for path, name in found))

    def manifest(self) -> list[list[Any]]:
        """``[[name, size], ...]`` in shard order: the state's record of the files."""
        return [[name, size] for _, name, size in self.files]

    def resumed(self, saved: Any) -> FileSet:
        """These files numbered as the saved ``manifest`` numbered them, new ones after;
        refuses a saved file that is gone or whose size changed."""
        if not isinstance(saved, list) or not all(
                isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and type(e[1]) is int
                for e in saved):
            raise ResumeMismatch("The saved loader state's fingerprint.files is not a list of "
                                 "[name, size] pairs.",
                                 hint="Pass a state taken from state_dict(), unchanged.")
        now = {name: (path, name, size) for path, name, size in self.files}
        ordered = []
        for name, size in saved:
            if name not in now:
                raise ResumeMismatch(f"The saved loader state reads file {name!r}, which is no longer "
                                     "among the files.", hint=_CHANGED_HINT)
            if now[name][2] != size:
                raise ResumeMismatch(f"File {name!r} has {now[name][2]:,} bytes, not the {size:,} it had "
                                     "when the loader state was saved: its positions no longer hold.",
                                     hint=_CHANGED_HINT)
            ordered.append(now.pop(name))
        return FileSet((*ordered, *(f for f in self.files if f[1] in now)))


class FileTokenDataset(KafkaTokenDataset):
    """Packed windows of ``seq_len + 1`` token ids from local Parquet or Arrow files.

    ``FileTokenDataset("corpus/", seq_len=2048, eos_id=50256)``: ``files`` names files,
    directories or glob patterns; each row is one document, a list of token ids (the
    ``column=`` named, else ``input_ids`` or ``tokens``, or the Parquet files ``kafeed
    archive`` wrote). The files are found when the dataset is made and dealt to readers
    (ranks x DataLoader workers) by their sorted order; a saved state names each file and
    its size and resumes at the row it stopped at, files added since read as new ones, a
    changed or missing one refused. ``name`` is the source's name in the state and the
    metrics. Every other keyword is a :class:`LoaderSettings` field, as for
    :class:`KafkaTokenDataset`.
    """

    def __init__(self, files: Files, *, name: str = DEFAULT_NAME,
                 settings: LoaderSettings | None = None, **options: Any) -> None:
        merged = file_options(files, name, options)
        super().__init__(merged.pop("topics"), settings=settings, **merged)
        self._use(FileSet.scan(self.settings.files))

    def _use(self, files: FileSet) -> None:
        # Readers (in DataLoader workers too) read exactly these files in this order.
        self.file_set = files
        self.settings = self.settings.model_copy(update={"files": tuple(str(p) for p, _, _ in files.files)})

    def _fingerprint(self, files: Any) -> dict[str, Any]:
        out = fingerprint(self.settings)
        if files is not None:
            out[STATE_FILES] = files
        return out

    def empty_state(self) -> dict[str, Any]:
        return empty_state(self.settings, self._fingerprint(self.file_set.manifest()))

    def _saved_files(self, state: Any) -> Any:
        saved = state.get("fingerprint") if isinstance(state, dict) else None
        return saved.get(STATE_FILES) if isinstance(saved, dict) else None

    def check_state(self, state: Any) -> dict[str, Any]:
        state = loadable_state(state)  # every rank's states, merged
        saved = self._saved_files(state)
        if saved is not None:
            self.file_set.resumed(saved)
        return check_state(state, self.settings, expected=self._fingerprint(saved))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        saved = self._saved_files(loadable_state(state))
        if saved is not None:
            self._use(self.file_set.resumed(saved))
