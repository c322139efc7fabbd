"""Out-of-range ingest options are usage errors (exit 2, one line) before any work starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafeed.cli.main import main
from kafeed.signals import stop_request


@pytest.fixture(autouse=True)
def _restore_signals() -> Iterator[None]:
    """main() installs the process's stop handler; give the signals back after each test."""
    yield
    stop_request().uninstall()
    stop_request().reset()


@pytest.mark.parametrize(("flag", "value", "field"), [
    ("--linger-ms", "-1", "linger_ms"),
    ("--batch-bytes", "10", "batch_bytes"),
    ("--commit-records", "0", "commit_records"),
    ("--commit-interval-ms", "5", "commit_interval_ms"),
    ("--commit-interval-ms", "120000", "commit_interval_ms"),
    ("--max-dlq-ratio", "-0.5", "max_dlq_ratio"),
    ("--max-dlq-ratio", "1.01", "max_dlq_ratio"),
    ("--text-field", "", "text_field"),
    ("--label-field", "", "label_field"),
])
def test_out_of_range_option_is_exit_2_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   flag: str, value: str, field: str) -> None:
    src = tmp_path / "a.jsonl"
    src.write_text('{"text": "x"}\n')
    # Port 9 (discard) has no broker: reaching the network would fail differently (exit 1).
    code = main(["ingest", str(src), "-b", "127.0.0.1:9", flag, value])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith("error: Invalid ingest options:") and field in lines[0]
    assert "Traceback" not in err
