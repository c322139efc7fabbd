"""One dedicated MirrorMaker 2 node: its JVM, started as ``connect-mirror-maker.sh`` starts it.

The rendered properties hold no password: each cluster's login line reaches the JVM in
its environment (kafeed.mirror.render.mirror_secrets), so a node killed with SIGKILL
leaves nothing secret in ``work_dir``. The file is still written readable by its owner
only and removed when the node stops. The JVM's own log goes to
``<work_dir>/logs/mirror.log``; Connect masks password-typed settings there
(``sasl.jaas.config`` shows as ``[hidden]``). The node gets SIGKILL when the process
that started it dies, however it dies (ARCHITECTURE.md, "Process lifetime"): Connect's
exactly-once source support makes a killed node's open transaction harmless.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from pathlib import Path

from kafeed.broker.pki import write_private
from kafeed.broker.ports import free_port_block
from kafeed.choices import JitMode
from kafeed.jars import jvm_flags, resolve_mirror_libs
from kafeed.mirror.checks import Checked
from kafeed.mirror.config import MirrorSettings
from kafeed.mirror.origin import origin_classes
from kafeed.mirror.render import LOG4J2, mirror_properties, mirror_secrets
from kafeed.signals import ends_with_this_process

log = logging.getLogger("kafeed")

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"


def remove_leftovers(work_dir: Path) -> list[Path]:
    """Remove the properties files of nodes that are gone (killed before they could remove
    their own; one rendered by an older kafeed held passwords), saying so; returns them."""
    removed = []
    for path in sorted(work_dir.glob("mm2-*.properties")):
        pid = path.stem.removeprefix("mm2-")
        if pid.isdigit() and _alive(int(pid)):
            continue  # another node's, running
        path.unlink(missing_ok=True)
        removed.append(path)
        log.warning("Removed %s, left by a mirror node that was killed (files an older kafeed "
                    "wrote there held the clusters' passwords).", path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MirrorNode:
    """A MirrorMaker JVM running every site's flow into the target (``--clusters <target>``)."""

    def __init__(self, settings: MirrorSettings, checked: Checked, *, jit: JitMode = "full") -> None:
        self.settings = settings
        self.checked = checked
        self.jit = jit
        self._proc: subprocess.Popen[bytes] | None = None
        self._properties: Path | None = None

    @property
    def logs_dir(self) -> Path:
        return self.settings.work_dir / "logs"

    @property
    def log_file(self) -> Path:
        return self.logs_dir / "mirror.log"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        remove_leftovers(self.settings.work_dir)
        libs = resolve_mirror_libs()
        classpath = f"{libs.classpath}{os.pathsep}{origin_classes(libs.classpath, libs.java)}"
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        rest_port = self.settings.rest_port or free_port_block(1)
        self._properties = self.settings.work_dir / f"mm2-{os.getpid()}.properties"
        write_private(self._properties, mirror_properties(
            self.settings, self.checked.connections, replication=self.checked.replication,
            rest_port=rest_port).encode())
        log4j = self.settings.work_dir / "log4j2.properties"
        log4j.write_text(LOG4J2)
        heap = self.settings.heap_mb
        cmd = [
            libs.java, f"-Xmx{heap}m", f"-Xms{min(heap, 128)}m", *jvm_flags(self.jit),
            "-Djava.awt.headless=true",
            f"-Dkafeed.mirror.logs.dir={self.logs_dir}", f"-Dlog4j2.configurationFile={log4j}",
            "-cp", classpath, MAIN_CLASS, str(self._properties),
            "--clusters", self.settings.target.alias,
        ]
        env = {**os.environ, **mirror_secrets(self.settings, self.checked.connections)}
        with (self.logs_dir / "stdout.log").open("ab") as out:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          env=env, preexec_fn=ends_with_this_process(signal.SIGKILL))
        log.info("MirrorMaker node started (pid %d), logging to %s", self._proc.pid, self.log_file)

    def exit_code(self) -> int | None:
        """None while the node runs, else its exit status."""
        return None if self._proc is None else self._proc.poll()

    def stop(self, *, timeout: float = 30.0) -> None:
        """SIGTERM (Connect stops its tasks and commits), then SIGKILL after ``timeout``."""
        proc = self._proc
        try:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    log.warning("MirrorMaker node %d did not stop in %.0f s; killing it", proc.pid, timeout)
                    proc.kill()
                    proc.wait()
        finally:
            if self._properties is not None:
                self._properties.unlink(missing_ok=True)

    def tail(self, lines: int = 15) -> str:
        """The last lines of the node's own output (a JVM that failed to start says why there)."""
        try:
            text = (self.logs_dir / "stdout.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])
