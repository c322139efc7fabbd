"""The package layering: each package imports only from the layers below it.

Read from the source (every import statement, function-level ones included), so a
lazy import that crosses a layer fails here as surely as a top-level one.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

import kafeed

ROOT = Path(kafeed.__file__).parent

# Lowest first. A package may import from any package of a lower layer, never sideways
# or upwards. `telemetry` is a leaf: every stage (and a DataLoader worker) reports
# metrics through it without loading anything else of kafeed.
LAYERS: list[set[str]] = [
    {"telemetry", "errors", "choices", "units", "home", "signals", "data", "deploy"},
    {"config", "schema", "extras"},
    {"connect", "jars", "kafka", "formats"},
    {"topics", "acl"},
    {"broker"},
    {"stream", "archive", "mirror"},
    {"route"},  # below prepare, which runs route's rules as its last step
    {"ingest", "prepare", "loader", "tasks"},
    {"train"},
    {"federate"},  # federated rounds: the loader and the reference models, at each site
    {"monitor"},
    {"demo", "infer", "scale", "integrations"},  # integrations: recipes on loader + train
    {"demo_sites"},  # the two-site demo: the demo's corpus and topics, plus the mirror
    {"cli", "__init__"},
]
LEAVES = {"telemetry"}
# Upward edges allowed for now, each with its way out (none left).
TEMPORARY_EDGES: set[tuple[str, str]] = set()


def _package(path: Path) -> str:
    return path.relative_to(ROOT).with_suffix("").parts[0]


def _imported_names(path: Path) -> Iterator[str]:
    """Every absolute module name ``path`` imports, at any depth of its code."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _imports() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        here = _package(path)
        for name in _imported_names(path):
            parts = name.split(".")
            if parts[0] == "kafeed" and len(parts) > 1 and parts[1] != here:
                edges[here].add(parts[1])
    return edges


