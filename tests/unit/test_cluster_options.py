"""`kafeed broker` and `kafeed monitor` refuse out-of-range options before doing anything,
and print paths as text, never as rich markup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster
from kafeed.cli.main import main
from kafeed.errors import ConfigError
from tests.cli_support import usage_error


@pytest.mark.parametrize(("options", "says"), [
    (["--nodes", "2"], "nodes: got 2, should be 1 or 3"),
    (["--nodes", "0"], "nodes: got 0"),
    (["--port", "99999"], "port: got 99999, should be at most 65534"),
    (["--port", "65535"], "port: got 65535, should be at most 65534"),
    (["--nodes", "3", "--port", "65531"], "port: got 65531, should be at most 65530"),
    (["--port", "80"], "port: got 80, should be greater than or equal to 1024"),
    (["--port", "-1"], "port: got -1"),
    (["--heap-mb", "0"], "heap_mb: got 0, should be greater than or equal to 128"),
])
def test_start_option_ranges(options: list[str], says: str, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = tmp_path / "cluster"
    assert says in usage_error(["broker", "start", *options, "--data-dir", str(data_dir)], capsys)
    assert not data_dir.exists()  # refused before anything was formatted or started


@pytest.mark.parametrize("timeout", ["-1", "nan", "inf"])
def test_stop_timeout_range(timeout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(["broker", "stop", "--timeout", timeout, "--data-dir", str(tmp_path)], capsys)
    assert "timeout: got" in line and ("0 or more" in line or "should be a finite number" in line)


def test_library_checks_the_same_ranges(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nodes: got 2"):
        LocalCluster(tmp_path, nodes=2)
    with pytest.raises(ConfigError, match="jit: got 'turbo'"):
        LocalCluster(tmp_path, jit="turbo")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="timeout: got -5"):
        LocalCluster(tmp_path).stop(timeout=-5)
    assert LocalCluster(tmp_path, nodes=3, port=65530).bootstrap.endswith(":65534")


@pytest.mark.parametrize(("options", "says"), [
    (["--interval", "0"], "interval_s: got 0.0, should be greater than 0"),
    (["--interval", "-2"], "interval_s: got -2.0"),
    (["--interval", "nan"], "--interval: got nan, should be a finite number"),
    (["--interval", "inf"], "--interval: got inf, should be a finite number"),
    (["--window", "1"], "window: got 1"),
    (["--allowed-lag", "-1"], "allowed_lag: got -1"),
    (["--samples", "0"], "samples: got 0, should be at least 1"),
    (["--prometheus-port", "99999"], "prometheus_port: got 99999"),
])
def test_monitor_option_ranges(options: list[str], says: str, nowhere: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert says in usage_error(["monitor", "--once", *options, "-b", nowhere], capsys)


def test_monitor_table_values_checked(tmp_path: Path, nowhere: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "k.toml"
    cfg.write_text("[monitor]\ntimeout_s = -1.0\n")
    assert "timeout_s: got -1.0" in usage_error(
        ["monitor", "--once", "--config", str(cfg), "-b", nowhere], capsys)


def _flat(text: str) -> str:
    return "".join(text.split())  # rich wraps long lines; markup would remove the brackets


def test_paths_print_literally(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = tmp_path / "[bold]x"  # as markup, "[bold]" would vanish
    assert main(["broker", "stop", "--data-dir", str(data_dir)]) == 0
    assert "/[bold]xwasrunning" in _flat(capsys.readouterr().out)

    # a recorded cluster with no live node: the status table shows its paths as they are
    data_dir.mkdir()
    (data_dir / "cluster.json").write_text(json.dumps(
        {"version": 1, "cluster_id": "c", "nodes": 1, "port": 20000, "pids": {}}))
    main(["broker", "status", "--data-dir", str(data_dir)])
    out = _flat(capsys.readouterr().out)
    assert "/[bold]x:0of1node(s)up" in out  # the table's title (cells wrap inside borders)


@pytest.mark.parametrize("text", ["0", "[]", "{broken"])
def test_a_cluster_file_that_is_no_json_object_is_one_sentence(tmp_path: Path, text: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cluster.json").write_text(text)
    assert main(["broker", "status", "--data-dir", str(tmp_path)]) == 1
    err = _flat(capsys.readouterr().err)
    assert "cluster.json" in err and "bugin" not in err, err
