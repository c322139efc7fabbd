"""A `--workers` supervisor killed with SIGKILL leaves none of its workers behind."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kafeed.config import ConnectionSettings
from kafeed.topics import plan_topic
from tests.prepare_support import prepare_env
from tests.process_tree import descendants, describe, kill_root_and_check, reap

# A worker told by the kernel (SIGTERM) finishes or aborts its transaction and leaves its group.
GONE_WITHIN_S = 60.0


def test_supervisor_workers_end_when_it_is_sigkilled(kafka: ConnectionSettings, make_topic,  # type: ignore[no-untyped-def]
                                                      admin, tmp_path: Path) -> None:
    source = make_topic(partitions=2)
    output = f"{source}.all"
    admin.create(plan_topic(output, brokers=1, partitions=2))
    rules = tmp_path / "routes.toml"
    rules.write_text(f'[[rule]]\nname = "all"\nto = "{output}"\n')
    cmd = [sys.executable, "-m", "kafeed.cli.main", "route", "-b", kafka.bootstrap, "--input", source,
           "--rules", str(rules), "--group", f"g-{source}", "--workers", "2"]
    with (tmp_path / "stderr").open("w") as err:
        proc = subprocess.Popen(cmd, env=prepare_env(str(tmp_path)), stdout=subprocess.DEVNULL, stderr=err)
    tree: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while len(tree) < 2:  # both workers started: the kill comes while they start up
            assert proc.poll() is None, (tmp_path / "stderr").read_text()[-2000:]
            assert time.monotonic() < deadline, f"the workers never started: {describe(tree)}"
            tree |= descendants(proc.pid)
        kill_root_and_check(proc, tree, "the supervisor", within_s=GONE_WITHIN_S)
    finally:
        reap(proc, tree)
