"""The mirror's TOML file and the MirrorMaker properties rendered from it (no cluster needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError
from kafeed.mirror import load_mirror_settings
from kafeed.mirror.render import java_client_properties, mirror_properties

CONFIG = """
work_dir = "{work}"
[target]
alias = "train"
bootstrap = "127.0.0.1:9092"
[[sites]]
alias = "site-a"
bootstrap = "127.0.0.1:9192"
topics = "raw, events\\\\..*"
[[sites]]
alias = "site-b"
bootstrap = "127.0.0.1:9292"
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "sites.toml"
    path.write_text(CONFIG.format(work=tmp_path / "work"))
    return path


def _props(text: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in text.splitlines())


def test_every_site_flows_into_the_target_exactly_once_and_never_back(config: Path) -> None:
    settings = load_mirror_settings(config)
    conns = {c.alias: ConnectionSettings(bootstrap=c.bootstrap or "") for c in
             (settings.target, *settings.sites)}
    props = _props(mirror_properties(settings, conns, replication=1, rest_port=8123))
    assert props["clusters"] == "site-a, site-b, train"
    assert props["train.exactly.once.source.support"] == "enabled"
    # Worker settings reach each flow's worker through the target's prefix.
    assert props["train.producer.transaction.timeout.ms"] == "20000"
    assert props["train.plugin.discovery"] == "service_load"
    for site in ("site-a", "site-b"):
        assert props[f"{site}->train.enabled"] == "true"
        assert props[f"train->{site}.enabled"] == "false"
        assert props[f"{site}->train.emit.checkpoints.enabled"] == "true"
        assert props[f"{site}->train.offset-syncs.topic.location"] == "target"
        assert props[f"{site}.consumer.isolation.level"] == "read_committed"
    assert props["site-a->train.topics"] == "raw, events\\\\..*"  # a backslash escaped for Properties
    assert props["site-b->train.topics"] == "raw"
    assert props["offset.storage.replication.factor"] == "1"
    assert props["listeners"] == "http://127.0.0.1:8123"
    assert "replication.policy.class" not in props  # the default policy: site-a.raw


