"""The files' datasets: :class:`FileTokenDataset`, a token loader over local Parquet/Arrow files.

It is a :class:`kafeed.KafkaTokenDataset` whose source is files (kafeed.loader.file_source)
instead of a topic: the same windows, shuffle, state, StreamLoader and workers, so a team
can start from files and later move to Kafka without changing its training loop.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from kafeed.loader.dataset import KafkaTokenDataset
from kafeed.loader.settings import LoaderSettings

DEFAULT_NAME = "files"


Files = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def file_options(files: Files, name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The loader settings' fields that make ``files`` a source named ``name``."""
    paths = [files] if isinstance(files, str | os.PathLike) else list(files)
    return {**options, "files": tuple(os.fspath(p) for p in paths), "topics": (name,)}


class FileTokenDataset(KafkaTokenDataset):
    """Packed windows of ``seq_len + 1`` token ids from local Parquet or Arrow files.

    ``FileTokenDataset("corpus/", seq_len=2048, eos_id=50256)``: ``files`` names files,
    directories or glob patterns; each row is one document, a list of token ids (the
    ``column=`` named, else ``input_ids`` or ``tokens``, or the Parquet files ``kafeed
    archive`` wrote). Files are dealt to readers (ranks x DataLoader workers) by their
    sorted order, and a saved state resumes at the row it stopped at. ``name`` is the
    source's name in the state and the metrics. Every other keyword is a
    :class:`LoaderSettings` field, as for :class:`KafkaTokenDataset`.
    """

    def __init__(self, files: Files, *, name: str = DEFAULT_NAME,
                 settings: LoaderSettings | None = None, **options: Any) -> None:
        merged = file_options(files, name, options)
        super().__init__(merged.pop("topics"), settings=settings, **merged)
