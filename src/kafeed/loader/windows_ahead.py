"""One mixture source's windows, cut a block ahead of the batches that hand them out.

A mixture hands out a few windows of each source per batch; asking the source's token
stream for them batch by batch costs a packer pop, a delivery and a copy per source per
batch. :class:`WindowsAhead` cuts a block of windows at once, uncopied
(:meth:`kafeed.loader.stream.TokenStream.cut_ahead`: views of the records' tokens), and the
mixture copies each batch once, from those views, in the schedule's order.

The state stays what the stream would save had it cut only the windows handed out: a
record is delivered (the reader's positions move past it) only once the window with its
last token is handed out, and the block's documents not yet finished go in front of the
packer's carry-over, each with the tokens of it already handed out. Exact and elastic
resume read that as they read any token reader's entry, and re-read those documents.
Blocks start where the source's windows handed out reach a multiple of the block size
(counted across resumes), so a resumed run cuts the same blocks as one never stopped, and
saves the same states.
"""

from __future__ import annotations

from typing import Any

from kafeed.loader.packing import Span, Window
from kafeed.loader.reader import Ref
from kafeed.loader.stream import TokenStream


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
        self.spans: list[Span] = []  # the block's documents, in order (kafeed.loader.packing.Span)
        self.carry: list[list[Any]] = []  # their carry-over entries, as before the block
        self.done = 0  # spans delivered
        self.ended = False
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
            return False
        self.windows = windows
        self.pos = self.done = 0
        self.spans = spans
        self.carry = [[ref[0], ref[1], emitted] for ref, _, emitted, _ in spans]
        self.ended = len(windows) < size  # the stream is used up
        return True

    def state_dict(self) -> dict[str, Any]:
        """The stream's reader entry as of the windows handed out (see the module doc)."""
        entry = self.stream.state_dict()
        done = self.done
        if done < len(self.spans):
            upto = self.pos * self.window
            _, first, emitted, _ = self.spans[done]
            mine = self.carry[done:]
            if upto > first:  # the one document partly handed out
                mine[0] = [mine[0][0], mine[0][1], emitted + upto - first]
            carry = entry["carry"]
            last = self.carry[-1]
            if carry and carry[0][0] == last[0] and carry[0][1] == last[1]:
                carry = carry[1:]  # the block's last document, which goes on past it
            entry["carry"] = mine + carry
        return entry