def test_a_scram_site_gets_a_jaas_line_and_its_password_nowhere_else(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    conn = ConnectionSettings(bootstrap="127.0.0.1:9093", security_protocol="SASL_SSL",
                              sasl_mechanism="SCRAM-SHA-512", sasl_username="mirror",
                              sasl_password=SecretStr('p"w\\d'), ssl_ca_location=tmp_path / "ca.pem")
    props = java_client_properties("site-a", conn)
    assert props["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                         'username="mirror" password="p\\"w\\\\d";')
    assert props["ssl.truststore.type"] == "PEM"
    assert [k for k, v in props.items() if 'p\\"w' in v] == ["sasl.jaas.config"]
    assert "p\"w" not in repr(conn)


def test_an_unknown_site_is_one_sentence(config: Path) -> None:
    settings = load_mirror_settings(config)
    with pytest.raises(ConfigError, match="Site 'site-c' is not in the mirror's config"):
        settings.only(["site-c"])
    assert [s.alias for s in settings.only(["site-b"]).sites] == ["site-b"]


@pytest.mark.parametrize(("edit", "said"), [
    (("alias = \"site-b\"", "alias = \"site-a\""), "alias 'site-a' names more than one cluster"),
    (("alias = \"site-b\"", "alias = \"site.b\""), "sites.1.alias"),
    (("topics = \"raw", "topics = \"raw(, "), "is not a regular expression"),
    (("bootstrap = \"127.0.0.1:9292\"", ""), "needs a bootstrap or a client_file"),
    # A site that is the training cluster mirrors its own copies (site-a.site-a.….heartbeats).
    (("bootstrap = \"127.0.0.1:9292\"", "bootstrap = \"LOCALHOST:9092\""),
     "site 'site-b' has the target's bootstrap address 127.0.0.1:9092"),
    (("work_dir = \"", "work_dir = \"/etc/passwd\"\n# \""), "work_dir: /etc/passwd is a file"),
])
def test_a_bad_file_is_refused_before_anything_runs(config: Path, edit: tuple[str, str], said: str) -> None:
    config.write_text(config.read_text().replace(*edit))
    with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(".", r"\.")):
        load_mirror_settings(config)


@pytest.mark.parametrize(("patterns", "said"), [
    ("(?P<r>raw)", "Site 'site-a''s topics pattern '(?P<r>raw)' is not a Java regular expression"),
    ("raw, x{2,1}", "topics pattern 'x{2' is not"),  # MirrorMaker splits its list at commas too
])
def test_topic_patterns_are_compiled_by_java_before_any_cluster_is_asked(
        tmp_path: Path, patterns: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    from kafeed.cli.main import main

    # Python's re compiles these; MirrorMaker's java.util.regex does not (and then mirrors
    # nothing). The bootstraps are closed ports: a check that reached a cluster would be exit 1.
    config = tmp_path / "sites.toml"
    config.write_text(CONFIG.format(work=tmp_path / "work").replace("raw, events\\\\..*", patterns))
    assert load_mirror_settings(config).site("site-a").topics == patterns
    assert main(["mirror", "run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert said in " ".join(err.split()), err


def test_java_takes_what_mirrormaker_takes() -> None:
    from kafeed.mirror.java_patterns import java_pattern_errors

    errors = java_pattern_errors(["raw", r"events\..*", r"\p{Alpha}+", "(?<r>raw)",
                                  "(?P<r>raw)", "a(", "[z-a]"])
    assert [e is None for e in errors] == [True, True, True, True, False, False, False]


def test_no_password_is_written_into_the_rendered_properties(config: Path, tmp_path: Path) -> None:
    from kafeed.mirror.render import mirror_secrets

    settings = load_mirror_settings(config)
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    secured = {alias: SecretStr(f"pw-of-{alias}-x7") for alias in ("site-b", "train")}
    clusters = (settings.target, *settings.sites)
    conns = {c.alias: ConnectionSettings(bootstrap=c.bootstrap or "") for c in clusters}
    for alias, password in secured.items():
        conns[alias] = ConnectionSettings(bootstrap=conns[alias].bootstrap, security_protocol="SASL_SSL",
                                          sasl_mechanism="SCRAM-SHA-512", sasl_username="mirror",
                                          sasl_password=password, ssl_ca_location=tmp_path / "ca.pem")
    text = mirror_properties(settings, conns, replication=1, rest_port=1)
    assert "pw-of-" not in text
    props = _props(text)
    assert props["site-b.sasl.jaas.config"] == "${env:KAFEED_MIRROR_JAAS_1}"
    assert props["train.sasl.jaas.config"] == "${env:KAFEED_MIRROR_JAAS_2}"
    assert props["config.providers.env.class"].endswith(".provider.EnvVarConfigProvider")
    assert "site-a.sasl.jaas.config" not in props
    secrets = mirror_secrets(settings, conns)
    assert sorted(secrets) == ["KAFEED_MIRROR_JAAS_1", "KAFEED_MIRROR_JAAS_2"]
    assert "pw-of-site-b-x7" in secrets["KAFEED_MIRROR_JAAS_1"]
    plain = {c.alias: ConnectionSettings(bootstrap=c.bootstrap or "") for c in clusters}
    assert "config.providers" not in _props(mirror_properties(settings, plain, replication=1, rest_port=1))


def test_a_killed_nodes_properties_are_removed_at_the_next_start(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    import subprocess
    import sys

    from kafeed.mirror.process import remove_leftovers

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    (tmp_path / f"mm2-{gone}.properties").write_text("site.sasl.jaas.config = ... password=\"s3cret\";\n")
    mine = tmp_path / f"mm2-{os.getpid()}.properties"
    mine.write_text("a running node's\n")
    assert remove_leftovers(tmp_path) == [tmp_path / f"mm2-{gone}.properties"]
    assert [p.name for p in tmp_path.iterdir()] == [mine.name]
    assert "left by a mirror node that was killed" in caplog.text
