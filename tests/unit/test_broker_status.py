"""Why a local node stopped, read from its server.log."""

from __future__ import annotations

from pathlib import Path

from kafeed.broker.status import why_stopped

START = "[2026-12-01 10:10:00,000] INFO Registered `kafka:type=kafka.Log4jController` MBean (x)\n"
FULL = ("[2026-12-01 10:10:14,544] ERROR Error while appending records to raw-2 in dir /d (x)\n"
        "java.io.IOException: No space left on device\n"
        "[2026-12-01 10:10:14,558] ERROR Shutdown broker because all log dirs in /d have failed (x)\n")


def test_a_full_log_dir_is_named(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(START + "[..] INFO started\n" + FULL)
    assert why_stopped(log) == "its log dir is full (No space left on device)"
    log.write_text(START + FULL.replace("No space left on device", "Read-only file system"))
    assert why_stopped(log) == "its log dir became read-only"


def test_only_the_last_run_counts(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(START + FULL + START + "[..] INFO started again, then SIGKILLed\n")
    assert why_stopped(log) is None
    assert why_stopped(tmp_path / "missing.log") is None
