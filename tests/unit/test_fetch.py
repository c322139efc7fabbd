from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kafeed.errors import BrokerError, ToolMissing
from kafeed.jars import fetch


def _fake_java(tmp_path: Path, version_line: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def test_missing_java_is_one_sentence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissing, match="Java was not found") as info:
        fetch.find_java()
    assert info.value.hint and "openjdk-17" in info.value.hint


@pytest.mark.parametrize("line", ['java version "1.8.0_292"', 'openjdk version "11.0.2" 2019-01-15'])
def test_old_java_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, line: str) -> None:
    monkeypatch.setenv("PATH", str(_fake_java(tmp_path, line)))
    with pytest.raises(ToolMissing, match="needs Java 17"):
        fetch.find_java()


def test_java_17_is_accepted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(_fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')))
    assert fetch.find_java().endswith("java")


def test_missing_mvn_when_jars_are_not_cached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KAFEED_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KAFEED_KAFKA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(_fake_java(tmp_path, 'openjdk version "17.0.1"')))
    with pytest.raises(ToolMissing, match="Maven"):
        fetch.resolve_libs()
    with pytest.raises(BrokerError, match="not cached"):
        fetch.resolve_libs(fetch=False)


def test_kafka_home_must_hold_the_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(_fake_java(tmp_path, 'openjdk version "21"')) + os.pathsep + "/bin")
    (tmp_path / "kafka" / "libs").mkdir(parents=True)
    with pytest.raises(BrokerError, match="not a Kafka installation"):
        fetch.resolve_libs(kafka_home=tmp_path / "kafka")
    (tmp_path / "kafka" / "libs" / "kafka_2.13-4.4.0.jar").write_bytes(b"")
    assert fetch.resolve_libs(kafka_home=tmp_path / "kafka").libs_dir == tmp_path / "kafka" / "libs"
