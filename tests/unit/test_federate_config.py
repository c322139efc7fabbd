"""The federated job's file: bad input is one sentence, found before anything is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kafeed.errors import ConfigError, SchemaError
from kafeed.federate.blobs import BlobAssembler, chunk_count, decode_arrays, encode_arrays, produce_blob
from kafeed.federate.config import load_federation
from kafeed.federate.weights import check_shapes

GOOD = """
job = "fl"
quorum = 2
state_dir = "{state}"
[training]
bootstrap = "127.0.0.1:9092"
[[sites]]
name = "a"
bootstrap = "127.0.0.1:9192"
[[sites]]
name = "b"
bootstrap = "127.0.0.1:9292"
"""


def _job(tmp_path: Path, text: str = GOOD, **replace: str) -> Path:
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "job.toml"
    path.write_text(text.replace("{state}", str(tmp_path / "state")))
    return path


def test_a_good_job_names_its_topics(tmp_path: Path) -> None:
    settings = load_federation(_job(tmp_path))
    assert (settings.global_topic, settings.update_topic("a")) == ("fl.global", "fl.updates.a")
    assert settings.site_dir("a") == tmp_path / "state" / "fl" / "sites" / "a"
    assert not (tmp_path / "state").exists()  # validating writes nothing


@pytest.mark.parametrize(("change", "said"), [
    ({"quorum = 2": "quorum = 3"}, "quorum 3 is more than the 2 sites"),
    ({'name = "b"': 'name = "a"'}, "site name 'a' is used more than once"),
    ({"[training]": "[model]\nd_model = 30\nn_heads = 4\n[training]"}, "not a multiple of n_heads"),
    ({"[training]": "[model]\nvocab_size = 2000000\nd_model = 512\n[training]"}, "more than the 2 GiB"),
    ({'job = "fl"': 'job = "fl"\nstrategy = "fedsgd"'}, "strategy"),
    ({'job = "fl"': 'job = "fl"\nlate_policy = "keep"'}, "late_policy"),
    ({'bootstrap = "127.0.0.1:9192"\n': ""}, "site 'a' needs a bootstrap or a client_file"),
    ({'quorum = 2': 'quorum = 1\nsecure = true'}, "secure aggregation needs a quorum of at least 2"),
])
def test_bad_input_is_one_sentence(tmp_path: Path, change: dict[str, str], said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_federation(_job(tmp_path, **change))
    assert said in caught.value.message
    assert "\n" not in caught.value.message and "{" not in caught.value.message
    assert not (tmp_path / "state").exists()


def test_an_unknown_site_is_named_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Site 'c' is not in the job's config \(its sites: a, b\)"):
        load_federation(_job(tmp_path)).site("c")


def test_a_state_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="state_dir"):
        load_federation(_job(tmp_path, **{'state_dir = "{state}"': f'state_dir = "{tmp_path / "file"}"'}))


class _Record:
    def __init__(self, offset: int, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        self._offset, self._value, self._headers = offset, value, headers

    def headers(self) -> list[tuple[str, bytes]]:
        return self._headers

    def value(self) -> bytes:
        return self._value

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000)

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0


class _Chunks:
    def __init__(self) -> None:
        self.records: list[_Record] = []

    def produce(self, topic: str, value: bytes | None, key: bytes | None = None, *, partition: int = -1,
                headers: list[tuple[str, bytes]] | None = None) -> None:
        self.records.append(_Record(len(self.records), value or b"", headers or []))


def test_a_blob_larger_than_a_chunk_comes_back_exactly() -> None:
    arrays = {"w": np.arange(300_000, dtype=np.float32).reshape(600, 500), "m": np.arange(7, dtype=np.uint64)}
    data = encode_arrays(arrays, {"version": 3})
    sink = _Chunks()
    assert produce_blob(sink, "t", "v3", data, chunk_bytes=100_000) == chunk_count(len(data), 100_000) > 1
    assembler = BlobAssembler(what="test")
    blobs = [b for r in sink.records if (b := assembler.add(r)) is not None]
    assert len(blobs) == 1 and blobs[0].data == data
    back, meta = decode_arrays(blobs[0].data)
    assert meta == {"version": 3}
    assert all(np.array_equal(back[k], arrays[k]) and back[k].dtype == arrays[k].dtype for k in arrays)


def test_a_torn_or_changed_blob_is_refused() -> None:
    data = encode_arrays({"w": np.ones(50_000, np.float32)})
    sink = _Chunks()
    produce_blob(sink, "t", "v1", data, chunk_bytes=40_000)
    # Starting mid-blob (no chunk 0) yields nothing; a changed byte fails the checksum.
    assembler = BlobAssembler(what="test")
    assert [assembler.add(r) for r in sink.records[1:]] == [None] * (len(sink.records) - 1)
    changed = sink.records[-1]
    changed._value = changed._value[:-1] + b"\x01"
    assembler = BlobAssembler(what="test")
    with pytest.raises(SchemaError, match="does not match its SHA-256"):
        for r in sink.records:
            assembler.add(r)


def test_an_update_of_the_wrong_shape_is_one_sentence() -> None:
    like = {"a": np.zeros((2, 3), np.float32), "b": np.zeros(4, np.float32)}
    with pytest.raises(SchemaError, match=r"tensor 'a' of shape \[3, 2\], the model's is \[2, 3\]"):
        check_shapes({"a": np.zeros((3, 2), np.float32), "b": np.zeros(4, np.float32)}, like, what="It")
    with pytest.raises(SchemaError, match="missing 'b'"):
        check_shapes({"a": np.zeros((2, 3), np.float32)}, like, what="It")


def test_an_unreachable_site_is_one_sentence_and_writes_nothing(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from kafeed.broker import free_port_block
    from kafeed.cli.main import main

    dead = free_port_block(1)  # nothing listens there
    path = _job(tmp_path, **{'bootstrap = "127.0.0.1:9192"': f'bootstrap = "127.0.0.1:{dead}"'})
    assert main(["federate", "site", "--config", str(path), "--site", "a"]) == 1
    err = capsys.readouterr().err
    assert f"127.0.0.1:{dead}" in err and err.count("error:") == 1
    assert not (tmp_path / "state").exists()


def test_the_documented_job_file_is_valid(tmp_path: Path) -> None:
    import re

    docs = Path(__file__).resolve().parents[2] / "docs" / "federated.md"
    block = re.search(r"```toml\n(.*?)```", docs.read_text(), re.S)
    assert block is not None
    path = tmp_path / "job.toml"
    path.write_text(block.group(1).replace('"~/.cache/kafeed/federate"', f'"{tmp_path / "state"}"'))
    settings = load_federation(path)
    assert (settings.job, settings.quorum, settings.sites[0].name) == ("fl-demo", 2, "site-a")
