"""What each entry point imports: the command line stays light, layers import downwards.

Checked on the import graph (``sys.modules`` of a fresh interpreter), never on a wall
clock: these machines are shared and noisy.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "tokenizers", "pyarrow", "confluent_kafka", "numpy", "pydantic", "fastavro",
         "prometheus_client", "pyiceberg", "sqlalchemy", "transformers", "accelerate",
         "pytorch_lightning", "lightning")


def _modules_after(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _roots(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_building_the_command_line_imports_nothing_heavy() -> None:
    # What `kafeed --help` (and every `--help` under it) runs: the whole click tree.
    loaded = _modules_after(
        "import typer\nfrom kafeed.cli.main import app\ntyper.main.get_command(app)")
    assert not _roots(loaded) & set(HEAVY), sorted(_roots(loaded) & set(HEAVY))


@pytest.mark.parametrize("group", ["topic", "broker", "ingest", "prepare", "train", "monitor", "demo",
                                   "report", "lineage", "archive", "replay"])
def test_help_of_each_command_imports_nothing_heavy(group: str) -> None:
    loaded = _modules_after(
        "from kafeed.cli.main import main\n"
        f"code = main([{group!r}, '--help'])\n"
        "assert code == 0, code")
    assert not _roots(loaded) & set(HEAVY), sorted(_roots(loaded) & set(HEAVY))


def test_import_kafeed_is_light() -> None:
    loaded = _modules_after("import kafeed")
    assert not _roots(loaded) & set(HEAVY), sorted(_roots(loaded) & set(HEAVY))


def test_train_startup_opens_the_loader_without_torch() -> None:
    # `kafeed train` opens the loader's consumer through this module before torch loads, so
    # the first records are fetched while torch imports (benchmarks/bench_train_start.py).
    # The Kafka source is imported when a stream opens (kafeed.loader.nodes.readers.make_reader).
    loaded = _modules_after("import kafeed.train.startup, kafeed.loader.opening, "
                            "kafeed.loader.sources.kafka_source")
    assert "torch" not in _roots(loaded)
    assert {"kafeed.loader.nodes.reader", "kafeed.loader.sources.kafka_source",
            "kafeed.kafka.kafka_clients"} <= loaded
