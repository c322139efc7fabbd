"""Shared fixtures. Broker fixtures live in tests/integration/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shakespeare() -> Path:
    path = SHARED_DATA / "tinyshakespeare.txt"
    if not path.exists():
        pytest.skip(f"{path} is not present")
    return path
