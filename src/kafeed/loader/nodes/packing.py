"""Pack documents into fixed windows of ``seq_len + 1`` token ids, losslessly.

Documents are joined with ``eos_id`` after each one; windows are cut back to back, so a
window may span documents and concatenating all windows gives back the token stream
(documents and end-of-document tokens) exactly. The packer copies tokens straight into
one preallocated int64 array per batch: no per-token Python.

Its state is small because it holds references, not tokens: each document still in the
carry-over is named by its ``(partition key, offset)`` and how many of its tokens
(end-of-document token included) were already emitted. Restoring re-reads those records.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from kafeed.loader.nodes.node import NODE_VERSIONS, check_node
from kafeed.loader.sources.partition import Ref

Tokens = npt.NDArray[np.integer[Any]]
# A document that pop_windows cut: (ref, where its tokens begin in the tokens cut, tokens of
# it emitted before, where its end-of-document token falls: past the cut when unfinished).
Span = tuple[Ref, int, int, int]
# One window, uncopied: the views that make it, in order, and where documents begin in it.
Window = tuple[list[Tokens], list[int]]
STATE_KEYS = ("carry",)  # besides "version" (kafeed.loader.nodes.node)


class TokenPacker:
    """Documents in, windows out; ``pop`` returns the references it finished (a node fed by
    its stream: kafeed.loader.nodes.node)."""

    def __init__(self, window: int, eos_id: int) -> None:
        if window < 2:
            raise ValueError("window must hold at least 2 tokens")
        self.window = window
        self.eos_id = eos_id
        self._eos = np.array([eos_id], dtype=np.int64)
        self._segments: deque[list[Any]] = deque()  # [ref, tokens, emitted]
        self._available = 0

    @property
    def available(self) -> int:
        """Tokens ready to be cut (end-of-document tokens included)."""
        return self._available

    def push(self, ref: Ref, tokens: Tokens, start: int = 0) -> int:
        """Add a document; ``start`` tokens of it were already emitted before a resume.
        Returns :attr:`available` (the reader's loop, once per record, asks no property)."""
        remaining = len(tokens) + 1 - start
        if remaining <= 0:
            raise ValueError(f"document {ref} has no tokens left after {start}")
        self._segments.append([ref, tokens, start])
        self._available += remaining
        return self._available

    def pop(
        self, count: int, *, boundaries: bool = False
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_] | None, list[Ref]]:
        """Cut ``count`` tokens (at most :attr:`available`).

        Returns the tokens, where documents begin (when ``boundaries``) and the documents
        whose last token (the end-of-document token) was emitted by this call.
        """
        if count > self._available:
            raise ValueError(f"asked for {count} tokens, {self._available} available")
        # Collect views (no copy) and one end-of-document token per finished document,
        # then copy everything once with np.concatenate: Python work per document, not token.
        pieces: list[Tokens] = []
        append = pieces.append
        eos = self._eos
        firsts: list[int] = []
        finished: list[Ref] = []
        segments = self._segments
        pos = 0
        need = count
        while need:
            seg = segments[0]
            ref, tokens, emitted = seg
            length = len(tokens)
            remaining = length + 1 - emitted
            if emitted == 0:
                firsts.append(pos)
            if remaining <= need:
                if emitted < length:
                    append(tokens[emitted:] if emitted else tokens)
                append(eos)
                segments.popleft()
                finished.append(ref)
                pos += remaining
                need -= remaining
            else:  # the window ends inside this document's tokens (before its EOS)
                append(tokens[emitted : emitted + need])
                seg[2] = emitted + need
                pos += need
                need = 0
        out = np.concatenate(pieces, dtype=np.int64) if pieces else np.empty(0, dtype=np.int64)
        self._available -= count
        starts = None
        if boundaries:
            starts = np.zeros(count, dtype=np.bool_)
            starts[firsts] = True
        return out, starts, finished

    def pop_windows(self, count: int, spans: list[Span]) -> list[Window]:
        """Cut ``count`` tokens as :meth:`pop` would, but copy none: per window (the last
        may be short) the views that make it. Nothing is reported finished; ``spans`` gets
        every document touched, in order, for the caller to deliver as it hands windows out."""
        if count > self._available:
            raise ValueError(f"asked for {count} tokens, {self._available} available")
        window = self.window
        eos = self._eos
        segments = self._segments
        windows: list[Window] = []
        pieces: list[Tokens] = []
        firsts: list[int] = []
        room = window  # tokens still to place in the current window
        pos = 0
        need = count
        while need:
            seg = segments[0]
            ref, tokens, emitted = seg
            length = len(tokens)
            remaining = length + 1 - emitted
            spans.append((ref, pos, emitted, pos + remaining))
            if emitted == 0:
                firsts.append(window - room)
            if remaining < room and remaining <= need:  # the rest of it ends inside this window
                if emitted < length:
                    pieces.append(tokens[emitted:] if emitted else tokens)
                pieces.append(eos)
                room -= remaining
                segments.popleft()
                pos += remaining
                need -= remaining
                continue
            take = remaining if remaining <= need else need
            a, b = emitted, emitted + take  # of the document's tokens, its EOS at index length
            while a < b:
                end = b if b - a < room else a + room
                if end > length:
                    if a < length:
                        pieces.append(tokens[a:length])
                    pieces.append(eos)
                else:
                    pieces.append(tokens[a:end])
                room -= end - a
                a = end
                if not room:
                    windows.append((pieces, firsts))
                    pieces, firsts, room = [], [], window
            if take == remaining:
                segments.popleft()
            else:
                seg[2] = b
            pos += take
            need -= take
        if pieces:
            windows.append((pieces, firsts))
        self._available -= count
        return windows

    def state(self) -> dict[str, Any]:
        """``{"version", "carry": [[key, offset, emitted], ...]}``, oldest first."""
        return {
            "version": NODE_VERSIONS["packer"],
            "carry": [[ref[0], ref[1], emitted] for ref, _tokens, emitted in self._segments],
        }

    def reset(self, state: dict[str, Any], fetch: Callable[[Ref], Tokens]) -> None:
        """Restore the carry-over; ``fetch`` returns a referenced document's tokens."""
        check_node(state, "packer", STATE_KEYS)
        self._segments.clear()
        self._available = 0
        for key, offset, emitted in state["carry"]:
            ref = (str(key), int(offset))
            self.push(ref, fetch(ref), int(emitted))
