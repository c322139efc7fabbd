"""Source discovery: paths, directories, globs, SQL and stdin → an ordered list of :class:`Source`.

A file's format comes from its suffix, looking past a compression suffix
(``.gz .zst .bz2 .xz``); whether it is compressed is decided by its first bytes
when it is read (:mod:`kafeed.ingest.compressed`).

A source's ``identity`` pins what a resume may continue: for a file its
absolute path, size and modification time, for SQL the DSN (without password)
and query, for stdin just ``stdin`` (the same stream must be piped again).
"""

from __future__ import annotations

import glob
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kafeed.errors import ConfigError
from kafeed.ingest.compressed import SUFFIXES as COMPRESSED_SUFFIXES

SourceKind = Literal["jsonl", "csv", "parquet", "text", "sql", "stdin"]

SUFFIXES: dict[str, SourceKind] = {
    ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet", ".pq": "parquet",
    ".txt": "text",
}


@dataclass(frozen=True)
class Source:
    kind: SourceKind
    name: str                 # what lineage metadata records: the path, "stdin" or "sql:<dsn>"
    path: Path | None = None
    size: int | None = None
    identity: str = ""


def redact_dsn(dsn: str) -> str:
    """The DSN with any password replaced, fit for logs and lineage."""
    dsn = re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password=)\S+", r"\1***", dsn)


def _file_source(path: Path, kind: SourceKind) -> Source:
    st = path.stat()
    resolved = path.resolve()
    return Source(kind=kind, name=str(path), path=resolved, size=st.st_size,
                  identity=f"{resolved}|{st.st_size}|{st.st_mtime_ns}")


def _kind_of(path: Path) -> SourceKind | None:
    """The format a name says, under any compression suffix (``docs.jsonl.gz`` → jsonl).

    Parquet compresses inside the file, so ``.parquet.gz`` is not a source.
    """
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSED_SUFFIXES:
        kind = SUFFIXES.get(suffixes[-2]) if len(suffixes) >= 2 else None
        return None if kind == "parquet" else kind
    return SUFFIXES.get(path.suffix.lower())


def _known() -> str:
    return (f"{', '.join(sorted(SUFFIXES))}, each but .parquet optionally followed by "
            f"{', '.join(sorted(COMPRESSED_SUFFIXES))}")


def discover(args: list[str], *, sql: str | None = None, dsn: str | None = None) -> list[Source]:
    """Expand source arguments in a stable order; every problem is a :class:`ConfigError`."""
    sources: list[Source] = []
    if sql is not None or dsn is not None:
        if not sql or not dsn:
            raise ConfigError("--sql and --dsn go together.",
                              hint='Pass both, e.g. --sql "SELECT id, text FROM docs" --dsn sqlite:///f.db.')
        digest = hashlib.sha256(f"{redact_dsn(dsn)}\n{sql}".encode()).hexdigest()[:16]
        sources.append(Source(kind="sql", name=f"sql:{redact_dsn(dsn)}", identity=f"sql|{digest}"))
    if not args and not sources:
        raise ConfigError("No sources given.", hint="Name files, directories, globs, - for stdin, or --sql.")
    for arg in args:
        if arg == "-":
            sources.append(Source(kind="stdin", name="stdin", identity="stdin"))
            continue
        if any(c in arg for c in "*?["):
            matches = sorted(glob.glob(arg, recursive=True))
            files = [Path(m) for m in matches if Path(m).is_file() and _kind_of(Path(m))]
            if not files:
                raise ConfigError(f"The glob {arg!r} matches no readable source file.",
                                  hint=f"Known suffixes: {_known()}.")
            sources.extend(_file_source(f, _kind_of(f) or "text") for f in files)
            continue
        path = Path(arg)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and _kind_of(p))
            if not files:
                raise ConfigError(f"The directory {arg} holds no readable source file.",
                                  hint=f"Known suffixes: {_known()}.")
            sources.extend(_file_source(f, _kind_of(f) or "text") for f in files)
            continue
        if not path.exists():
            raise ConfigError(f"Source file {arg} does not exist.", hint="Check the path.")
        kind = _kind_of(path)
        if kind is None:
            raise ConfigError(f"Cannot tell the format of {arg} from its suffix.",
                              hint=f"Known suffixes: {_known()}.")
        sources.append(_file_source(path, kind))
    if sum(s.kind == "stdin" for s in sources) > 1:
        raise ConfigError("stdin (-) can be read only once.")
    return sources
