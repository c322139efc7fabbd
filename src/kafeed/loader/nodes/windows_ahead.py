"""One mixture source's windows, cut a block ahead of the batches that hand them out.

A mixture hands out a few windows of each source per batch; asking the source's token
stream for them batch by batch costs a packer pop, a delivery and a copy per source per
batch. :class:`WindowsAhead` cuts a block of windows at once, uncopied
(:meth:`kafeed.loader.nodes.stream.TokenStream.cut_ahead`: views of the records' tokens), and the
mixture copies each batch once, from those views, in the schedule's order.

The state stays what the stream would save had it cut only the windows handed out: a
record is delivered (the reader's positions move past it) only once the window with its
last token is handed out, and the block's documents not yet finished go in front of the
packer's carry-over, each with the tokens of it already handed out. Exact and elastic
resume read that as they read any token reader's entry, and re-read those documents.
Blocks start where the source's windows handed out reach a multiple of the block size
(counted across resumes), so a resumed run cuts the same blocks as one never stopped, and
saves the same states.

Between two cuts nothing but deliveries changes the stream, so a state as of any batch
follows from the stream's entry when the block was cut (:class:`Block`), its records in
flight then, and how far into the block the windows handed out reach: :meth:`snapshot` is
those few numbers, taken every batch, and :func:`entry_at` the entry, built only when a
state is asked for.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kafeed.loader.nodes.packing import Span, Window
from kafeed.loader.nodes.stream import TokenStream
from kafeed.loader.sources.partition import Ref


@dataclass(frozen=True)
class Block:
    """What a block's states derive from: the stream's entry right after the cut, the
    records in flight then per partition key, the block's documents and their carry-over
    entries (as in :class:`WindowsAhead`)."""

    entry: dict[str, Any]
    in_flight: dict[str, frozenset[int]]
    spans: list[Span]
    carry: list[list[Any]]


Snapshot = tuple[Block, int, int]  # the block, windows of it handed out, spans delivered


class WindowsAhead:
    """Windows of one token stream, taken a block at a time, delivered as handed out.

    ``handed``: the windows this source handed out before (an exact resume), which sets
    where blocks start.
    """

    def __init__(self, stream: TokenStream, *, handed: int = 0) -> None:
        self.stream = stream
        self.window = stream.settings.window
        self.handed = handed
        self.windows: list[Window] = []
        self.pos = 0  # windows of the block handed out
        self.spans: list[Span] = []  # the block's documents, in order (kafeed.loader.nodes.packing.Span)
        self.carry: list[list[Any]] = []  # their carry-over entries, as before the block
        self.done = 0  # spans delivered
        self.ended = False
        self.block: Block | None = None  # the stream as of the last cut (see snapshot)
        self.last_delivered: tuple[dict[str, int], list[int]] = ({}, [])

    def take(self, count: int, block: int) -> list[Window]:
        """Up to ``count`` windows (fewer only once the stream is used up), cutting blocks
        of ``block`` windows; the records they finish are delivered (:attr:`last_delivered`)."""
        out: list[Window] = []
        refs: list[Ref] = []
        while count:
            left = len(self.windows) - self.pos
            if not left:
                if self.ended or not self._cut(block - self.handed % block):
                    break
                continue
            n = count if count < left else left
            pos = self.pos
            out += self.windows[pos:pos + n]
            self.pos = pos + n
            self.handed += n
            count -= n
            # Records whose end-of-document token is in the windows handed out so far.
            spans, done, upto = self.spans, self.done, self.pos * self.window
            while done < len(spans) and spans[done][3] <= upto:
                refs.append(spans[done][0])
                done += 1
            self.done = done
        self.last_delivered = self.stream.deliver(refs)
        return out

    def _cut(self, size: int) -> bool:
        spans: list[Span] = []
        windows = self.stream.cut_ahead(size, spans)
        if windows is None:
            self.ended = True
            self.block = None  # reading to the end may have moved the reader (skipped records)
            return False
        self.windows = windows
        self.pos = self.done = 0
        self.spans = spans
        self.carry = [[ref[0], ref[1], emitted] for ref, _, emitted, _ in spans]
        self.ended = len(windows) < size  # the stream is used up
        self.block = None
        return True

    def snapshot(self) -> Snapshot:
        """The few numbers the state as of now derives from (:func:`entry_at`); cheap
        enough for every batch. The block is taken at the first snapshot after a cut:
        by then only deliveries of its own documents changed the stream, and entry_at
        applies those again, to the same effect."""
        block = self.block
        if block is None:
            parts = self.stream.reader.parts
            block = self.block = Block(self.stream.state(),
                                       {p.key: frozenset(p.in_flight) for p in parts},
                                       self.spans, self.carry)
        return block, self.pos, self.done

    def state(self) -> dict[str, Any]:
        """The stream's reader entry as of the windows handed out (see the module doc)."""
        return _with_block(self.stream.state(), self.spans, self.carry, self.pos, self.done,
                           self.window)


def entry_at(snapshot: Snapshot, window: int) -> dict[str, Any]:
    """The entry :meth:`WindowsAhead.state` gave when ``snapshot`` was taken: the
    block's entry with the records of its first ``done`` documents delivered."""
    block, pos, done = snapshot
    base = block.entry
    reader = base["reader"]
    entry = {**base,
             "reader": {**reader, "partitions": {key: {**p, "delivered": list(p["delivered"])}
                                                 for key, p in reader["partitions"].items()},
                        "stats": dict(reader["stats"])},
             "shuffle": copy.deepcopy(base["shuffle"]),
             "packer": {**base["packer"], "carry": [list(c) for c in base["packer"]["carry"]]}}
    delivered: dict[str, set[int]] = {}
    for ref, _, _, _ in block.spans[:done]:
        delivered.setdefault(ref[0], set()).add(ref[1])
    partitions = entry["reader"]["partitions"]
    for key, offsets in delivered.items():
        part = partitions.get(key)
        if part is None:  # revoked (group mode): its deliveries were not counted
            continue
        in_flight = block.in_flight[key] - offsets
        nxt = min(in_flight) if in_flight else part["read"]
        part["next"] = nxt
        part["delivered"] = sorted(o for o in {*part["delivered"], *offsets} if o >= nxt)
    return _with_block(entry, block.spans, block.carry, pos, done, window)


def _with_block(entry: dict[str, Any], spans: list[Span], carry_of: list[list[Any]], pos: int,
                done: int, window: int) -> dict[str, Any]:
    """``entry`` (the stream's, windows cut ahead not counted) with the block's documents
    not yet finished in front of its carry-over."""
    if done < len(spans):
        upto = pos * window
        _, first, emitted, _ = spans[done]
        mine = [list(c) for c in carry_of[done:]]
        if upto > first:  # the one document partly handed out
            mine[0] = [mine[0][0], mine[0][1], emitted + upto - first]
        packer = entry["packer"]
        carry = packer["carry"]
        last = carry_of[-1]
        if carry and carry[0][0] == last[0] and carry[0][1] == last[1]:
            carry = carry[1:]  # the block's last document, which goes on past it
        entry["packer"] = {**packer, "carry": mine + carry}
    return entry
