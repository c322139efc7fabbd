"""A new cluster's storage: each node's configuration written, its log directories formatted.

Formatting runs Kafka's ``StorageTool`` once per node, in parallel, under one new
cluster id; a secured cluster gets its security material and SCRAM users here too.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from kafeed.broker.pki import write_private
from kafeed.broker.render import LOG4J2, NodeSpec, NodeTls, server_properties
from kafeed.broker.secure import SecureMaterial, create_material, scram_format_args, write_argfile
from kafeed.errors import BrokerError
from kafeed.jars import QUICK_JVM, KafkaLibs


def new_cluster_id() -> str:
    # Kafka's Uuid text form: url-safe base64 of 16 random bytes, no padding,
    # never starting with '-' (it would read as a command-line flag).
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def format_nodes(libs: KafkaLibs, specs: list[NodeSpec], material: SecureMaterial, *,
                 secure: bool) -> str:
    """Write every node's settings and format its storage under a new cluster id; that id."""
    cluster_id = new_cluster_id()
    scram: list[str] = []
    if secure:
        bootstrap = ",".join(f"127.0.0.1:{s.port}" for s in specs)
        material, passwords = create_material(material.root, specs, bootstrap)
        scram = scram_format_args(passwords)
    procs = []
    for spec in specs:
        (spec.directory / "logs").mkdir(parents=True, exist_ok=True)
        tls = (NodeTls(keystore=material.keystore(spec), truststore=material.ca_pem,
                       key_password=material.key_password()) if secure else None)
        text = server_properties(spec, specs, tls=tls)
        if secure:  # it names the key password
            write_private(spec.properties_file, text.encode())
        else:
            spec.properties_file.write_text(text)
        (spec.directory / "log4j2.properties").write_text(LOG4J2)
        args = ["-Xmx256m", *QUICK_JVM, "-cp", libs.classpath, "kafka.tools.StorageTool",
                "format", "-t", cluster_id, "-c", str(spec.properties_file),
                *(["--standalone"] if len(specs) == 1 else []), *scram]
        # The SCRAM passwords go in an argument file the JVM reads, not on its command line.
        argfile = write_argfile(spec.directory / "format.args", args) if secure else None
        cmd = [libs.java, f"@{argfile}"] if argfile else [libs.java, *args]
        procs.append((spec, argfile, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                      stderr=subprocess.STDOUT, text=True)))
    for spec, argfile, proc in procs:
        _wait_formatted(spec, argfile, proc)
    return cluster_id


def _wait_formatted(spec: NodeSpec, argfile: Path | None, proc: subprocess.Popen[str]) -> None:
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if argfile is not None:
            argfile.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise BrokerError(
            f"Formatting storage of node {spec.node_id} failed:\n{out.strip()[-2000:]}"
        )
