"""TLS material made in the tests (cryptography + pyjks): a CA, a server certificate for
127.0.0.1, and a client's JKS trust and key stores, as a Java user would have them."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import jks
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject_key, subject: str, issuer_key, issuer: str, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(subject_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _der(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def _pem(obj) -> bytes:
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass
class TlsFiles:
    ca_pem: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    truststore_jks: Path
    keystore_jks: Path
    store_password: str
    key_password: str
    #: A broker's own JKS stores: its key and certificate, and the CA that signs client certificates.
    server_keystore_jks: Path = None
    server_truststore_jks: Path = None


def make_tls_files(folder: Path, store_password: str = "store-secret",
                   key_password: str = "key-secret") -> TlsFiles:
    """A CA, a server certificate for 127.0.0.1, and a client's JKS trust and key stores."""
    ca_key = _key()
    ca = _cert(ca_key, "test-ca", ca_key, "test-ca", ca=True)
    server_key = _key()
    server = _cert(server_key, "localhost", ca_key, "test-ca", ca=False)
    client_key = _key()
    client = _cert(client_key, "mirror-client", ca_key, "test-ca", ca=False)
    files = TlsFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key",
                     folder / "client.pem", folder / "client.key", folder / "client.truststore.jks",
                     folder / "client.keystore.jks", store_password, key_password,
                     folder / "server.keystore.jks", folder / "server.truststore.jks")
    files.ca_pem.write_bytes(_pem(ca))
    files.server_cert.write_bytes(_pem(server))
    files.server_key.write_bytes(_pem(server_key))
    files.client_cert.write_bytes(_pem(client))
    files.client_key.write_bytes(_pem(client_key))
    for truststore in (files.truststore_jks, files.server_truststore_jks):
        jks.KeyStore.new("jks", [jks.TrustedCertEntry.new("ca", _der(ca))]).save(str(truststore), store_password)
    for alias, key, cert, path in (("client", client_key, client, files.keystore_jks),
                                   ("server", server_key, server, files.server_keystore_jks)):
        pkcs8 = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
        entry = jks.PrivateKeyEntry.new(alias, [_der(cert), _der(ca)], pkcs8)
        entry.encrypt(key_password)
        jks.KeyStore.new("jks", [entry]).save(str(path), store_password)
    return files


def pem_client_conf(files: TlsFiles) -> dict:
    """librdkafka settings for a client of the TLS front (used by the readiness check)."""
    return {"security.protocol": "SSL", "ssl.ca.location": str(files.ca_pem),
            "ssl.certificate.location": str(files.client_cert),
            "ssl.key.location": str(files.client_key)}
