"""Where kafeed keeps its files on this machine: ``$KAFEED_HOME`` or ``~/.cache/kafeed``."""

from __future__ import annotations

import os
from pathlib import Path


def kafeed_home() -> Path:
    """Where kafeed caches jars, keeps local clusters and per-group state by default."""
    return Path(os.environ.get("KAFEED_HOME") or Path.home() / ".cache" / "kafeed")
