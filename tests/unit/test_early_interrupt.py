"""A Ctrl-C while the command line is still importing ends quietly with exit 130."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """A port that takes connections and never answers: the command stays busy past the
    last signal instead of finishing first."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("delay", [0.05, 0.1, 0.2, 0.3, 0.5])
def test_sigint_during_start_up_is_exit_130_without_a_traceback(delay: float, silent_broker: str) -> None:
    # `import kafeed` itself is the readiness signal: the interpreter's own start-up (before
    # any kafeed code runs) is Python's, not ours.
    code = ("import sys, kafeed; sys.stderr.write('ready\\n'); sys.stderr.flush()\n"
            "from kafeed.cli.main import main\n"
            f"sys.exit(main(['topic', 'list', '-b', '{silent_broker}']))")
    # SIGINT back to its default in the child: pytest-xdist's workers ignore it, and an ignored
    # SIGINT is inherited (a shell's Ctrl-C reaches a command with the default handler).
    with subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as proc:
        assert proc.stderr is not None
        assert proc.stderr.readline() == "ready\n"
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
        err = proc.stderr.read()
        assert proc.wait(timeout=30) == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "Interrupted" in err
