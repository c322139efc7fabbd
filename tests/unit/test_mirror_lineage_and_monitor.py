"""A mirrored record's origin header, read back by lineage, and per-site lag in the monitor (no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from kafeed.config import ConnectionSettings
from kafeed.mirror import load_mirror_settings
from kafeed.mirror.lineage import SiteLineage, _collect, ranges_of
from kafeed.mirror.origin import ORIGIN_HEADER, TRANSFORM_CLASS, Origin, parse_origin
from kafeed.mirror.render import mirror_properties
from kafeed.monitor.dashboard import render
from kafeed.monitor.export import export_snapshot
from kafeed.monitor.health import BrokerInfo, ClusterHealth
from kafeed.monitor.snapshot import Snapshot
from kafeed.schema.records_pb2 import TokenizedDocument
from kafeed.telemetry import metrics as m


@pytest.mark.parametrize(("text", "origin"), [
    ("site-a/raw/0/41", Origin("site-a", "raw", 0, 41)),
    ("site_b/events.clicks/12/0", Origin("site_b", "events.clicks", 12, 0)),
    ("site-a/raw/0", None), ("site-a/raw/x/1", None), ("/raw/0/1", None), ("", None),
])
def test_an_origin_header_names_site_topic_partition_offset(text: str, origin: Origin | None) -> None:
    assert parse_origin(text) == origin
    if origin is not None:
        assert str(origin) == text


def test_every_site_flow_adds_the_origin_header(tmp_path: Path) -> None:
    path = tmp_path / "sites.toml"
    path.write_text('[target]\nalias = "train"\nbootstrap = "h:1"\n'
                    '[[sites]]\nalias = "site-a"\nbootstrap = "h:2"\n'
                    '[[sites]]\nalias = "site-b"\nbootstrap = "h:3"\n')
    settings = load_mirror_settings(path)
    conns = {a: ConnectionSettings(bootstrap="h:1") for a in ("train", "site-a", "site-b")}
    props = dict(line.split(" = ", 1) for line in
                 mirror_properties(settings, conns, replication=1, rest_port=1).splitlines())
    for site in ("site-a", "site-b"):
        assert props[f"{site}->train.transforms"] == "origin"
        assert props[f"{site}->train.transforms.origin.type"] == TRANSFORM_CLASS


def test_lineage_reads_the_origin_prepare_kept_in_a_token_records_metadata() -> None:
    found = SiteLineage()
    mirrored = TokenizedDocument(id="doc-1")
    mirrored.metadata[ORIGIN_HEADER] = "site-b/raw/1/7"
    _collect(found, mirrored.SerializeToString())
    _collect(found, TokenizedDocument(id="doc-2").SerializeToString())  # prepared from a local topic
    assert found.documents == [("doc-1", Origin("site-b", "raw", 1, 7))]
    assert found.as_dict() == {"sites": {"site-b": 1}, "without_origin": 1, "documents": [
        {"id": "doc-1", "site": "site-b", "topic": "raw", "partition": 1, "offset": 7}]}
    assert ranges_of({"tokens:0": {"ranges": [[0, 5], [9, 12]], "next": 12}}) == {
        "tokens:0": [(0, 5), (9, 12)]}


def test_the_monitor_shows_and_exports_each_sites_lag() -> None:
    health = ClusterHealth([BrokerInfo(1, "h", 9092)], 1, 1, 0, 0, 0)
    sites = [{"site": "site-a", "reachable": True, "state": "RUNNING", "behind_records": 1234,
              "last_error": None},
             {"site": "site-b", "reachable": False, "state": None, "behind_records": 0,
              "last_error": "Site 'site-b' cannot be reached"}]
    snap = Snapshot(0.0, "h:9092", health, 1, [], {}, [], sites=sites)
    assert snap.as_dict()["sites"] == sites
    console = Console(width=160, record=True)
    console.print(render(snap))
    text = console.export_text()
    assert "mirrored sites" in text and "1,234" in text and "cannot be reached" in text
    export_snapshot(snap)
    assert m.REGISTRY.get_sample_value("kafeed_mirror_behind_records", {"site": "site-a"}) == 1234
    assert m.REGISTRY.get_sample_value("kafeed_mirror_behind_records", {"site": "site-b"}) is None


def test_a_mixture_weights_sites_by_their_prepared_topics() -> None:
    from kafeed import Mixture
    from kafeed.loader.nodes.mixing import parse_mix

    assert parse_mix("site-a.tokens=0.7,site-b.tokens=0.3") == {"site-a.tokens": 0.7, "site-b.tokens": 0.3}
    mix = Mixture({"site-a": 0.7, "site-b": 0.3},
                  sources={"site-a": "site-a.tokens", "site-b": ["site-b.tokens"]},
                  seq_len=64, eos_id=0, bootstrap="127.0.0.1:1")  # no connection until iterated
    assert mix.sources == {"site-a": ("site-a.tokens",), "site-b": ("site-b.tokens",)}
    assert mix.weights == {"site-a": 0.7, "site-b": 0.3}


def test_prepare_keeps_a_mirrored_records_origin_in_the_samples_metadata() -> None:
    from kafeed.prepare.decode import decode_batch
    from kafeed.schema import make_sample
    from kafeed.stream import Record

    value = make_sample("three words here", id="d1").SerializeToString()
    mirrored = Record("site-a.raw", 1, 9, b"k", value, ((ORIGIN_HEADER, b"site-a/raw/1/7"),))
    local = Record("raw", 0, 3, b"k", value)
    got = decode_batch([mirrored, local]).decoded
    assert got[0].sample.metadata[ORIGIN_HEADER] == "site-a/raw/1/7"
    assert ORIGIN_HEADER not in got[1].sample.metadata
