"""Each mirrored record names the site record it copies, in one header.

MirrorMaker copies a record's headers but not where it was read, and its offset syncs
are sparse (a later sync replaces a pending one), so a target offset cannot be mapped
back exactly from them. A small Connect transform runs on every site flow instead: it
reads the source partition and offset the record is committed with (the same ones that
exactly-once support writes in the record's transaction) and adds::

    kafeed.mirror.origin: <site>/<topic>/<partition>/<offset>     e.g. site-a/raw/0/41

``kafeed prepare`` keeps that header in the document's metadata (same key), so a token
record, an archive row and a trained checkpoint's documents name their site record.

The transform is compiled with the JDK's ``javac`` once per source text into
``$KAFEED_HOME/mirror-origin/<digest>`` and put on the MirrorMaker node's classpath.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kafeed.errors import ToolMissing
from kafeed.home import kafeed_home

#: The header (and prepare's metadata key) naming a mirrored record's site record.
ORIGIN_HEADER = "kafeed.mirror.origin"

TRANSFORM_CLASS = "kafeed.mirror.OriginHeader"

_SOURCE = """\
package kafeed.mirror;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.header.Headers;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.transforms.Transformation;

/** Adds kafeed.mirror.origin = site/topic/partition/offset to each record MirrorSourceConnector copies. */
public final class OriginHeader implements Transformation<SourceRecord> {
    @Override
    public SourceRecord apply(SourceRecord record) {
        Map<String, ?> where = record.sourcePartition();
        Map<String, ?> at = record.sourceOffset();
        // Only MirrorSourceConnector's records: {cluster, topic, partition} at {offset}.
        if (where == null || at == null || !where.containsKey("cluster") || !where.containsKey("topic")
                || !where.containsKey("partition") || !at.containsKey("offset")) {
            return record;
        }
        String origin = where.get("cluster") + "/" + where.get("topic") + "/" + where.get("partition")
                + "/" + at.get("offset");
        Headers headers = record.headers().duplicate();
        headers.remove("@HEADER@");
        headers.addBytes("@HEADER@", origin.getBytes(StandardCharsets.UTF_8));
        return record.newRecord(record.topic(), record.kafkaPartition(), record.keySchema(), record.key(),
                record.valueSchema(), record.value(), record.timestamp(), headers);
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef();
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }

    @Override
    public void close() {
    }
}
""".replace("@HEADER@", ORIGIN_HEADER)


@dataclass(frozen=True)
class Origin:
    """Where a mirrored record was first written: a site record."""

    site: str
    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.site}/{self.topic}/{self.partition}/{self.offset}"


def parse_origin(text: str) -> Origin | None:
    """The :class:`Origin` a ``kafeed.mirror.origin`` value names (None when it is not one)."""
    parts = text.split("/")
    if len(parts) != 4 or not parts[0] or not parts[1]:
        return None
    try:
        return Origin(parts[0], parts[1], int(parts[2]), int(parts[3]))
    except ValueError:
        return None


def origin_classes(libs_classpath: str, java: str) -> Path:
    """The compiled transform (a classpath directory), built on first use."""
    digest = hashlib.sha256(_SOURCE.encode()).hexdigest()[:16]
    out = kafeed_home() / "mirror-origin" / digest
    if (out / ".complete").exists():
        return out
    javac = shutil.which("javac") or str(Path(java).with_name("javac"))
    if not Path(javac).exists():
        raise ToolMissing("The JDK's javac was not found; the mirror compiles its small origin-header "
                          "transform with it once.",
                          hint="Install a JDK, e.g. `apt-get install openjdk-17-jdk-headless`.")
    building = out.with_name(f"{digest}.{os.getpid()}.building")  # two nodes may build at once
    source = building / "src" / "OriginHeader.java"
    source.parent.mkdir(parents=True)
    source.write_text(_SOURCE)
    classes = building / "classes"
    done = subprocess.run([javac, "-nowarn", "--release", "17", "-cp", libs_classpath, "-d", str(classes),
                           str(source)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ToolMissing(f"javac could not compile the mirror's origin-header transform: "
                          f"{(done.stderr or done.stdout).strip().splitlines()[0]}",
                          hint="Check that a JDK 17 or newer is installed.")
    # Connect finds plugins on the classpath through service manifests (KIP-898).
    services = classes / "META-INF" / "services" / "org.apache.kafka.connect.transforms.Transformation"
    services.parent.mkdir(parents=True)
    services.write_text(TRANSFORM_CLASS + "\n")
    (classes / ".complete").write_text(digest + "\n")
    try:
        classes.rename(out)
    except OSError:
        if not (out / ".complete").exists():  # not another node's finished build: a leftover
            shutil.rmtree(out, ignore_errors=True)
            classes.rename(out)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return out
