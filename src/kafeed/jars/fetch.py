"""Resolve the jars of a local Apache Kafka broker.

The jars come from Maven Central through ``mvn`` and the pinned pom shipped
beside this module, into ``$KAFEED_HOME/kafka-<version>/libs`` (default
``~/.cache/kafeed``). An existing Kafka installation can be used instead:
``KAFEED_KAFKA_HOME`` (or ``kafka_home=``) names a release directory whose
``libs/`` holds the jars.

MirrorMaker 2 (``kafeed mirror``) runs on a folder of its own,
``$KAFEED_HOME/connect-mirror-<MIRROR_VERSION>/libs``, from ``connect-mirror.pom.xml``:
see that file for why its version differs from the broker's and why the two folders
are never put on one classpath.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kafeed.choices import KAFKA_VERSION, JitMode
from kafeed.errors import BrokerError, ToolMissing
from kafeed.home import kafeed_home

log = logging.getLogger("kafeed")

MIN_JAVA = 17
# The JIT's first tier only, and the serial collector. Short-lived JVMs (Kafka's tools, a
# cluster that lives for a test session or a demo) spend much of their CPU in the optimising
# compiler and in the parallel collector's threads, and rarely run long enough to repay
# them: a local node needs about half the CPU to start and to serve a short workload this
# way, at a lower peak throughput.
QUICK_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# A JVM that serves for hours: the tiered JIT, G1 with short pauses.
FULL_JVM = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")


def jvm_flags(jit: JitMode) -> list[str]:
    """The JIT and collector flags of a ``jit`` mode."""
    return list(QUICK_JVM if jit == "quick" else FULL_JVM)

_POM = "kafka-libs.pom.xml"
# The newest connect-mirror the Maven registry serves here (no 4.4.0 there); a 4.3.1
# MirrorMaker against 4.4 brokers is a supported pairing (connect-mirror.pom.xml).
MIRROR_VERSION = "4.3.1"
_MIRROR_POM = "connect-mirror.pom.xml"


@dataclass(frozen=True)
class KafkaLibs:
    """A directory of Kafka jars and the java binary that runs them."""

    libs_dir: Path
    java: str

    @property
    def classpath(self) -> str:
        return str(self.libs_dir / "*")


def find_java() -> str:
    """Return the java executable, refusing one older than Java 17."""
    java = shutil.which("java")
    if java is None:
        raise ToolMissing(
            "Java was not found on PATH; the local Kafka broker needs Java 17 or newer.",
            hint="Install it, e.g. `apt-get install openjdk-17-jre-headless`.",
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        raise ToolMissing(f"Could not read the Java version from `{java} -version`.")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8" style
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise ToolMissing(
            f"Java {major} found at {java}; Kafka {KAFKA_VERSION} needs Java {MIN_JAVA} or newer.",
            hint="Install a newer JDK, e.g. `apt-get install openjdk-17-jre-headless`.",
        )
    return java


def _pom_text(name: str = _POM) -> str:
    return resources.files("kafeed.jars").joinpath(name).read_text(encoding="utf-8")


def cache_dir() -> Path:
    return kafeed_home() / f"kafka-{KAFKA_VERSION}"


def mirror_cache_dir() -> Path:
    return kafeed_home() / f"connect-mirror-{MIRROR_VERSION}"


def _marker_value(pom: str = _POM) -> str:
    return hashlib.sha256(_pom_text(pom).encode()).hexdigest()


def _release_libs(kafka_home: Path | None) -> Path | None:
    home = kafka_home or (Path(os.environ["KAFEED_KAFKA_HOME"]) if os.environ.get(
        "KAFEED_KAFKA_HOME") else None)
    return None if home is None else home / "libs"


def resolve_libs(*, kafka_home: Path | None = None, fetch: bool = True) -> KafkaLibs:
    """Locate (and, when ``fetch``, download) the broker jars; instant once cached."""
    java = find_java()
    libs = _release_libs(kafka_home)
    if libs is not None:
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise BrokerError(
                f"{libs} holds no kafka_2.13 jar; it is not a Kafka installation.",
                hint="Point KAFEED_KAFKA_HOME at an unpacked Kafka release, or unset it.",
            )
        return KafkaLibs(libs, java)
    libs = cache_dir() / "libs"
    marker = cache_dir() / ".complete"
    if marker.exists() and marker.read_text().strip() == _marker_value():
        return KafkaLibs(libs, java)
    if not fetch:
        raise BrokerError(
            f"Kafka {KAFKA_VERSION} jars are not cached in {cache_dir()}.",
            hint="Run `kafeed broker fetch` first.",
        )
    _download(libs, marker, _POM, f"Kafka {KAFKA_VERSION}")
    return KafkaLibs(libs, java)


def resolve_mirror_libs(*, kafka_home: Path | None = None, fetch: bool = True) -> KafkaLibs:
    """Locate (and, when ``fetch``, download) MirrorMaker 2's jars; instant once cached.

    A Kafka release directory (``kafka_home`` / ``KAFEED_KAFKA_HOME``) ships them in its
    ``libs/``, at the release's own version.
    """
    java = find_java()
    release = _release_libs(kafka_home)
    if release is not None:
        if not any(release.glob("connect-mirror-[0-9]*.jar")):
            raise BrokerError(f"{release} holds no connect-mirror jar, so MirrorMaker cannot run from it.",
                              hint="Point KAFEED_KAFKA_HOME at an unpacked Kafka release, or unset it.")
        return KafkaLibs(release, java)
    libs = mirror_cache_dir() / "libs"
    marker = mirror_cache_dir() / ".complete"
    if marker.exists() and marker.read_text().strip() == _marker_value(_MIRROR_POM):
        return KafkaLibs(libs, java)
    if not fetch:
        raise BrokerError(f"MirrorMaker {MIRROR_VERSION} jars are not cached in {mirror_cache_dir()}.",
                          hint="Run `kafeed broker fetch` first.")
    _download(libs, marker, _MIRROR_POM, f"MirrorMaker {MIRROR_VERSION}")
    return KafkaLibs(libs, java)


def _download(libs: Path, marker: Path, pom_name: str, what: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ToolMissing(
            "Maven (`mvn`) was not found on PATH; it resolves the Kafka jars.",
            hint="Install it (`apt-get install maven`) or set KAFEED_KAFKA_HOME "
            "to an unpacked Kafka release.",
        )
    libs.parent.mkdir(parents=True, exist_ok=True)
    log.info("resolving %s jars with Maven into %s", what, libs)
    with tempfile.TemporaryDirectory(dir=libs.parent) as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_pom_text(pom_name), encoding="utf-8")
        staged = Path(tmp) / "libs"
        proc = subprocess.run(
            [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
             f"-DoutputDirectory={staged}"],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise BrokerError(
                f"Maven could not resolve the {what} jars (exit {proc.returncode}):\n{tail}",
                hint="Check that Maven Central is reachable.",
            )
        if libs.exists():
            shutil.rmtree(libs)
        staged.rename(libs)
    marker.write_text(_marker_value(pom_name))
