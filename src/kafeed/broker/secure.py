"""Security material of a secured local cluster: CA, node certificates, SCRAM users, client files.

Layout under ``<data dir>/secure/`` (directory 0700, every file 0600)::

    ca.pem, ca.key             the cluster's private certificate authority
    node-N.keystore.p12        node N's key + certificate chain (PKCS#12 keystore)
    node.key-password          the password of those keys (Kafka reads it from server.properties)
    clients/<role>.toml        one client settings file per role: bootstrap, CA, SCRAM user+password

Passwords are random, made once at format time, and only ever travel in files: the
SCRAM credentials reach ``kafka-storage format`` through a Java argument file, never on
a command line that ``ps`` shows.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from kafeed.acl.roles import ROLES
from kafeed.broker.pki import make_ca, make_node_cert, write_private
from kafeed.broker.render import NodeSpec

SCRAM_MECHANISM = "SCRAM-SHA-512"
SUPER_USER = "admin"


@dataclass(frozen=True)
class SecureMaterial:
    """Where a secured cluster's files are; passwords are read from them, never kept in state."""

    root: Path

    @property
    def ca_pem(self) -> Path:
        return self.root / "ca.pem"

    @property
    def key_password_file(self) -> Path:
        return self.root / "node.key-password"

    def keystore(self, node: NodeSpec) -> Path:
        return self.root / f"node-{node.node_id}.keystore.p12"

    def client_file(self, role: str) -> Path:
        return self.root / "clients" / f"{role}.toml"

    def key_password(self) -> str:
        return self.key_password_file.read_text().strip()


def create_material(root: Path, specs: list[NodeSpec],
                    bootstrap: str) -> tuple[SecureMaterial, dict[str, str]]:
    """Make the CA, a certificate per node and a password + client file per role.

    Returns the material and the role passwords (for the format step only).
    """
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    material = SecureMaterial(root)
    ca_pem, ca_key = make_ca(root)
    key_password = secrets.token_hex(16)
    write_private(material.key_password_file, key_password.encode())
    for spec in specs:
        make_node_cert(root, f"node-{spec.node_id}", ca_pem, ca_key, key_password)
    passwords: dict[str, str] = {role: secrets.token_hex(16) for role in ROLES}
    for role, password in passwords.items():
        write_private(material.client_file(role), client_toml(
            bootstrap=bootstrap, user=role, password=password, ca=ca_pem).encode())
    os.chmod(material.client_file(SUPER_USER).parent, 0o700)
    return material, passwords


def client_toml(*, bootstrap: str, user: str, password: str, ca: Path) -> str:
    """A settings file whose ``[connection]`` table reaches the cluster as ``user``."""
    # json.dumps writes a valid TOML basic string for any text.
    return (
        "# kafeed client settings: keep this file private (it holds a password).\n"
        "[connection]\n"
        f"bootstrap = {json.dumps(bootstrap)}\n"
        'security_protocol = "SASL_SSL"\n'
        f'sasl_mechanism = "{SCRAM_MECHANISM}"\n'
        f"sasl_username = {json.dumps(user)}\n"
        f"sasl_password = {json.dumps(password)}\n"
        f"ssl_ca_location = {json.dumps(str(ca))}\n"
    )


def scram_format_args(passwords: dict[str, str]) -> list[str]:
    """``kafka-storage format`` arguments that create one SCRAM user per role."""
    args: list[str] = []
    for user, password in passwords.items():
        args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
    return args


def write_argfile(path: Path, args: list[str]) -> Path:
    """A Java ``@argfile`` (0600) holding ``args``: the JVM reads them, ``ps`` never shows them."""
    def quoted(arg: str) -> str:
        return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'

    write_private(path, ("\n".join(quoted(a) for a in args) + "\n").encode())
    return path
