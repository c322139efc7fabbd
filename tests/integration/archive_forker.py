"""Starts archive sinks cheaply: imports the archive's libraries once, then forks a sink per
line ``INSTANCE TOPIC WAREHOUSE [TARGET_BYTES FLUSH_S]`` read on stdin (INSTANCE: its static
group member name; TARGET_BYTES and FLUSH_S: its commit size and interval, default 128 MiB and
the FLUSH_S given at start) and prints the child's pid.
No Kafka client exists in this process when it forks, so each child builds its own. Used by
the SIGKILL tests.

Usage: python -m tests.integration.archive_forker BOOTSTRAP FLUSH_S
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import traceback
from pathlib import Path

from kafeed.archive import ArchiveSettings, CatalogSettings


def _warm_up() -> None:
    """Everything a sink loads lazily (SQL dialect, Parquet and Avro writers, transforms), by
    writing one row to a throwaway table; its engine is closed before any fork."""
    from kafeed.archive.catalog import open_catalog, open_table
    from kafeed.archive.rows import RecordBatch, RowMapper
    from kafeed.schema import make_document

    with tempfile.TemporaryDirectory() as tmp:
        catalog = open_catalog(CatalogSettings(warehouse=Path(tmp)))
        table = open_table(catalog, "warm.t", topic="warm", cluster_id="warm", kind="tokens",
                           target_file_bytes=1 << 20)
        doc = make_document([1, 2], id="w", vocab_size=10).SerializeToString()
        batch = RecordBatch("warm")
        batch.add(0, 0, 1, None, doc)
        table.append(RowMapper("tokens").rows(batch))
        table.refresh()
        catalog.engine.dispose()


def main() -> None:
    import confluent_kafka  # noqa: F401  the client library, loaded once

    from kafeed.archive.sink import run_archive
    from kafeed.config import ConnectionSettings

    _warm_up()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(message)s")
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)

    bootstrap, flush = sys.argv[1:3]
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    print("ready", flush=True)
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                instance, topic, warehouse, *sizes = line.split()
                target, interval = (int(sizes[0]), float(sizes[1])) if sizes else (128 << 20, float(flush))
                catalog = CatalogSettings(warehouse=Path(warehouse))
                settings = ArchiveSettings(topic=topic, table="arch.t", flush_interval_s=interval,
                                           target_file_bytes=target, group=f"g-{topic}", instance=instance,
                                           catalog=catalog)
                run_archive(settings, ConnectionSettings(bootstrap=bootstrap))
            except BaseException:
                traceback.print_exc()
                code = 1
            os._exit(code)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
