"""`kafeed monitor` against a cluster that does not answer: it alerts once and keeps polling.

A 3-node cluster that loses a node: test_three_nodes.py.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from kafeed.broker import free_port_block


def test_unreachable_cluster_alerts_and_keeps_polling(tmp_path: Path,
                                                      webhook: tuple[str, list[dict[str, Any]]]) -> None:
    import os
    import subprocess
    import sys

    import kafeed

    url, received = webhook
    port = free_port_block(1)  # nothing listens there
    config = tmp_path / "kafeed.toml"
    config.write_text(f'[monitor]\ntimeout_s = 1.0\n\n'
                      f'[alerts]\nwebhook_url = "{url}"\nexpected_brokers = 1\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(kafeed.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafeed.cli.main", "monitor", "-b", f"127.0.0.1:{port}", "--config",
         str(config), "--json", "--interval", "0.5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stdout.read1(4096), b"")),
                              daemon=True)  # type: ignore[union-attr]
    reader.start()

    def polls() -> int:  # each poll prints one indented JSON document
        return b"".join(chunks).count(b"\n}\n")

    try:
        deadline = time.monotonic() + 60
        while not received and time.monotonic() < deadline:
            assert proc.poll() is None, "the monitor exited on an unreachable cluster"
            time.sleep(0.2)
        # Three more failed polls, counted on its output: the alert must not fire again.
        after = polls() + 3
        while polls() < after and time.monotonic() < deadline:
            assert proc.poll() is None, "the monitor exited on an unreachable cluster"
            time.sleep(0.1)
        assert polls() >= after
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        reader.join(timeout=15)
        proc.stdout.close()  # type: ignore[union-attr]
    out = b"".join(chunks)
    assert [(r["rule"], r["status"]) for r in received] == [("broker_down", "firing")]
    assert "no broker answers" in received[0]["message"]
    first = json.loads(out.decode().split("\n}\n")[0] + "\n}")
    assert "error" in first
