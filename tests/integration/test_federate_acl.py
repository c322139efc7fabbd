"""The TLS + SCRAM variant: the training cluster secured (SASL_SSL, SCRAM-SHA-512, deny by
default), each site a principal of its own that `kafeed federate setup --site-user` confines to
writing its own update topic and reading the global model; a round runs through it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster
from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.federate.blobs import encode_arrays, produce_blob
from kafeed.federate.config import load_federation
from kafeed.federate.coordinator import Coordinator
from kafeed.federate.site import SiteRunner
from kafeed.kafka import KafkaClients
from tests.integration.federate_support import check_rounds_from_ledgers, produce_site_docs
from tests.kafka_fixtures import TopicFactory

# Two role users of the secured broker that have no ACL on a federated job's topics.
SITE_USERS = {"site-a": "archive", "site-b": "tasks"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sites_confined_to_their_own_updates_over_tls_and_scram(
        secure_cluster: LocalCluster, kafka: ConnectionSettings, make_topic: TopicFactory,
        tmp_path: Path) -> None:
    topics = {name: make_topic(prefix=f"fed-acl-{name}") for name in SITE_USERS}
    for seed, (name, topic) in enumerate(topics.items()):
        produce_site_docs(kafka.bootstrap, topic, 40, seed=seed + 1, marker=f"secret{name}".encode())
    lines = ['job = "fl-acl"', "rounds = 1", "local_steps = 2", "batch_size = 4", "quorum = 2",
             "deadline_s = 0.0", f'state_dir = "{tmp_path / "state"}"',
             "[training]", f'client_file = "{secure_cluster.client_file("admin")}"',
             "[model]", "d_model = 16", "n_heads = 2", "seq_len = 16"]
    for name, user in SITE_USERS.items():
        lines += ["[[sites]]", f'name = "{name}"', f'bootstrap = "{kafka.bootstrap}"',
                  f'topics = ["{topics[name]}"]',
                  f'training_client_file = "{secure_cluster.client_file(user)}"']
    path = tmp_path / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    settings = load_federation(path)
    grants = [arg for name, user in SITE_USERS.items() for arg in ("--site-user", f"{name}={user}")]
    assert main(["federate", "setup", "--config", str(path), *grants]) == 0

    runners = [SiteRunner(settings, name) for name in SITE_USERS]
    threads = [threading.Thread(target=r.run, daemon=True) for r in runners]
    for t in threads:
        t.start()
    assert Coordinator(settings).run().final_version == 1
    for t in threads:
        t.join(60)
    assert [r.summary.updates_sent for r in runners] == [[1], [1]]
    check_rounds_from_ledgers(settings)

    # site-a's principal may not read site-b's updates, nor write the global model or site-b's topic.
    site_a = KafkaClients(settings.site_training_connection("site-a"))
    # (A topic it may not describe is hidden from it: the cluster says it does not exist.)
    with pytest.raises(KafeedError, match=r"(?i)authoriz|does not exist"):
        site_a.read_to_end(settings.update_topic("site-b"), timeout_s=20)
    for topic in (settings.global_topic, settings.update_topic("site-b")):
        producer = site_a.transactional_producer(transactional_id="fl-acl.site.site-a", stage="test")
        producer.init()
        with pytest.raises(KafeedError):
            producer.begin()
            produce_blob(producer, topic, "forged", encode_arrays({}, {"site": "site-b"}))
            producer.commit()
        producer.recover(KafeedError("forged write refused"))
    admin = KafkaClients(settings.training_connection())
    for topic in (settings.global_topic, settings.update_topic("site-b")):
        assert all(msg.key() != b"forged" for msg in admin.read_to_end(topic))
