"""The local cluster itself: restart keeps data, topics on first use only when asked, a busy port
is one clear error.

The 3-node cluster and its loss of a node: test_three_nodes.py.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster, free_port_block
from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.errors import BrokerError
from kafeed.jars import QUICK_JVM
from kafeed.topics import TopicAdmin, plan_topic
from tests.cluster_support import produce_numbered, read_all


def test_restart_keeps_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port_block(2)
    data_dir = tmp_path / "restart"
    args = ["--data-dir", str(data_dir)]
    start = ["broker", "start", "--jit", "quick", *args]
    assert main([*start, "--port", str(port)]) == 0
    assert "Topics are not created on first use" in capsys.readouterr().out
    try:
        bootstrap = f"127.0.0.1:{port}"
        TopicAdmin(ConnectionSettings(bootstrap=bootstrap)).create(
            plan_topic("kept", brokers=1, partitions=2))
        produce_numbered(bootstrap, "kept", 500)
        assert main(start) == 0
        assert "already running" in capsys.readouterr().out
        assert main(["broker", "stop", *args]) == 0
        capsys.readouterr()
        assert main([*start, "--auto-create-topics"]) == 0
        assert "created on first use" in capsys.readouterr().out
        # a producer that expects topics to appear when it first writes: the node creates one
        produce_numbered(bootstrap, "made-on-first-use", 10)
        made = read_all(bootstrap, "made-on-first-use", 1)
        assert sorted(made) == sorted(f"v{i}".encode() for i in range(10))
        # what --jit quick asked for reached the node's JVM
        pid = json.loads((data_dir / "cluster.json").read_text())["pids"]["1"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert all(flag.encode() in cmdline for flag in QUICK_JVM)
        assert sorted(read_all(bootstrap, "kept", 2)) == sorted(f"v{i}".encode() for i in range(500))
    finally:
        assert main(["broker", "stop", "--purge", *args]) == 0


def test_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    port = free_port_block(2)
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        with pytest.raises(BrokerError, match=f"Port {port}"):
            LocalCluster(tmp_path / "busy", nodes=1, port=port).start()
