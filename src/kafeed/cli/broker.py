"""`kafeed broker`: a local Apache Kafka cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kafeed.choices import JitMode
from kafeed.cli.common import DataDirOpt, JsonOpt, console, existing_directory, out, print_json
from kafeed.units import human_bytes

app = typer.Typer(help="Run a local Apache Kafka (KRaft) cluster.", no_args_is_help=True,
                  rich_markup_mode=None)

KafkaHomeOpt = Annotated[
    Path | None,
    typer.Option("--kafka-home", help="Use an unpacked Kafka release instead of fetched jars. "
                 "Env: KAFEED_KAFKA_HOME.", show_default=False, callback=existing_directory),
]


@app.command()
def fetch(kafka_home: KafkaHomeOpt = None, json_out: JsonOpt = False) -> None:
    """Resolve the Kafka broker and tools jars, and MirrorMaker's, from Maven Central (cached)."""
    from rich.text import Text

    from kafeed.broker import KAFKA_VERSION, resolve_libs
    from kafeed.jars import MIRROR_VERSION, resolve_mirror_libs

    with console.status(f"Resolving Kafka {KAFKA_VERSION} jars..."):
        libs = resolve_libs(kafka_home=kafka_home)
        mirror = resolve_mirror_libs(kafka_home=kafka_home)
    jars = len(list(libs.libs_dir.glob("*.jar")))
    mirror_jars = len(list(mirror.libs_dir.glob("*.jar")))
    if json_out:
        print_json({"kafka_version": KAFKA_VERSION, "libs_dir": str(libs.libs_dir), "jars": jars,
                    "mirror_version": MIRROR_VERSION, "mirror_libs_dir": str(mirror.libs_dir),
                    "mirror_jars": mirror_jars})
    else:
        out.print(Text(f"Kafka {KAFKA_VERSION}: {jars} jars in {libs.libs_dir}"))
        out.print(Text(f"MirrorMaker {MIRROR_VERSION}: {mirror_jars} jars in {mirror.libs_dir}"))


@app.command()
def start(
    nodes: Annotated[int | None, typer.Option(help="1, or 3 for fault tests [default: 1].",
                                              show_default=False)] = None,
    port: Annotated[int | None, typer.Option(help="Client port of node 1; node i uses "
                                             "port+2(i-1), controllers the next port "
                                             "[default: 9092].", show_default=False)] = None,
    data_dir: DataDirOpt = None,
    heap_mb: Annotated[int, typer.Option(help="JVM heap per node, MiB.")] = 512,
    jit: Annotated[JitMode, typer.Option(
        help="full: the JVM's tiered JIT and G1, for a cluster that serves for hours; quick: "
             "the JIT's first tier and the serial collector, half the CPU for a short-lived "
             "cluster (tests, demos).",
    )] = "full",
    secure: Annotated[bool | None, typer.Option(
        "--secure/--plaintext", help="On first start: TLS, SASL/SCRAM-SHA-512 and ACLs per role, "
        "with one client settings file per role under <data dir>/secure/clients [default: "
        "plaintext].", show_default=False)] = None,
    auto_create_topics: Annotated[bool, typer.Option(
        "--auto-create-topics", help="Let the nodes create a topic when a client first writes to it "
        "(for producers that expect it; off: create topics with `kafeed topic create`).")] = False,
    kafka_home: KafkaHomeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Start a local cluster in the background (formats storage on first start)."""
    from rich.text import Text

    from kafeed.acl import ROLES
    from kafeed.broker import LocalCluster

    cluster = LocalCluster(data_dir, nodes=nodes, port=port, heap_mb=heap_mb,
                           jit=jit, kafka_home=kafka_home, secure=secure,
                           auto_create_topics=auto_create_topics)
    with console.status("Starting Kafka..."):
        started = cluster.start()
    # Only the paths of the role files are shown: the passwords stay in them.
    clients = {role: str(cluster.client_file(role)) for role in ROLES} if cluster.secure else {}
    if json_out:
        print_json({"started": started, "already_running": not started, "secure": cluster.secure,
                    "bootstrap": cluster.bootstrap, "data_dir": str(cluster.data_dir),
                    "client_configs": clients, "auto_create_topics": auto_create_topics and started})
        return
    said = "Kafka is up." if started else "Kafka is already running."
    kind = " (SASL_SSL, SCRAM-SHA-512, ACLs)" if cluster.secure else ""
    out.print(Text.assemble(f"{said} Bootstrap servers{kind}: ", (cluster.bootstrap, "bold")))
    if auto_create_topics and started:
        out.print(Text("Topics are created on first use (--auto-create-topics): a typo in a topic name "
                       "makes a new topic."))
    elif auto_create_topics:
        out.print(Text("--auto-create-topics applies when the nodes start: stop the cluster and start "
                       "it again with the flag."))
    else:
        out.print(Text(f"Topics are not created on first use: create them first (`kafeed topic create "
                       f"NAME -b {cluster.bootstrap}`), or start with --auto-create-topics."))
    if clients:
        out.print(Text(f"Client settings per role (pass one with --config): "
                       f"{Path(clients['admin']).parent}/<role>.toml for "
                       f"{', '.join(clients)}."))


@app.command()
def stop(
    data_dir: DataDirOpt = None,
    timeout: Annotated[float, typer.Option(help="Seconds before a node is killed.")] = 30.0,
    purge: Annotated[bool, typer.Option(help="Also delete the data directory.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Stop the local cluster gracefully (SIGTERM, then SIGKILL after --timeout)."""
    from rich.text import Text

    from kafeed.broker import LocalCluster

    cluster = LocalCluster(data_dir)
    stopped = cluster.stop(timeout=timeout, purge=purge)
    if json_out:
        print_json({"stopped_nodes": stopped, "purged": purge})
    elif stopped:
        out.print(Text(f"Stopped node(s) {', '.join(map(str, stopped))} of {cluster.data_dir}."))
    else:
        out.print(Text(f"No node of {cluster.data_dir} was running."))


@app.command()
def status(data_dir: DataDirOpt = None, json_out: JsonOpt = False) -> None:
    """Nodes, controller, topics and disk used per log dir."""
    from rich.table import Table
    from rich.text import Text

    from kafeed.broker import LocalCluster

    st = LocalCluster(data_dir).status()
    if json_out:
        print_json(st.as_dict())
        return
    table = Table(title=Text(f"{st.data_dir}: {st.nodes_up} of {len(st.nodes)} node(s) up"))
    for col in ("node", "port", "pid", "state", "log dir", "disk used", "disk free"):
        table.add_column(col)
    for n in st.nodes:
        down = f"down: {n.stopped_because}" if n.stopped_because else "down"
        table.add_row(str(n.node_id), str(n.port), str(n.pid or "-"),
                      Text("up", style="green") if n.alive else Text(down, style="red"),
                      Text(n.log_dir), human_bytes(n.disk_used_bytes),
                      "-" if n.disk_free_bytes is None else human_bytes(n.disk_free_bytes))
    out.print(table)
    out.print(Text(f"bootstrap: {st.bootstrap}   controller: {st.controller_id}   "
                   f"data dir free: {human_bytes(st.disk_free_bytes)}"))
    out.print(Text(f"topics ({len(st.topics)}): {', '.join(st.topics) or '-'}"))
    if st.nodes_up < len(st.nodes):
        raise typer.Exit(1 if st.nodes_up == 0 else 0)
