"""`kafeed mirror` from a secured site (SASL_SSL + SCRAM-SHA-512, the `broker start --secure` role
files) into the plaintext training cluster: a wrong password is one sentence naming the site, with
nothing mirrored and nothing lost; the right one mirrors every record once; no password is printed
or logged anywhere.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster
from kafeed.config import ConnectionSettings
from kafeed.mirror.progress import end_offsets
from kafeed.schema import decode_sample
from kafeed.topics import TopicAdmin, plan_topic
from tests.prepare_support import paragraphs, produce, read_topic, sample_record

SITE = "site-s"


def _config(path: Path, train: LocalCluster, client_file: Path, topic: str) -> Path:
    path.write_text("\n".join([
        f'work_dir = "{path.parent / "mirror-work"}"', "heap_mb = 320", "rebalance_delay_s = 0",
        "[target]", 'alias = "train"', f'bootstrap = "{train.bootstrap}"',
        "[[sites]]", f'alias = "{SITE}"', f'client_file = "{client_file}"', f'topics = "{topic}"',
    ]) + "\n")
    return path


def _mirror(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafeed.cli.main", "mirror", "run", "--config", str(config),
                           "--jit", "quick", "--until-caught-up", "--json"],
                          capture_output=True, text=True, timeout=240)


def _files_text(root: Path) -> str:
    """Every file the mirror left under ``root`` (its logs; the properties file is removed at exit)."""
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


@pytest.fixture
def site_topic(secure_cluster: LocalCluster) -> tuple[str, list[tuple[bytes, bytes, None]]]:
    """A fresh topic at the secured site holding 40 records."""
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    TopicAdmin(secure_cluster.connection()).create(plan_topic(topic, brokers=1, partitions=2))
    sent = [sample_record(t) for t in paragraphs(40, seed=topic)]
    produce(secure_cluster.connection(), topic, sent)
    return topic, sent


def _password(client_file: Path) -> str:
    found = re.search(r'sasl_password = "([^"]+)"', client_file.read_text())
    assert found is not None
    return found.group(1)


def test_a_wrong_password_at_a_secured_site_is_one_sentence_naming_it_and_mirrors_nothing(
        secure_cluster: LocalCluster, kafka_cluster: LocalCluster, tmp_path: Path,
        site_topic: tuple[str, list[tuple[bytes, bytes, None]]]) -> None:
    topic, sent = site_topic
    good = secure_cluster.client_file("admin")
    wrong_password = uuid.uuid4().hex
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(good.read_text().replace(_password(good), wrong_password))
    wrong.chmod(0o600)
    refused = _mirror(_config(tmp_path / "sites.toml", kafka_cluster, wrong, topic))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    said = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    print(said)
    assert len(said) == 1 and said[0].startswith(f"error: Site '{SITE}'"), refused.stderr
    assert "authentication" in said[0].lower(), said[0]
    assert "Traceback" not in refused.stderr
    train = ConnectionSettings(bootstrap=kafka_cluster.bootstrap)
    assert f"{SITE}.{topic}" not in TopicAdmin(train).list(), "a refused site had records mirrored"
    assert sum(end_offsets(secure_cluster.connection(), [topic]).values()) == len(sent), "records lost"
    shown = refused.stdout + refused.stderr + _files_text(tmp_path / "mirror-work")
    for secret in (_password(good), wrong_password):
        assert secret not in shown, "a password was printed or logged"


@pytest.mark.slow  # a MirrorMaker node over TLS + SCRAM, from start to drained: 30-70 s
def test_the_right_password_mirrors_every_record_once_and_logs_no_password(
        secure_cluster: LocalCluster, kafka_cluster: LocalCluster, tmp_path: Path,
        site_topic: tuple[str, list[tuple[bytes, bytes, None]]]) -> None:
    topic, sent = site_topic
    good = secure_cluster.client_file("admin")
    done = _mirror(_config(tmp_path / "sites.toml", kafka_cluster, good, topic))
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["caught_up"] is True
    mirrored = read_topic(ConnectionSettings(bootstrap=kafka_cluster.bootstrap), f"{SITE}.{topic}")
    assert sorted(decode_sample(m.value()).id for m in mirrored) == sorted(
        decode_sample(value).id for _, value, _ in sent)
    shown = done.stdout + done.stderr + _files_text(tmp_path / "mirror-work")
    assert (tmp_path / "mirror-work" / "logs" / "mirror.log").exists()
    assert _password(good) not in shown, "a password was printed or logged"


def test_a_killed_mirror_leaves_no_password_behind(
        secure_cluster: LocalCluster, kafka_cluster: LocalCluster, tmp_path: Path,
        site_topic: tuple[str, list[tuple[bytes, bytes, None]]]) -> None:
    import os
    import signal
    import time

    topic, _ = site_topic
    good = secure_cluster.client_file("admin")
    config = _config(tmp_path / "sites.toml", kafka_cluster, good, topic)
    work = tmp_path / "mirror-work"
    args = [sys.executable, "-m", "kafeed.cli.main", "mirror", "run", "--config", str(config),
            "--jit", "quick"]
    node = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(work.glob("mm2-*.properties")) and node.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # the rendered file appearing is the signal
        assert list(work.glob("mm2-*.properties")), "the node never rendered its properties"
    finally:
        os.kill(node.pid, signal.SIGKILL)
        node.wait(30)
    # The file a SIGKILLed node could not remove names no password; nothing else there does either.
    assert _password(good) not in _files_text(work), "a killed mirror left a password behind"
    assert "${env:KAFEED_MIRROR_JAAS_0}" in _files_text(work)