def _layer(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    raise AssertionError(f"package {package!r} has no layer in LAYERS: add it where it belongs")


def test_every_package_imports_only_from_lower_layers() -> None:
    wrong = [
        f"{src} (layer {_layer(src)}) imports {dst} (layer {_layer(dst)})"
        for src, targets in sorted(_imports().items())
        for dst in sorted(targets)
        if _layer(dst) >= _layer(src) and (src, dst) not in TEMPORARY_EDGES
    ]
    assert not wrong, "\n".join(wrong)


def test_every_package_has_a_layer() -> None:
    packages = {_package(p) for p in ROOT.rglob("*.py")}
    for package in packages:
        _layer(package)


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_leaves_import_nothing_of_kafeed(leaf: str) -> None:
    assert not _imports().get(leaf), f"kafeed.{leaf} must not import other kafeed packages"


@pytest.mark.parametrize(("module", "forbidden"), [
    ("kafeed.loader", ("kafeed.broker", "kafeed.monitor", "kafeed.topics", "kafeed.jars")),
    ("kafeed.telemetry", ("kafeed.config", "kafeed.broker", "kafeed.monitor", "kafeed.topics")),
    ("kafeed.topics", ("kafeed.broker", "kafeed.monitor")),
    ("kafeed.broker", ("kafeed.topics", "kafeed.monitor")),
    ("kafeed.kafka", ("kafeed.topics", "kafeed.broker", "kafeed.stream", "kafeed.monitor")),
    ("kafeed.stream", ("kafeed.prepare", "kafeed.ingest", "kafeed.loader", "kafeed.monitor")),
    # the recipes' frameworks load only with the module that needs them
    ("kafeed.integrations", ("transformers", "accelerate", "pytorch_lightning", "lightning", "torch")),
])
def test_importing_a_package_loads_nothing_above_it(module: str, forbidden: tuple[str, ...]) -> None:
    code = (f"import sys, {module}\n"
            f"print(' '.join(sorted(m for m in sys.modules if m.startswith({forbidden!r}))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert loaded == [], f"import {module} loaded {loaded}"


# Files outside kafeed.kafka that still import confluent_kafka, each until its owner moves it to
# KafkaClients and kafeed.kafka.types. Exact: a file added, or one that no longer imports it,
# fails the test, so the list only shrinks.
CONFLUENT_OUTSIDE_KAFKA: set[str] = set()


def _imports_confluent(path: Path) -> bool:
    return any(name.split(".")[0] == "confluent_kafka" for name in _imported_names(path))


def test_confluent_kafka_is_imported_only_by_kafeed_kafka() -> None:
    found = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
             if _package(p) != "kafka" and _imports_confluent(p)}
    assert found - CONFLUENT_OUTSIDE_KAFKA == set(), (
        "get clients from kafeed.kafka.KafkaClients and types from kafeed.kafka.types instead")
    assert CONFLUENT_OUTSIDE_KAFKA - found == set(), "these no longer import it: drop them from the list"


# What only the Kafka boundary may name: librdkafka's error and exception types (so its codes,
# ``KafkaError._PARTITION_EOF`` and the like) and the translation of its errors. Everything else
# gets kafeed errors from the typed clients and reads a message's error with message_event.
KAFKA_ERROR_NAMES = {"KafkaError", "KafkaException", "translate_kafka_error", "kafka_error", "error_code"}


def _kafka_error_names(path: Path) -> Iterator[tuple[int, str]]:
    """Where ``path`` names one of KAFKA_ERROR_NAMES: imported, called or read as an attribute."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        else:
            continue
        yield from ((node.lineno, name) for name in names if name in KAFKA_ERROR_NAMES)


def test_only_kafeed_kafka_names_librdkafka_errors_or_translates_them() -> None:
    found = [f"{p.relative_to(ROOT)}:{line}: {name}" for p in sorted(ROOT.rglob("*.py"))
             if _package(p) != "kafka" for line, name in _kafka_error_names(p)]
    assert found == [], ("outside kafeed.kafka, use the typed clients (their calls raise kafeed "
                         "errors) and kafeed.kafka.message_event:\n" + "\n".join(found))


def test_the_error_names_check_sees_each_way_of_naming_them(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from kafeed.kafka.types import KafkaError\n"
                      "import kafeed.kafka.translate as t\n"
                      "def f(err, exc):\n"
                      "    return err.code() == KafkaError._PARTITION_EOF or t.translate_kafka_error(exc)\n")
    assert sorted(_kafka_error_names(module)) == [
        (1, "KafkaError"), (4, "KafkaError"), (4, "translate_kafka_error")]


# kafeed.loader's modules (named below kafeed.loader), lowest first: the pieces (flow control,
# decoding, record kinds, packing, shuffling, state, the archive's rows) below the sources, the
# sources below the one reader, the reader below the streams, and all of them below the
# datasets and StreamLoader. A module imports only from its own layer or below.
LOADER_LAYERS: list[set[str]] = [
    {"sources", "nodes", "workers", "state",  # the packages: a docstring each
     "sources.assignment", "workers.at_exit", "nodes.collate", "workers.deferred_entry",
     "nodes.delivered", "workers.device_feed", "workers.forkserver_guard", "loader_options",
     "workers.main_guard", "workers.parent", "sources.partition", "workers.rank_sync",
     "sources.read_ahead", "nodes.record_kinds", "workers.shared_slots", "workers.worker_error",
     "metrics", "workers.prefetch", "settings", "workers.bundles", "nodes.decode",
     "sources.file_rows", "sources.kafka_flow", "sources.offsets", "sources.archive_table",
     "state.checkpoint", "sources.cold_tier", "sources.group_mirror", "nodes.mixing",
     "nodes.packing", "state.resume", "nodes.shuffle", "state.rank_states", "nodes.node"},
    {"sources.source", "sources.file_source", "sources.kafka_fetch", "sources.kafka_partitions",
     "sources.kafka_source", "sources.table_source"},
    {"nodes.reader", "nodes.readers"},
    {"nodes.stream", "opening", "nodes.windows_ahead", "nodes.mixture_stream"},
    {"dataset", "file_dataset", "mixture", "batch_view", "workers.worker_start", "stream_loader",
     "__init__"},
]
LOADER = ROOT / "loader"


def _loader_module(path: Path) -> str:
    """``path``'s module named below kafeed.loader (a package by its folder)."""
    parts = path.relative_to(LOADER).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _is_loader_module(name: str) -> bool:
    base = LOADER.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _loader_layer(module: str) -> int:
    for index, layer in enumerate(LOADER_LAYERS):
        if module in layer:
            return index
    raise AssertionError(f"kafeed.loader.{module} has no layer in LOADER_LAYERS: add it where it belongs")


def _loader_imports(path: Path) -> set[str]:
    """The kafeed.loader modules ``path`` imports (named below kafeed.loader), at any depth of
    its code."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module == "kafeed.loader" or node.module.startswith("kafeed.loader.")):
            below = node.module.removeprefix("kafeed.loader").lstrip(".")
            for alias in node.names:
                name = f"{below}.{alias.name}" if below else alias.name
                if _is_loader_module(name):  # a module imported from its package
                    found.add(name)
                elif below:
                    found.add(below)
        elif isinstance(node, ast.Import):
            found.update(alias.name.removeprefix("kafeed.loader.") for alias in node.names
                         if alias.name.startswith("kafeed.loader."))
    return found


def test_every_loader_module_has_a_layer() -> None:
    modules = {_loader_module(path) for path in LOADER.rglob("*.py")}
    assert modules == set().union(*LOADER_LAYERS)


def test_loader_pieces_import_only_from_their_layer_or_below() -> None:
    wrong = [
        f"loader.{_loader_module(path)} (layer {_loader_layer(_loader_module(path))}) imports "
        f"loader.{dst} (layer {_loader_layer(dst)})"
        for path in sorted(LOADER.rglob("*.py"))
        for dst in sorted(_loader_imports(path))
        if _loader_layer(dst) > _loader_layer(_loader_module(path))
    ]
    assert not wrong, "\n".join(wrong)
