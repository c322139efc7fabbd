"""Security material of a secured local cluster: private files, certificates, configs, no secret in argv."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from kafeed.broker.options import ClusterOptions
from kafeed.broker.render import NodeTls, node_specs, server_properties
from kafeed.broker.secure import create_material, scram_format_args, write_argfile
from kafeed.config import load_connection
from kafeed.errors import ConfigError


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_material_is_private_signed_by_its_ca_and_names_every_role(tmp_path: Path) -> None:
    specs = node_specs(tmp_path, 3, 20000, secure=True)
    material, passwords = create_material(tmp_path / "secure", specs, "127.0.0.1:20000")
    assert stat.S_IMODE(material.root.stat().st_mode) == 0o700
    files = [p for p in material.root.rglob("*") if p.is_file()]
    assert len(files) == 3 + 3 + 7  # ca.pem, ca.key, key password; 3 keystores; 7 roles
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    ca = x509.load_pem_x509_certificate(material.ca_pem.read_bytes())
    key, cert, _chain = pkcs12.load_key_and_certificates(material.keystore(specs[1]).read_bytes(),
                                                        material.key_password().encode())
    assert key is not None and cert is not None
    cert.verify_directly_issued_by(ca)
    assert cert.subject.rfc4514_string() == "CN=kafeed-node"
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert len(set(passwords.values())) == 7
    settings = load_connection(config_file=material.client_file("ingest"), env={})
    assert (settings.security_protocol, settings.sasl_mechanism, settings.sasl_username) == (
        "SASL_SSL", "SCRAM-SHA-512", "ingest")
    assert settings.sasl_password is not None
    assert settings.sasl_password.get_secret_value() == passwords["ingest"]
    assert passwords["ingest"] not in repr(settings)
    assert tomllib.loads(material.client_file("admin").read_text())["connection"]["ssl_ca_location"] == str(
        material.ca_pem)


def test_secure_properties_deny_by_default_and_use_tls_between_nodes(tmp_path: Path) -> None:
    specs = node_specs(tmp_path, 3, 30000, secure=True)
    assert [(s.port, s.controller_port, s.internal_port) for s in specs] == [
        (30000, 30001, 30006), (30002, 30003, 30007), (30004, 30005, 30008)]
    tls = NodeTls(keystore=tmp_path / "k.p12", truststore=tmp_path / "ca.pem", key_password="pw")
    props = _props(server_properties(specs[0], specs, tls=tls))
    assert props["listeners"].startswith("SASL_SSL://127.0.0.1:30000,INTERNAL://127.0.0.1:30006")
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,INTERNAL:SSL,CONTROLLER:SSL"
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["authorizer.class.name"].endswith("StandardAuthorizer")
    assert props["super.users"] == "User:admin;User:CN=kafeed-node"
    assert props["listener.name.internal.ssl.client.auth"] == "required"
    plain = _props(server_properties(specs[0], node_specs(tmp_path, 3, 30000)))
    assert plain["listeners"].startswith("PLAINTEXT://") and "super.users" not in plain


def test_scram_passwords_travel_in_a_private_argfile(tmp_path: Path) -> None:
    args = ["-cp", "a b.jar", *scram_format_args({"admin": "s3cr3t"})]
    path = write_argfile(tmp_path / "format.args", args)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().splitlines() == [
        '"-cp"', '"a b.jar"', '"--add-scram"', '"SCRAM-SHA-512=[name=admin,password=s3cr3t]"']


def test_secure_port_block_must_fit() -> None:
    assert ClusterOptions(nodes=3, secure=True, port=65535 - 8).port == 65527
    with pytest.raises(ValueError, match="at most 65527"):
        ClusterOptions(nodes=3, secure=True, port=65530)


def test_plaintext_cluster_has_no_role_files(tmp_path: Path) -> None:
    from kafeed.broker import LocalCluster

    with pytest.raises(ConfigError, match="plaintext cluster"):
        LocalCluster(tmp_path).client_file("ingest")
