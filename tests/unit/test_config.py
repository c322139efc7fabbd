from __future__ import annotations

from pathlib import Path

import pytest

from kafeed.config import load_connection, parse_bootstrap
from kafeed.errors import ConfigError


def test_precedence_flag_env_file(tmp_path: Path) -> None:
    cfg = tmp_path / "k.toml"
    cfg.write_text('[connection]\nbootstrap = "file:1"\nclient_id = "from-file"\n')
    env = {"KAFEED_BOOTSTRAP": "env:2"}
    assert load_connection(config_file=cfg, env={}).bootstrap == "file:1"
    assert load_connection(config_file=cfg, env=env).bootstrap == "env:2"
    s = load_connection(bootstrap="flag:3", config_file=cfg, env=env)
    assert (s.bootstrap, s.client_id) == ("flag:3", "from-file")


def test_config_file_from_env(tmp_path: Path) -> None:
    cfg = tmp_path / "k.toml"
    cfg.write_text('[connection]\nbootstrap = "h:9"\n')
    assert load_connection(env={"KAFEED_CONFIG": str(cfg)}).bootstrap == "h:9"


def test_secret_never_printed() -> None:
    s = load_connection(env={"KAFEED_SECURITY_PROTOCOL": "SASL_SSL",
                             "KAFEED_SASL_MECHANISM": "SCRAM-SHA-512",
                             "KAFEED_SASL_USERNAME": "alice",
                             "KAFEED_SASL_PASSWORD": "hunter2"})
    assert "hunter2" not in repr(s) and "hunter2" not in str(s.model_dump())
    conf = s.client_config()
    assert conf["sasl.password"] == "hunter2" and conf["sasl.mechanism"] == "SCRAM-SHA-512"


def test_sasl_needs_credentials() -> None:
    with pytest.raises(ConfigError, match="sasl_mechanism"):
        load_connection(env={"KAFEED_SECURITY_PROTOCOL": "SASL_SSL"})


@pytest.mark.parametrize("bad", ["", "nohost", "host:port", ":9092"])
def test_bad_bootstrap(bad: str) -> None:
    with pytest.raises(ConfigError, match="bootstrap"):
        load_connection(bootstrap=bad or ",", env={})


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_connection(config_file=tmp_path / "nope.toml", env={})
    broken = tmp_path / "b.toml"
    broken.write_text("[connection\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_connection(config_file=broken, env={})


def test_unknown_key_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "k.toml"
    cfg.write_text('[connection]\nbootstrapp = "x:1"\n')
    with pytest.raises(ConfigError, match="bootstrapp"):
        load_connection(config_file=cfg, env={})


@pytest.mark.parametrize(("bad", "says"), [
    ("127.0.0.1:99999", "between 1 and 65535"),
    ("127.0.0.1:0", "between 1 and 65535"),
    ("127.0.0.1:abc", "a number"),
    ("host", "the port is required"),
    ("::1:9092", "[addr]:port"),
    ("a:1,b:x", "'b:x'"),
])
def test_bootstrap_syntax_is_a_one_line_config_error(bad: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_connection(bootstrap=bad, env={})
    assert says in info.value.message and "\n" not in info.value.message
    assert info.value.message.startswith(f"Invalid connection settings: bootstrap: got {bad!r}")


def test_bootstrap_forms_accepted_and_normalized() -> None:
    assert parse_bootstrap("[::1]:9092, h:1") == [("::1", 9092), ("h", 1)]
    assert parse_bootstrap("PLAINTEXT://h:7") == [("h", 7)]
    assert load_connection(bootstrap=" a:1 , b:2 ,", env={}).bootstrap == "a:1,b:2"


@pytest.mark.parametrize("empty", ["", "  "])
def test_empty_flag_or_variable_is_an_error_not_the_default(empty: str) -> None:
    with pytest.raises(ConfigError, match="should not be empty") as flag:
        load_connection(bootstrap=empty, env={})
    assert flag.value.hint == "Fix --bootstrap."
    with pytest.raises(ConfigError, match="should not be empty") as var:
        load_connection(env={"KAFEED_BOOTSTRAP": empty})
    assert var.value.hint == "Fix KAFEED_BOOTSTRAP."


def test_oauthbearer_takes_an_oidc_client_and_hides_its_secret() -> None:
    s = load_connection(env={"KAFEED_SECURITY_PROTOCOL": "SASL_SSL",
                             "KAFEED_SASL_MECHANISM": "OAUTHBEARER",
                             "KAFEED_OAUTH_TOKEN_ENDPOINT": "https://idp.example/token",
                             "KAFEED_OAUTH_CLIENT_ID": "kafeed-ingest",
                             "KAFEED_OAUTH_CLIENT_SECRET": "s3cret-value",
                             "KAFEED_OAUTH_SCOPE": "kafka"})
    conf = s.client_config()
    assert conf["sasl.oauthbearer.method"] == "oidc" and conf["sasl.mechanism"] == "OAUTHBEARER"
    assert conf["sasl.oauthbearer.client.secret"] == "s3cret-value"
    assert conf["sasl.oauthbearer.scope"] == "kafka" and "sasl.password" not in conf
    assert "s3cret-value" not in repr(s) and "s3cret-value" not in str(s.model_dump())
    with pytest.raises(ConfigError, match="oauth_client_secret"):
        load_connection(env={"KAFEED_SECURITY_PROTOCOL": "SASL_SSL", "KAFEED_SASL_MECHANISM": "OAUTHBEARER",
                             "KAFEED_OAUTH_TOKEN_ENDPOINT": "https://idp.example/token",
                             "KAFEED_OAUTH_CLIENT_ID": "kafeed-ingest"})


def test_a_settings_file_that_is_a_directory_or_binary_is_a_config_error(tmp_path: Path) -> None:
    # Through KAFEED_CONFIG, which no option check sees first.
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        load_connection(env={"KAFEED_CONFIG": str(tmp_path)})
    binary = tmp_path / "k.toml"
    binary.write_bytes(b"\x80\xff\x00[connection]")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_connection(env={"KAFEED_CONFIG": str(binary)})


def test_a_ca_file_that_is_missing_or_no_certificate_is_a_config_error(tmp_path: Path) -> None:
    env = {"KAFEED_BOOTSTRAP": "h:9", "KAFEED_SECURITY_PROTOCOL": "SSL"}
    with pytest.raises(ConfigError, match=r"ssl_ca_location: got .*, the CA file does not exist"):
        load_connection(env={**env, "KAFEED_SSL_CA_LOCATION": str(tmp_path / "ca.pem")})
    (tmp_path / "ca.pem").write_bytes(b"\x00\x01 not a certificate")
    with pytest.raises(ConfigError, match="holds no PEM certificate"):
        load_connection(env={**env, "KAFEED_SSL_CA_LOCATION": str(tmp_path / "ca.pem")})
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    assert load_connection(env={**env, "KAFEED_SSL_CA_LOCATION": str(tmp_path / "ca.pem")}).ssl_ca_location
    assert load_connection(env={**env, "KAFEED_SSL_CA_LOCATION": str(tmp_path)}).ssl_ca_location  # a CA dir
