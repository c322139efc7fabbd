"""The cold tier: topics archived exactly once to Apache Iceberg tables (docs/archive.md).

- :mod:`~kafeed.archive.rows`: records to rows and back (pure);
- :mod:`~kafeed.archive.commit`: which rows a commit may add (pure);
- :mod:`~kafeed.archive.position`: the positions in the table's snapshot summaries;
- :mod:`~kafeed.archive.sink`: the sink loop; :mod:`~kafeed.archive.status`,
  :mod:`~kafeed.archive.compact`: what is archived, and rewriting small files.

pyiceberg and pyarrow load when a function here runs, not on import.
"""

from __future__ import annotations

from kafeed.archive.settings import ArchiveSettings, CatalogSettings

__all__ = ["ArchiveSettings", "CatalogSettings"]
