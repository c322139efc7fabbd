"""Mutated encodings for property tests of decoders: valid bytes with a few edits."""

from __future__ import annotations

from hypothesis import strategies as st


def edit(valid: bytes, script: bytes) -> bytes:
    """Apply an edit script to ``valid``: each 3 bytes (op, position, value) set, cut, insert or
    delete. Drawing the script as one byte string keeps generation cheap (10,000 runs)."""
    data = bytearray(valid)
    for i in range(0, len(script) - 2, 3):
        op, pos, value = script[i] % 4, script[i + 1] * max(len(data), 1) // 256, script[i + 2]
        if op == 0 and data:
            data[pos] = value
        elif op == 1:
            del data[pos:]
        elif op == 2:
            data[pos:pos] = bytes([value])
        else:
            del data[pos:pos + 1 + value % 8]
    return bytes(data)


def mutated(pool: list[bytes]) -> st.SearchStrategy[bytes]:
    """Valid encodings from ``pool`` with one to four edits."""
    return st.builds(edit, st.sampled_from(pool), st.binary(min_size=3, max_size=12))
