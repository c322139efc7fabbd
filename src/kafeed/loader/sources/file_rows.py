"""Local Parquet or Arrow files read by row: shard ``i`` is the ``i``-th file.

``files`` names files, directories (every ``.parquet``, ``.arrow`` and ``.feather`` file
under them) or glob patterns; the files are taken spec after spec (a directory's or a
pattern's in sorted path order) and numbered from 0, and a record's position is its row
in its file, so a state resumes in the middle of a file (kafeed.loader.file_dataset keeps
those numbers when files are added). Each file is read a row group (Parquet) or record
batch (Arrow) at a time, memory-mapped, and its rows decoded at once into views of the
column's buffers.

Two layouts are read:

- token ids, one list of integers per row (an exported Hugging Face dataset's
  ``input_ids``, say): the column ``column=`` names, else ``input_ids`` or ``tokens``,
  else the only list-of-integers column;
- the Parquet files ``kafeed archive`` writes (a ``kind`` column beside the record's
  fields), of either record kind (kafeed.loader.nodes.record_kinds); rows of another kind are
  counted bad and skipped.

pyarrow is imported when the files open: it is the ``archive`` extra. The files as a source
of the loader are kafeed.loader.sources.file_source's.
"""

from __future__ import annotations

import bisect
import glob
import os
from pathlib import Path
from typing import Any

from kafeed.errors import ConfigError, SchemaError
from kafeed.loader.nodes.record_kinds import KINDS, token_arrays
from kafeed.loader.settings import LoaderSettings

SUFFIXES = (".parquet", ".arrow", ".feather")
TOKEN_COLUMNS = ("input_ids", "tokens")
INSTALL_HINT = "Install the archive extra: pip install 'kafeed[archive]'."


