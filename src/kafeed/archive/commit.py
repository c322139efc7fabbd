"""Which rows of a batch a commit may add, given the positions the table holds now.

A sink builds each batch on the positions it last saw in the table (``expected``). When it
commits, the table may have moved: another sink took a partition over in a rebalance, or
the sink's own previous commit landed although the call reported a failure. The rule, per
partition of the batch, with ``table`` the position now in the table:

- ``table == expected``: nothing happened in between, every row of the partition goes in;
- ``table`` ahead of ``expected``: someone archived part of it; rows from ``table`` on go in
  (none if the batch ends before it), and the sink continues from the table's position;
- ``table`` behind ``expected`` (the table was rolled back): the partition's rows are
  dropped and the sink rereads from the table's position.

The new position map is the table's, with every partition that adds rows moved to the end
of its rows. Pure: tested without a catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CommitPlan:
    #: Per partition that adds rows: the first offset kept (rows below it were archived already).
    keep_from: dict[int, int] = field(default_factory=dict)
    #: The full position map to write in the snapshot summary.
    positions: dict[int, int] = field(default_factory=dict)
    #: Partitions whose reading must continue from the table's position (``None``: from the start).
    resync: dict[int, int | None] = field(default_factory=dict)

    @property
    def adds_rows(self) -> bool:
        return bool(self.keep_from)


def plan_commit(table: Mapping[int, int], expected: Mapping[int, int | None],
                batch: Mapping[int, tuple[int, int]]) -> CommitPlan:
    """``batch``: per partition (first offset, last offset + 1) of the buffered records."""
    keep: dict[int, int] = {}
    positions = dict(table)
    resync: dict[int, int | None] = {}
    for p, (first, end) in sorted(batch.items()):
        now = table.get(p)
        exp = expected.get(p)
        if now == exp:
            keep[p] = first
            positions[p] = end
        elif now is not None and (exp is None or now > exp):
            if now < end:
                keep[p] = max(now, first)
                positions[p] = end
            else:
                resync[p] = now
        else:
            resync[p] = now
    return CommitPlan(keep_from=keep, positions=positions, resync=resync)
