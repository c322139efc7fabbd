"""`kafeed mirror run` while a secured site's password changes under it (issue 29): a wrong
password at one site stops only that site's flow, the run says so in one sentence naming the
site (`kafeed mirror status` shows the site unreachable, refused), no password is printed or
logged, and the site's flow resumes once the password is restored, every record once.

The password changes at the site (its SCRAM credential altered), not in the mirror's client
file. A SCRAM login is checked when a connection opens, so the site cluster here re-checks
every live connection (``connections.max.reauth.ms``, KIP-368); without it the mirror's open
connections would keep working until they next reconnect.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from pydantic import SecretStr

from kafeed.broker import LocalCluster, free_port_block
from kafeed.broker.secure import SUPER_USER
from kafeed.config import ConnectionSettings
from kafeed.mirror.process import MAIN_CLASS as MIRROR_MAIN
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.secure_support import process_tree
from tests.prepare_support import produce, read_topic

PLAIN, SECURED = "site-a", "site-s"
PARTITIONS = 2
BATCH = 300
#: How often the secured site re-checks a live connection's login (KIP-368).
REAUTH_MS = 5000


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
    """A plaintext site, a secured site (SASL_SSL + SCRAM) that re-checks logins, a training cluster."""
    made = {PLAIN: LocalCluster(tmp_path_factory.mktemp(PLAIN), nodes=1, port=free_port_block(2),
                                heap_mb=384, jit="quick"),
            SECURED: LocalCluster(tmp_path_factory.mktemp(SECURED), nodes=1, secure=True,
                                  port=free_port_block(3), heap_mb=384, jit="quick"),
            "train": LocalCluster(tmp_path_factory.mktemp("train"), nodes=1, port=free_port_block(2),
                                  heap_mb=384, jit="quick")}
    try:
        with ThreadPoolExecutor(len(made)) as pool:
            for started in [pool.submit(c.start, timeout=180) for c in made.values()]:
                started.result()
        secured = made[SECURED]
        secured.stop(timeout=15)
        for spec in secured.recorded_nodes() or []:
            with spec.properties_file.open("a") as fh:
                fh.write(f"connections.max.reauth.ms={REAUTH_MS}\n")
        secured.start(timeout=180)
        yield made
    finally:
        for cluster in made.values():
            cluster.stop(timeout=15, purge=True)


def _conn(cluster: LocalCluster) -> ConnectionSettings:
    return cluster.connection()


def _set_password(connection: ConnectionSettings, password: str) -> None:
    """Alter the SCRAM credential of ``connection``'s own user at its cluster."""
    admin = AdminClient(connection.client_config())
    user = connection.sasl_username or ""
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())])
    for future in futures.values():
        future.result(timeout=30)


def _records(site: str, first: int, count: int) -> list[tuple[bytes, bytes, None]]:
    return [(str(n % 7).encode(), f"{site}:{n}".encode(), None) for n in range(first, first + count)]


def _ids(train: LocalCluster, site: str, topic: str) -> list[int]:
    """The numbers of ``site``'s records a read_committed reader of the target sees, sorted."""
    if f"{site}.{topic}" not in TopicAdmin(_conn(train)).list():
        return []
    return sorted(int(m.value().decode().split(":")[1]) for m in read_topic(_conn(train), f"{site}.{topic}"))


def _mirrored(train: LocalCluster, site: str, topic: str) -> int:
    return len(_ids(train, site, topic))


def _wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float) -> float:
    """Seconds until ``ready()``; fails when the mirror exits or ``timeout`` passes first."""
    t0 = time.monotonic()
    while not ready():
        assert proc.poll() is None, f"kafeed mirror exited ({proc.returncode}) before {what}"
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"no {what} within {timeout:.0f} s")
        time.sleep(0.3)
    return time.monotonic() - t0