def _spec_files(spec: str) -> tuple[Path, list[Path]]:
    """The files one spec names, sorted, and the folder their names are taken relative to."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, sorted((p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file()), key=str)
    if path.is_file():
        return path.parent, [path]
    if glob.has_magic(spec):
        pattern = os.path.expanduser(spec)
        parts = Path(pattern).parts
        literal = next(i for i, part in enumerate(parts) if glob.has_magic(part))
        root = Path(*parts[:literal]) if literal else Path(".")
        return root, [Path(p) for p in sorted(glob.glob(pattern, recursive=True)) if Path(p).is_file()]
    raise ConfigError(f"files= names {spec!r}, which is no file, directory or glob pattern that "
                      "exists.", hint="Pass Parquet or Arrow files, a directory of them, or a glob.")


def expand(specs: tuple[str, ...]) -> list[Path]:
    """The files ``specs`` name (files, directories, glob patterns), each once: spec after
    spec, a directory's or a pattern's files in sorted path order."""
    return [path for path, _ in named(specs)]


def named(specs: tuple[str, ...]) -> list[tuple[Path, str]]:
    """:func:`expand`'s files with their names: each one's path relative to the directory
    (or a pattern's folder) that named it, its file name when given alone; the path itself
    where two would share a name. A name stays the same when the whole folder moves."""
    if not specs:
        raise ConfigError("files= names no file.", hint="Pass Parquet or Arrow files, a directory of them, "
                          "or a glob (an empty glob result is an empty list).")
    found: dict[str, tuple[Path, str]] = {}
    for spec in specs:
        root, paths = _spec_files(spec)
        for path in paths:
            found.setdefault(os.path.abspath(path), (path, path.relative_to(root).as_posix()
                                                     if path.is_relative_to(root) else str(path)))
    if not found:
        raise ConfigError(f"files= {list(specs)} names no Parquet or Arrow file.",
                          hint=f"Pass files ending in {', '.join(SUFFIXES)}, or a directory of them.")
    counts: dict[str, int] = {}
    for _, name in found.values():
        counts[name] = counts.get(name, 0) + 1
    return [(path, name if counts[name] == 1 else os.path.abspath(path)) for path, name in found.values()]


class _File:
    """One open file: its pieces (row groups or record batches) and where each starts."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = path
        self._parquet: Any = None
        self._batches: list[Any] = []
        if path.suffix == ".parquet":
            self._parquet = pq.ParquetFile(path, memory_map=True)
            meta = self._parquet.metadata
            sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
            self.schema = self._parquet.schema_arrow
        else:
            source = pa.memory_map(str(path))
            try:
                reader: Any = pa.ipc.open_file(source)
                self._batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
            except pa.ArrowInvalid:  # an IPC stream (what Hugging Face's save_to_disk writes)
                reader = pa.ipc.open_stream(source)
                self._batches = list(reader)
            self.schema = reader.schema
            sizes = [b.num_rows for b in self._batches]
        self.starts = [0]
        for size in sizes:
            self.starts.append(self.starts[-1] + size)

    @property
    def rows(self) -> int:
        return self.starts[-1]

    def piece(self, index: int, columns: list[str]) -> Any:
        """Row group or record batch ``index``, as a table of ``columns``."""
        import pyarrow as pa

        if self._parquet is not None:
            return self._parquet.read_row_group(index, columns=columns)
        return pa.Table.from_batches([self._batches[index]]).select(columns)


class FileRows:
    """The files of ``settings.files``, their rows decoded by the record kind a chunk at a time."""

    def __init__(self, settings: LoaderSettings) -> None:
        self.settings = settings
        self.name = settings.topics[0]
        self.kind = KINDS[settings.kind]
        self.paths: list[Path] = []
        self._open: dict[int, _File] = {}
        self._cached: tuple[int, int, list[Any]] | None = None  # shard, piece, its payloads

    def open(self) -> list[int]:
        """Every shard (file) number, in path order."""
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ConfigError("Reading local files (files=) needs pyarrow.", hint=INSTALL_HINT) from None
        self.paths = expand(self.settings.files)
        return list(range(len(self.paths)))

    def _file(self, shard: int) -> _File:
        file = self._open.get(shard)
        if file is None:
            self._open.clear()  # files are read one after the other: keep one mapped
            file = self._open[shard] = _File(self.paths[shard])
        return file

    def rows(self, shard: int) -> int:
        return self._file(shard).rows

    def read(self, shard: int, first: int, most: int) -> list[Any]:
        """The payloads of up to ``most`` rows of ``shard`` from row ``first`` (None: a row of
        another record kind), at least one when ``first`` is a row; fewer at the end of a row
        group."""
        file = self._file(shard)
        if first >= file.rows:
            return []
        index = bisect.bisect_right(file.starts, first) - 1
        cached = self._cached
        if cached is None or cached[:2] != (shard, index):
            cached = self._cached = (shard, index, self._decode(file, index))
        start = file.starts[index]
        return cached[2][first - start:first - start + most]

    def _decode(self, file: _File, index: int) -> list[Any]:
        names = file.schema.names
        if "kind" in names:  # written by kafeed archive
            wanted = [c for c in self.kind.columns if c in names]
            missing = sorted(set(self.kind.columns) - set(names))
            if missing:
                raise SchemaError(f"{file.path} is an archive of another record kind (no column "
                                  f"{missing[0]!r}); this loader reads {self.kind.message} records.")
            return self.kind.from_columns(file.piece(index, wanted), None, self.settings.tokenizer)
        if not self.kind.packs:
            raise SchemaError(f"{file.path} is not a file `kafeed archive` wrote (no 'kind' column), "
                              f"so it holds no {self.kind.message} records.",
                              hint="Read token files with FileTokenDataset.")
        column = self._token_column(file)
        return token_arrays(file.piece(index, [column])[column], name=column)

    def _token_column(self, file: _File) -> str:
        import pyarrow as pa

        names = file.schema.names
        if self.settings.column is not None:
            if self.settings.column not in names:
                raise SchemaError(f"{file.path} has no column {self.settings.column!r} (it has "
                                  f"{', '.join(names)}).", hint="Name its token ids column: column=.")
            return self.settings.column
        for name in TOKEN_COLUMNS:
            if name in names:
                return name
        lists = [f.name for f in file.schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type)
                 if pa.types.is_integer(f.type.value_type)]
        if len(lists) != 1:
            raise SchemaError(f"{file.path} has {len(lists)} columns of integer lists, and none named "
                              f"{' or '.join(TOKEN_COLUMNS)}.", hint="Name its token ids column: column=.")
        return str(lists[0])

    def close(self) -> None:
        self._open.clear()
        self._cached = None
