"""Human-readable sizes, shared by the CLI tables and the live dashboard."""

from __future__ import annotations


def human_bytes(n: int | None) -> str:
    """``1536`` → ``"1.5 KiB"``; None → ``"n/a"``."""
    if n is None:
        return "n/a"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