def _jvm(kafeed_pid: int) -> int:
    """The MirrorMaker JVM that ``kafeed mirror run`` started."""
    found = [pid for pid, line in process_tree(kafeed_pid).items() if MIRROR_MAIN in line]
    assert len(found) == 1, found
    return found[0]


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _files_text(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def _status(config: Path) -> tuple[dict[str, dict[str, object]], str]:
    done = subprocess.run([sys.executable, "-m", "kafeed.cli.main", "mirror", "status", "--config",
                           str(config), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return {s["site"]: s for s in json.loads(done.stdout)["sites"]}, done.stdout + done.stderr


@pytest.mark.slow  # three clusters (one started twice), a mirror through a refused login: 72-75 s
def test_a_password_changed_at_one_site_stops_only_its_flow_until_restored(
        clusters: dict[str, LocalCluster], tmp_path: Path) -> None:
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    for site in (PLAIN, SECURED):
        TopicAdmin(_conn(clusters[site])).create(plan_topic(topic, brokers=1, partitions=PARTITIONS))
    client_file = clusters[SECURED].client_file(SUPER_USER)
    work = tmp_path / "mirror-work"
    config = tmp_path / "sites.toml"
    config.write_text("\n".join([
        f'work_dir = "{work}"', "heap_mb = 320", "rebalance_delay_s = 0",
        "[target]", 'alias = "train"', f'bootstrap = "{clusters["train"].bootstrap}"',
        "[[sites]]", f'alias = "{PLAIN}"', f'bootstrap = "{clusters[PLAIN].bootstrap}"',
        f'topics = "{topic}"',
        "[[sites]]", f'alias = "{SECURED}"', f'client_file = "{client_file}"', f'topics = "{topic}"',
    ]) + "\n")
    old = _conn(clusters[SECURED])
    assert old.sasl_password is not None
    old_password, new_password = old.sasl_password.get_secret_value(), uuid.uuid4().hex
    new = old.model_copy(update={"sasl_password": SecretStr(new_password)})
    plain, train = _conn(clusters[PLAIN]), clusters["train"]

    produce(plain, topic, _records(PLAIN, 0, BATCH))
    produce(old, topic, _records(SECURED, 0, BATCH))
    out_file, err_file = tmp_path / "mirror.out", tmp_path / "mirror.err"
    with out_file.open("wb") as out, err_file.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "kafeed.cli.main", "mirror", "run", "--config",
                                 str(config), "--jit", "quick"], stdout=out, stderr=err)

    def said() -> str:  # the run's output as one line (rich wraps long log lines)
        return " ".join((out_file.read_text() + err_file.read_text()).split())

    try:
        took = _wait_for("first records of both sites", lambda: all(
            _mirrored(train, s, topic) >= BATCH for s in (PLAIN, SECURED)), proc, 240)
        print(f"both sites' first {BATCH} records mirrored {took:.1f} s after the start")
        jvm = _jvm(proc.pid)

        _set_password(old, new_password)
        changed_at = time.monotonic()
        log_file = work / "logs" / "mirror.log"
        took = _wait_for("authentication failure in the mirror's log", lambda: "invalid credentials" in (
            log_file.read_text(errors="replace") if log_file.exists() else ""), proc, 60)
        print(f"the mirror's log names the authentication failure {took:.1f} s after the change")
        cpu_before, wall_before = _cpu_s(jvm), time.monotonic()
        produce(new, topic, _records(SECURED, BATCH, BATCH))
        produce(plain, topic, _records(PLAIN, BATCH, BATCH))
        took = _wait_for(f"{PLAIN}'s records after the change",
                         lambda: _mirrored(train, PLAIN, topic) >= 2 * BATCH, proc, 120)
        print(f"{PLAIN}'s new records mirrored {took:.1f} s after they were produced, "
              f"{time.monotonic() - changed_at:.1f} s after the change")
        took = _wait_for(f"the run saying {SECURED} cannot be read",
                         lambda: f"Site '{SECURED}' cannot be read" in said(), proc, 60)
        print(f"the run said so {time.monotonic() - changed_at:.1f} s after the change")
        sentence = said().split("WARNING")[-1].strip()
        assert sentence.startswith(f"Site '{SECURED}' cannot be read, so its flow waits while the other "
                                   "sites go on:") and "SASL authentication error" in sentence, sentence
        print(sentence)
        assert f"Site '{PLAIN}'" not in said()

        sites, shown = _status(config)
        assert sites[PLAIN]["reachable"] is True and sites[PLAIN]["behind_records"] == 0
        assert sites[SECURED]["reachable"] is False
        assert "SASL authentication error" in str(sites[SECURED]["last_error"]), sites[SECURED]
        print(f"status of {SECURED}: {sites[SECURED]['state']}, {sites[SECURED]['last_error']}")
        assert _mirrored(train, SECURED, topic) == BATCH, f"{SECURED} was mirrored with a wrong password"
        assert proc.poll() is None, "the mirror exited when one site's password changed"
        cpu_out, wall_out = _cpu_s(jvm), time.monotonic()
        print(f"MirrorMaker's CPU: {(cpu_out - cpu_before) / (wall_out - wall_before):.2f} cores over the "
              f"{wall_out - wall_before:.0f} s with {SECURED} refusing the login")

        _set_password(new, old_password)
        took = _wait_for(f"{SECURED}'s records after the password was restored",
                         lambda: _mirrored(train, SECURED, topic) >= 2 * BATCH, proc, 180)
        print(f"{SECURED}'s held-back records mirrored {took:.1f} s after the password was restored")
        _wait_for(f"the run saying {SECURED} can be read again",
                  lambda: f"Site '{SECURED}' can be read again; its flow goes on." in said(), proc, 60)
        cpu_idle, wall_idle = _cpu_s(jvm), time.monotonic()
        sites, shown_after = _status(config)
        assert {s: (v["reachable"], v["behind_records"]) for s, v in sites.items()} == {
            PLAIN: (True, 0), SECURED: (True, 0)}
        print(f"MirrorMaker's CPU: {(_cpu_s(jvm) - cpu_idle) / (time.monotonic() - wall_idle):.2f} cores "
              f"over {time.monotonic() - wall_idle:.0f} s with nothing to mirror")
        shown += shown_after
        assert proc.poll() is None
        logs = sorted(p.name for p in (work / "logs").iterdir())
        failures = log_file.read_text(errors="replace").count("Failure during poll.")
        print(f"log files {logs}, {failures} poll failures logged")
        assert logs == ["mirror.log", "stdout.log"], "the poll failures rolled the mirror's log over"
        logged = _files_text(work / "logs")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 143, said()
    for site in (PLAIN, SECURED):
        assert _ids(train, site, topic) == list(range(2 * BATCH)), f"{site}: a record lost or doubled"
    for secret in (old_password, new_password):
        for where, text in (("kafeed's output", said() + shown), ("the mirror's logs", logged),
                            ("the work dir", _files_text(work))):
            assert secret not in text, f"a password appears in {where}"
