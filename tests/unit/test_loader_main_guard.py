"""A script that starts loader workers without a `__main__` guard is told what to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafeed.loader.workers.main_guard import _has_guard

ROOT = Path(__file__).resolve().parents[2]
# A forkserver's workers import the main script again; forked ones (the default when the
# trainer runs no Kafka client) do not, and need no guard.
LOADER = """
import kafeed
ds = kafeed.KafkaTokenDataset("t", seq_len=15, eos_id=0, bootstrap="127.0.0.1:9")
for batch in kafeed.StreamLoader(ds, batch_size=2, num_workers=2, multiprocessing_context="forkserver"):
    break
"""
GUARD = 'if __name__ == "__main__":'


def _run(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(text)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def test_an_unguarded_script_is_refused_before_any_worker_starts(tmp_path: Path) -> None:
    done = _run(tmp_path, LOADER)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "ConfigError" in last and f"no `{GUARD}` guard" in last, done.stderr[-2000:]
    assert 'multiprocessing_context="fork"' in done.stderr  # and what to do
    assert "bootstrapping phase" not in done.stderr


def test_a_worker_that_runs_the_loader_again_says_why(tmp_path: Path) -> None:
    # A guard exists, but the loader is built outside it: the workers get that far.
    done = _run(tmp_path, f"{GUARD}\n    pass\n{LOADER}")
    assert done.returncode != 0
    assert "A DataLoader worker is running this script's loader again" in done.stderr, done.stderr[-2000:]
    assert "bootstrapping phase" not in done.stderr


@pytest.mark.parametrize(("text", "guarded"), [
    (f"{GUARD}\n    main()\n", True),
    ("if '__main__' == __name__:\n    main()\n", True),
    ("main()\n", False),
    ("def f():\n    if __name__ == '__main__':\n        pass\n", False),  # not at module level
    ("this is not python(\n", True),  # nothing to say about what cannot be parsed
])
def test_the_guard_is_found_at_module_level(tmp_path: Path, text: str, guarded: bool) -> None:
    path = tmp_path / f"s{abs(hash(text))}.py"
    path.write_text(text)
    assert _has_guard(str(path)) is guarded
