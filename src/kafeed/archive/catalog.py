"""Open the catalog and the archive table; refuse a table that is not this topic's.

Every way this can fail before a record is read is one sentence: a warehouse that cannot
be written, a catalog that does not answer, a table that holds another topic or another
cluster's records (its positions would mean nothing here), a table whose schema changed.
"""

from __future__ import annotations

import logging
import tempfile
from typing import Any

from kafeed.archive.schema import (
    PROP_CLUSTER,
    PROP_KIND,
    PROP_SCHEMA,
    PROP_TOPIC,
    SCHEMA_VERSION,
    Kind,
    arrow_schema,
    iceberg_schema,
    partition_spec,
    sort_order,
)
from kafeed.archive.settings import CatalogSettings
from kafeed.errors import CatalogUnavailable, ConfigError

log = logging.getLogger("kafeed")

# pyiceberg retries a lost commit on its own by replaying the same snapshot, summary
# included; the sink must instead re-read the positions and re-decide (kafeed.archive.commit).
NO_LIBRARY_RETRY = {"commit.retry.num-retries": "0"}


def _check_warehouse(settings: CatalogSettings) -> None:
    path = settings.warehouse.expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".kafeed-write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(
            f"Cannot write to the warehouse directory {str(path)!r} ({exc.strerror or exc}).",
            hint="Pass --warehouse with a directory you can write to.") from None


def open_catalog(settings: CatalogSettings) -> Any:
    """The catalog: a named pyiceberg catalog, or the local SQLite one under the warehouse."""
    try:
        if settings.local:
            _check_warehouse(settings)
            from pyiceberg.catalog.sql import SqlCatalog

            wh = settings.warehouse.expanduser().resolve()
            props = {"uri": f"sqlite:///{wh / 'catalog.db'}", "warehouse": wh.as_uri(),
                     **settings.properties}
            try:
                return SqlCatalog("kafeed", **props)
            except Exception:  # two sinks creating the catalog's own tables at once: once more
                return SqlCatalog("kafeed", **props)
        from pyiceberg.catalog import load_catalog

        return load_catalog(settings.name, **settings.properties)
    except ConfigError:
        raise
    except Exception as exc:
        where = settings.name or str(settings.warehouse)
        raise CatalogUnavailable(
            f"Could not open the Iceberg catalog {where!r}: {_one_line(exc)}.",
            hint="Check the catalog's configuration (uri, credentials) and that it is running.",
        ) from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _same_layout(schema: Any) -> bool:
    """Same columns, types and nullability as kafeed writes (field ids aside)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return bool(schema_to_pyarrow(schema, include_field_ids=False).equals(arrow_schema()))


def _split(identifier: str) -> tuple[str, str]:
    namespace, _, name = identifier.rpartition(".")
    return namespace, name


def load_table(catalog: Any, identifier: str) -> Any:
    """An existing table, or ConfigError naming it."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        return catalog.load_table(identifier)
    except (NoSuchTableError, NoSuchNamespaceError):
        raise ConfigError(f"Table {identifier!r} does not exist in the catalog.",
                          hint="Archive a topic into it first with `kafeed archive --topic T "
                               f"--table {identifier}`.") from None
    except Exception as exc:
        raise CatalogUnavailable(f"Could not load table {identifier!r}: {_one_line(exc)}.",
                                 hint="Check that the catalog is reachable.") from exc


def open_table(catalog: Any, identifier: str, *, topic: str, cluster_id: str, kind: Kind,
               target_file_bytes: int) -> Any:
    """``identifier``, created for ``topic`` on ``cluster_id`` if absent; checked if present."""
    from pyiceberg.exceptions import NoSuchTableError

    table = None
    for attempt in range(3):
        try:
            table = catalog.load_table(identifier)
            break
        except NoSuchTableError:
            pass
        except Exception as exc:
            raise CatalogUnavailable(f"Could not load table {identifier!r}: {_one_line(exc)}.",
                                     hint="Check that the catalog is reachable.") from exc
        try:
            table = _create(catalog, identifier, topic=topic, cluster_id=cluster_id, kind=kind,
                            target_file_bytes=target_file_bytes)
            break
        except Exception as exc:  # another sink created the namespace or table first: load it
            if attempt == 2:
                raise CatalogUnavailable(f"Could not create table {identifier!r}: {_one_line(exc)}.",
                                         hint="Check that the catalog is reachable and writable.") from exc
    check_table(table, identifier, topic=topic, cluster_id=cluster_id, kind=kind)
    return table


def _create(catalog: Any, identifier: str, *, topic: str, cluster_id: str, kind: Kind,
            target_file_bytes: int) -> Any:
    namespace, _ = _split(identifier)
    catalog.create_namespace_if_not_exists(namespace)
    schema = iceberg_schema()
    table = catalog.create_table(
        identifier, schema=schema, partition_spec=partition_spec(schema), sort_order=sort_order(schema),
        properties={PROP_TOPIC: topic, PROP_CLUSTER: cluster_id, PROP_KIND: kind, PROP_SCHEMA: SCHEMA_VERSION,
                    "write.target-file-size-bytes": str(target_file_bytes), **NO_LIBRARY_RETRY})
    log.info("kafeed archive: created table %s for %s", identifier, topic)
    return table


def check_table(table: Any, identifier: str, *, topic: str, cluster_id: str | None,
                kind: Kind | None) -> None:
    """Refuse a table that is not an archive of ``topic`` on ``cluster_id`` with this schema."""
    props = table.properties
    if PROP_TOPIC not in props:
        raise ConfigError(f"Table {identifier!r} was not made by kafeed archive.",
                          hint="Archive into a new table name.")
    if props[PROP_TOPIC] != topic:
        raise ConfigError(f"Table {identifier!r} archives topic {props[PROP_TOPIC]!r}, not {topic!r}.",
                          hint="Give each topic its own table.")
    if cluster_id is not None and props.get(PROP_CLUSTER) != cluster_id:
        raise ConfigError(
            f"Table {identifier!r} archives topic {topic!r} of Kafka cluster {props.get(PROP_CLUSTER)!r}, "
            f"not of this cluster ({cluster_id!r}): its offsets mean nothing here.",
            hint="Archive this cluster's topic into a new table.")
    if kind is not None and props.get(PROP_KIND) != kind:
        raise ConfigError(f"Table {identifier!r} holds {props.get(PROP_KIND)} records, not {kind}.",
                          hint=f"Pass --kind {props.get(PROP_KIND)}, or archive into a new table.")
    if props.get(PROP_SCHEMA) != SCHEMA_VERSION or not _same_layout(table.schema()):
        raise ConfigError(f"Table {identifier!r} has a schema this kafeed does not write.",
                          hint="Archive into a new table, or use the kafeed version that made it.")
    if props.get("commit.retry.num-retries") != "0":
        raise ConfigError(f"Table {identifier!r} lets the library retry commits on its own.",
                          hint="Set its property commit.retry.num-retries to 0.")
