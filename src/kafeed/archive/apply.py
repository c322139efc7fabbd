"""Applying a commit plan to the table: the rows it keeps and the new positions in one catalog commit."""

from __future__ import annotations

import logging
from typing import Any

from kafeed.archive.append import commit_files, write_data_files
from kafeed.archive.commit import CommitPlan
from kafeed.archive.pending import PendingCommit

log = logging.getLogger("kafeed")


def apply_plan(table: Any, plan: CommitPlan, pending: PendingCommit, files: list[Any] | None,
               properties: dict[str, str]) -> int | None:
    """Commit the rows of ``pending`` that ``plan`` keeps, with ``properties`` in the snapshot
    summary; the number of rows written, None when the commit lost a race (or its outcome is unknown).

    ``files``: the chunks' data files as written, used when every row goes in (the usual case);
    otherwise the rows the plan keeps are written again (filtering copies token lists too)."""
    from pyiceberg.exceptions import CommitFailedException
    from sqlalchemy.exc import DBAPIError

    kept = pending.records
    try:
        if files is None or plan.keep_from != {p: first for p, (first, _) in pending.ranges.items()}:
            rows = pending.rows(plan.keep_from)
            kept = rows.num_rows
            files = write_data_files(table.metadata, table.io, rows)
        commit_files(table, files, properties)
    except CommitFailedException:
        return None
    except (OSError, DBAPIError) as exc:
        # SQLite "database is locked", a dropped connection, a full disk: the outcome is
        # unknown, and deciding again on the refreshed table is safe either way.
        log.warning("kafeed archive: commit failed (%s); deciding again.", exc)
        return None
    return kept
