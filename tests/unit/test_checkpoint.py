from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kafeed.train.checkpoint import CheckpointError, CheckpointManager, read_manifest, resolve_manifest


def _payload(step: int) -> dict[str, object]:
    return {"model": {"w": torch.full((4,), float(step))}, "step": step}


def test_save_and_load_latest(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path, keep=2)
    for step in (10, 20, 30):
        mgr.save(step, _payload(step), manifest={"loader": {"pos": step}})
    # only the newest two are kept
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step-00000020.json", "step-00000020.pt", "step-00000030.json", "step-00000030.pt"]
    ckpt = mgr.load_latest()
    assert ckpt is not None and ckpt.step == 30
    assert torch.equal(ckpt.payload["model"]["w"], torch.full((4,), 30.0))
    assert ckpt.manifest["loader"] == {"pos": 30}


@pytest.mark.parametrize("damage", ["truncate", "flip", "no_manifest", "bad_manifest"])
def test_corrupt_newest_falls_back(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    mgr = CheckpointManager(tmp_path, keep=3)
    mgr.save(1, _payload(1))
    pt = mgr.save(2, _payload(2))
    if damage == "truncate":
        pt.write_bytes(pt.read_bytes()[:50])
    elif damage == "flip":
        data = bytearray(pt.read_bytes())
        data[len(data) // 2] ^= 0xFF
        pt.write_bytes(bytes(data))
    elif damage == "no_manifest":
        pt.with_suffix(".json").unlink()
    else:
        pt.with_suffix(".json").write_text("{not json")
    with caplog.at_level("WARNING", logger="kafeed"):
        ckpt = mgr.load_latest()
    assert ckpt is not None and ckpt.step == 1
    if damage != "no_manifest":
        assert "skipping checkpoint at step 2" in caplog.text


def test_empty_dir_has_no_checkpoint(tmp_path: Path) -> None:
    assert CheckpointManager(tmp_path / "none").load_latest() is None


def test_temp_files_never_count(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path)
    mgr.save(5, _payload(5))
    (tmp_path / ".step-00000009.pt.tmp").write_bytes(b"partial")
    ckpt = mgr.load_latest()
    assert ckpt is not None and ckpt.step == 5


def test_manifest_readable_without_torch(tmp_path: Path) -> None:
    mgr = CheckpointManager(tmp_path)
    pt = mgr.save(7, _payload(7), manifest={"lineage": {"x": 1}})
    assert resolve_manifest(tmp_path) == pt.with_suffix(".json")
    assert resolve_manifest(pt) == pt.with_suffix(".json")
    doc = read_manifest(resolve_manifest(tmp_path))
    assert doc["step"] == 7 and doc["lineage"] == {"x": 1}
    assert json.loads(pt.with_suffix(".json").read_text())["sha256"] == doc["sha256"]
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        resolve_manifest(tmp_path / "empty" if (tmp_path / "empty").mkdir() is None else tmp_path)


@pytest.mark.parametrize("text", ["0", "[1, 2]", '"step"', "null", "{not json"])
def test_a_manifest_that_is_no_json_object_is_one_sentence(tmp_path: Path, text: str) -> None:
    path = tmp_path / "step-00000001.json"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=r"^Checkpoint manifest .* is (not a JSON object|unreadable)"):
        read_manifest(path)


def test_check_writable_probes_and_leaves_nothing(tmp_path: Path) -> None:
    from kafeed.errors import ConfigError
    from kafeed.train.checkpoint import check_writable

    check_writable(tmp_path / "new" / "ck")
    assert list(tmp_path.iterdir()) == []  # the directories it made for the probe are gone again
    (tmp_path / "kept").mkdir()
    check_writable(tmp_path / "kept")
    assert list((tmp_path / "kept").iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="Cannot write checkpoints to"):
        check_writable(tmp_path / "file" / "ck")
