"""`kafeed plan`: size a Kafka cluster for a training fleet (pure arithmetic, no cluster)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kafeed.choices import PLAN_DEFAULTS as _D
from kafeed.cli.common import JsonOpt, out, print_json
from kafeed.errors import ConfigError, invalid_settings
from kafeed.units import human_bytes


def plan(
    gpus: Annotated[int, typer.Option(help="Accelerators training at once.")],
    tokens_per_gpu_s: Annotated[float, typer.Option(help="Tokens one GPU trains on per second.")],
    bytes_per_token: Annotated[float, typer.Option(help="Bytes per token on the tokens topic "
                                                   "(uint16 ids + record overhead, after compression).")],
    retention: Annotated[str, typer.Option(help="How long topics keep records: 30d, 12h.")] = "7d",
    replication: Annotated[int, typer.Option(help="Replication factor.")] = 3,
    broker_net_in_mb_s: Annotated[float, typer.Option(
        help="MB/s one broker takes in.")] = _D["broker_net_in_mb_s"],
    broker_net_out_mb_s: Annotated[float, typer.Option(
        help="MB/s one broker sends.")] = _D["broker_net_out_mb_s"],
    broker_disk_tb: Annotated[float, typer.Option(
        help="Usable log disk per broker, TB.")] = _D["broker_disk_tb"],
    max_partition_replicas: Annotated[int, typer.Option(
        help="Partition replicas one broker holds.")] = int(_D["max_partition_replicas"]),
    partition_mb_s: Annotated[float, typer.Option(help="MB/s one partition carries.")] = _D["partition_mb_s"],
    prepare_tokens_per_s: Annotated[float, typer.Option(
        help="Tokens/s one prepare process writes.")] = _D["prepare_tokens_per_s"],
    utilisation: Annotated[float, typer.Option(help="Share of each broker limit to plan for "
                                               "(headroom for failover).")] = _D["utilisation"],
    readers_per_gpu: Annotated[int, typer.Option(
        help="DataLoader workers per rank.")] = int(_D["readers_per_gpu"]),
    consumer_groups: Annotated[int, typer.Option(help="Groups reading the tokens topic "
                                                 "(trainer, archive, ...).")] = int(_D["consumer_groups"]),
    raw_bytes_per_token: Annotated[float, typer.Option(help="Raw text bytes per token on the raw topic "
                                                       "(0: no raw topic).")] = _D["raw_bytes_per_token"],
    json_out: JsonOpt = False,
) -> None:
    """Partitions, brokers, disk and network a training fleet needs, with the assumptions."""
    from pydantic import ValidationError

    from kafeed.topics import parse_retention
    from kafeed.topics.capacity import Capacity, FleetRequest, plan_cluster

    ms, _size = parse_retention(retention)
    if ms is None or ms < 0:
        raise ConfigError(f"--retention {retention!r} is not a time; the plan needs one such as 30d or 12h.")
    try:
        fleet = FleetRequest(gpus=gpus, tokens_per_gpu_s=tokens_per_gpu_s, bytes_per_token=bytes_per_token,
                             retention_s=ms / 1000, replication=replication)
        capacity = Capacity(
            broker_net_in_mb_s=broker_net_in_mb_s, broker_net_out_mb_s=broker_net_out_mb_s,
            broker_disk_tb=broker_disk_tb, max_partition_replicas=max_partition_replicas,
            partition_mb_s=partition_mb_s, prepare_tokens_per_s=prepare_tokens_per_s,
            utilisation=utilisation, readers_per_gpu=readers_per_gpu, consumer_groups=consumer_groups,
            raw_bytes_per_token=raw_bytes_per_token)
    except ValidationError as exc:
        raise invalid_settings(exc, what="plan options", hint="See `kafeed plan --help`.") from None
    result = plan_cluster(fleet, capacity)
    if json_out:
        print_json(result)
        return
    _print(result)


def _rate(n: float) -> str:
    return f"{human_bytes(int(n))}/s"


def _print(r: dict[str, Any]) -> None:
    out.print(f"[bold]{r['tokens_per_s']:,.0f} tokens/s[/bold] = {_rate(r['tokens_bytes_per_s'])} on the "
              f"tokens topic, {_rate(r['raw_bytes_per_s'])} on raw")
    out.print(f"partitions: tokens {r['partitions']:,} ({r['partitions_per_reader']} per reader, "
              f"{r['readers']:,} readers), raw {r['raw_partitions']:,}")
    limits = ", ".join(f"{k} {v:,}" for k, v in r["brokers_by_limit"].items())
    out.print(f"brokers: [bold]{r['brokers']:,}[/bold] (limited by {r['limited_by']}; "
              f"each limit needs: {limits})")
    out.print(f"disk: {human_bytes(int(r['disk_total']))} in all, {human_bytes(int(r['disk_per_broker']))} "
              "per broker")
    out.print(f"network: in {_rate(r['network_in_per_s'])} ({_rate(r['network_in_per_broker_per_s'])} per "
              f"broker), out {_rate(r['network_out_per_s'])} ({_rate(r['network_out_per_broker_per_s'])} "
              "per broker)")
    out.print(f"partition replicas per broker: {r['partition_replicas_per_broker']:,.0f}")
    out.print(f"prepare workers: {r['prepare_workers']:,}")
    out.print("assumptions: " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                          for k, v in r["assumptions"].items()))
