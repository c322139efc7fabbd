"""A private certificate authority and per-node certificates for a secured local cluster.

Everything is written 0600 (keys, certificates, the PEM bundles Kafka reads) under the
cluster's ``secure/`` directory. Node certificates are valid for ``127.0.0.1`` and
``localhost`` and carry the subject ``CN=kafeed-node``: nodes authenticate to each other
(inter-broker and controller listeners) with them, as the super user ``User:CN=kafeed-node``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NODE_SUBJECT = "CN=kafeed-node"
_VALID_DAYS = 825


def require_cryptography() -> None:
    """Fail with one sentence when the ``secure`` extra is not installed."""
    try:
        import cryptography  # noqa: F401
    except ImportError:
        from kafeed.errors import ConfigError

        raise ConfigError("A secured cluster needs the cryptography package, which is not installed.",
                          hint="Install kafeed[secure].") from None


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only, never briefly wider."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


@dataclass(frozen=True)
class NodeCert:
    """A node's key and certificate chain in one PKCS#12 file, protected by ``key_password``."""

    keystore: Path
    key_password: str


def _name(common_name: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def make_ca(directory: Path, common_name: str = "kafeed local CA") -> tuple[Path, Path]:
    """A self-signed CA: ``(ca.pem, ca.key)`` in ``directory``."""
    require_cryptography()
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name)).issuer_name(_name(common_name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    ca_pem, ca_key = directory / "ca.pem", directory / "ca.key"
    write_private(ca_pem, cert.public_bytes(serialization.Encoding.PEM))
    write_private(ca_key, key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return ca_pem, ca_key


def make_node_cert(directory: Path, name: str, ca_pem: Path, ca_key: Path, key_password: str) -> NodeCert:
    """A server+client certificate for one node, signed by the CA, in a PKCS#12 keystore."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_cert = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    signer = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(NODE_SUBJECT.removeprefix("CN="))).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                              ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(signer, hashes.SHA256())  # type: ignore[arg-type]
    )
    # PKCS#12: the JVM cannot read a PBES2-encrypted PEM key, but reads this keystore.
    keystore = directory / f"{name}.keystore.p12"
    write_private(keystore, pkcs12.serialize_key_and_certificates(
        name.encode(), key, cert, [ca_cert], serialization.BestAvailableEncryption(key_password.encode())))
    return NodeCert(keystore=keystore, key_password=key_password)
