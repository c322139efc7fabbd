"""The node processes of a local cluster: spawning them, telling whether they live, stopping them.

A node is recognised by its pid and by its command line naming the cluster's data
directory (``marker``), which guards against a pid the kernel handed to another process.
"""

from __future__ import annotations

import logging
import os
import signal
import time

from kafeed.broker.render import NodeSpec
from kafeed.choices import JitMode
from kafeed.jars import KafkaLibs, jvm_flags

log = logging.getLogger("kafeed")


def pid_alive(pid: int | None, marker: str) -> bool:
    """True when ``pid`` runs and its command line mentions ``marker`` (guards pid reuse)."""
    if pid is None:
        return False
    try:  # reap it if it is our own exited child
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read().decode(errors="replace")
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[-1].split()[0]
    except OSError:
        return False
    if state == b"Z":
        return False
    # An empty command line is a process in the middle of execve (the java
    # launcher can re-exec itself): alive, not yet showing its arguments.
    if not cmdline:
        try:  # kernel threads also show none, but have no executable
            os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return False
        return True
    return marker in cmdline


def alive_after(pid: int | None, marker: str, delay: float = 0.5) -> bool:
    """A second look before declaring a just-started node dead (exec is not atomic to /proc)."""
    time.sleep(delay)
    return pid_alive(pid, marker)


def spawn_node(libs: KafkaLibs, spec: NodeSpec, *, heap_mb: int, jit: JitMode,
               auto_create_topics: bool = False) -> int:
    """Start one node's JVM in a session of its own; its pid. ``auto_create_topics`` lets it
    create a topic a client first writes to or reads (off in server.properties)."""
    logs = spec.directory / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cmd = [
        libs.java, f"-Xmx{heap_mb}m", f"-Xms{min(heap_mb, 128)}m",
        *jvm_flags(jit), "-Djava.awt.headless=true",
        f"-Dkafka.logs.dir={logs}",
        f"-Dlog4j2.configurationFile={spec.directory / 'log4j2.properties'}",
        "-cp", libs.classpath, "kafka.Kafka", str(spec.properties_file),
        *(["--override", "auto.create.topics.enable=true"] if auto_create_topics else []),
    ]
    # posix_spawn in a new session: the node outlives this process, and no
    # Popen object is left behind to warn about a child still running.
    out = str(logs / "stdout.log")
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    return os.posix_spawn(libs.java, cmd, dict(os.environ), file_actions=actions, setsid=True)


def terminate(live: dict[int, int], marker: str, timeout: float) -> None:
    """SIGTERM every pid of ``live`` (node id → pid), then SIGKILL those still up after ``timeout``."""
    for pid in live.values():
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(pid, marker) for pid in live.values()):
        time.sleep(0.2)
    for pid in live.values():
        if pid_alive(pid, marker):
            log.warning("node pid %d did not stop in %.0fs; killing it", pid, timeout)
            os.kill(pid, signal.SIGKILL)


def kill_and_wait(pid: int, marker: str) -> None:
    """SIGKILL ``pid`` and wait (up to 10 s) until it is gone."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(pid, marker) and time.monotonic() < deadline:
        time.sleep(0.05)
