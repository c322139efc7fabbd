"""`kafeed topic`: plan and administer topics on any cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from kafeed.choices import DEFAULT_PER_PARTITION_MBPS, Compression
from kafeed.cli.common import BootstrapOpt, ConfigOpt, JsonOpt, connection, console, out, print_json
from kafeed.errors import ConfigError
from kafeed.units import human_bytes

if TYPE_CHECKING:
    from kafeed.topics import TopicAdmin, TopicPlan

app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True,
                  rich_markup_mode=None)


@app.command()
def create(
    name: str,
    partitions: Annotated[int | None, typer.Option(help="Number of partitions.",
                                                   show_default=False)] = None,
    throughput_mbps: Annotated[float | None, typer.Option(
        help="Target MB/s; partitions = ceil(throughput / per-partition).", show_default=False)] = None,
    per_partition_mbps: Annotated[float, typer.Option(
        help="MB/s one partition sustains (see docs/topics.md).")] = DEFAULT_PER_PARTITION_MBPS,
    replication: Annotated[int | None, typer.Option(
        help="Replication factor [default: min(3, brokers)].", show_default=False)] = None,
    min_isr: Annotated[int | None, typer.Option(
        "--min-isr", help="min.insync.replicas [default: replication-1, at least 1].",
        show_default=False)] = None,
    compression: Annotated[Compression, typer.Option(help="Topic compression.")] = "zstd",
    retention: Annotated[str | None, typer.Option(
        help="Time (7d, 12h) or size (10GiB) or 'infinite'.", show_default=False)] = None,
    compact: Annotated[bool, typer.Option(help="Log compaction instead of deletion.")] = False,
    if_not_exists: Annotated[bool, typer.Option(help="Succeed if it already exists.")] = False,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Create a topic, sized from --partitions or from --throughput-mbps."""
    from rich.text import Text

    from kafeed.topics import TopicAdmin, topic_request

    # Every option is checked before the cluster is asked anything.
    request = topic_request(
        name, partitions=partitions, throughput_mbps=throughput_mbps,
        per_partition_mbps=per_partition_mbps, replication=replication,
        min_insync_replicas=min_isr, compression=compression, retention=retention, compact=compact,
    )
    admin = TopicAdmin(connection(bootstrap, config))
    plan = request.plan(brokers=admin.broker_count())
    created = admin.create(plan, exist_ok=if_not_exists)
    if not created:  # say what the topic is, not what was asked
        _already_there(admin, plan, json_out)
        return
    if json_out:
        print_json({"created": created, **plan.model_dump()})
    else:
        out.print(Text.assemble(
            "Created topic ", (plan.name, "bold"),
            f": {plan.partitions} partition(s), replication {plan.replication}, "
            f"min ISR {plan.min_insync_replicas}, compression {plan.compression}"))


def _already_there(admin: TopicAdmin, plan: TopicPlan, json_out: bool) -> None:
    """What an existing topic is (--if-not-exists), and where it differs from what was asked."""
    from rich.text import Text

    info = admin.describe(plan.name, sizes=False)
    now: dict[str, object] = {
        "partitions": len(info.partitions), "replication": info.replication,
        # Topic-level values; absent ones follow the broker's defaults.
        "min_insync_replicas": _int_or_none(info.configs.get("min.insync.replicas")),
        "compression": info.configs.get("compression.type")}
    asked: dict[str, object] = {"partitions": plan.partitions, "replication": plan.replication,
                                "min_insync_replicas": plan.min_insync_replicas,
                                "compression": plan.compression}
    if json_out:
        print_json({"created": False, "name": plan.name, **now, "requested": plan.model_dump()})
        return
    shown = {k: "broker default" if v is None else v for k, v in now.items()}
    out.print(Text.assemble(
        "Already exists: topic ", (plan.name, "bold"),
        f": {shown['partitions']} partition(s), replication {shown['replication']}, "
        f"min ISR {shown['min_insync_replicas']}, compression {shown['compression']}"))
    differs = [f"{k.replace('_', ' ')} {v}" for k, v in asked.items() if now[k] is not None and now[k] != v]
    if differs:
        console.print(f"It was left as it is, not as asked ({', '.join(differs)}).",
                      markup=False, highlight=False)


def _int_or_none(value: str | None) -> int | None:
    return None if value is None else int(value)


@app.command("list")
def list_(
    internal: Annotated[bool, typer.Option(help="Include internal topics.")] = False,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List topics."""
    from rich.text import Text

    from kafeed.topics import TopicAdmin

    names = TopicAdmin(connection(bootstrap, config)).list(internal=internal)
    if json_out:
        print_json(names)
    else:
        for name in names:
            out.print(Text(name))


@app.command()
def describe(
    name: str,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Partitions, leaders, ISR, sizes, high watermarks and non-default configs."""
    from rich.table import Table
    from rich.text import Text

    from kafeed.topics import TopicAdmin

    info = TopicAdmin(connection(bootstrap, config)).describe(name)
    if json_out:
        print_json(info.as_dict())
        return
    table = Table(title=Text(f"{info.name}: {len(info.partitions)} partition(s), "
                             f"replication {info.replication}"))
    for col in ("partition", "leader", "replicas", "isr", "high watermark", "size"):
        table.add_column(col, justify="right")
    for p in info.partitions:
        short = len(p.isr) < len(p.replicas)
        isr = Text(",".join(map(str, p.isr)), style="yellow" if short else "")
        table.add_row(str(p.partition), str(p.leader), ",".join(map(str, p.replicas)), isr,
                      str(p.high_watermark), human_bytes(p.size_bytes))
    out.print(table)
    for key, value in sorted(info.configs.items()):
        out.print(Text(f"  {key} = {value}"))


@app.command()
def delete(
    name: str,
    force: Annotated[bool, typer.Option(
        help="Also delete an internal topic (name starting with __); never Kafka's own.")] = False,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete a topic. Internal topics (__...) need --force; Kafka's own are never deleted."""
    from rich.text import Text

    from kafeed.topics import KAFKA_OWN_TOPICS, TopicAdmin, deletion_cost

    cost = deletion_cost(name)
    if name in KAFKA_OWN_TOPICS:
        raise ConfigError(f"Refusing to delete {name}: {cost}.",
                          hint="Kafka itself needs this topic; not even --force deletes it.")
    if cost is not None and not force:
        raise ConfigError(f"Refusing to delete the internal topic {name}: {cost}.",
                          hint="Pass --force if that is what you want.")
    TopicAdmin(connection(bootstrap, config)).delete(name)
    if json_out:
        print_json({"deleted": name})
    else:
        out.print(Text(f"Deleted topic {name}."))
