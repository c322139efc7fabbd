"""Loader states saved by an earlier kafeed (tests/fixtures/loader_states, written by its
generate.py with that kafeed's code, from real reads) still load and resume exactly: the
batches after the resume are the ones that kafeed read after saving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafeed.config import ConnectionSettings
from tests.integration.saved_states import CASES, CHECKED, loaders, make_data, tokens

FIXTURES = Path(__file__).parent.parent / "fixtures" / "loader_states"


@pytest.fixture(scope="session")  # the topics have fixed names: once per broker
def data(kafka: ConnectionSettings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = tmp_path_factory.mktemp("saved-state-files")
    make_data(kafka, files)
    return files


@pytest.mark.parametrize("case", CASES)
def test_a_state_saved_by_an_earlier_kafeed_resumes_exactly(kafka: ConnectionSettings, data: Path,
                                                             case: str) -> None:
    saved: dict[str, Any] = json.loads((FIXTURES / f"{case}.json").read_text())
    loader = loaders(kafka, data)[case]()
    loader.load_state_dict(saved["state"])
    it = iter(loader)
    again = [tokens(next(it)) for _ in range(CHECKED)]
    assert again == saved["then"], f"the {case} state of kafeed {saved['kafeed']} resumed elsewhere"
