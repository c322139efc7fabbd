"""Shared fixtures. Broker fixtures live in tests/kafka_fixtures.py."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shakespeare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tiny Shakespeare: the team's shared copy, else the one bundled in the package."""
    path = SHARED_DATA / "tinyshakespeare.txt"
    if path.exists():
        return path
    from kafeed.demo import bundled_corpus

    return bundled_corpus(tmp_path_factory.mktemp("corpus") / "tinyshakespeare.txt")
