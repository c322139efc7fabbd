"""Reading a child process's stderr line by line while it runs."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import pytest


class StderrLines:
    """Reads a process's stderr in a thread, so a test can wait for a line without blocking."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self.lines.append("")  # EOF
            self._cond.notify_all()

    def wait_for(self, text: str, timeout: float = 180) -> None:
        """Until a line containing ``text`` is printed; fails when the process exits first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(text in line for line in self.lines):
                assert "" not in self.lines, f"exited before {text!r}:\n" + "".join(self.lines)[-3000:]
                left = deadline - time.monotonic()
                assert left > 0, f"no {text!r} within {timeout} s:\n" + "".join(self.lines)[-3000:]
                self._cond.wait(left)

    def close(self, timeout: float = 30) -> str:
        """Everything the process printed on stderr, once it has exited (the pipe read out and closed)."""
        self._thread.join(timeout=timeout)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return "".join(self.lines)

    def finish(self, timeout: float = 180) -> tuple[str, str]:
        """(stdout, stderr) once the process has exited. A process still running after
        ``timeout`` is sent SIGABRT, so faulthandler prints where each thread was stuck."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(timeout=60)
            self._thread.join(timeout=30)
            pytest.fail(f"still running {timeout} s later; its stacks:\n" + "".join(self.lines)[-6000:])
        with self.proc.stdout:
            out = self.proc.stdout.read()
        self._thread.join(timeout=30)
        self.proc.stderr.close()
        return out, "".join(self.lines)
