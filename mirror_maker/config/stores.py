"""Java key and trust stores (JKS, PKCS12) turned into the PEM files librdkafka reads.

Java users point ``ssl.truststore.location``/``ssl.keystore.location`` at JKS or PKCS12 files.
librdkafka reads PEM (and PKCS12 keystores, which are passed through). Converted files go into a
private folder (0700) as 0600 files, removed at exit; a private key stays encrypted with the key
password. No password ever appears in an error message.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import List, Optional, Tuple

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from ..errors import ConfigError
from ..extras import require

_private_dir: Optional[str] = None


def _workdir() -> str:
    global _private_dir
    if _private_dir is None:
        _private_dir = tempfile.mkdtemp(prefix="kafka-mirror-maker-ssl-")  # mode 0700
        atexit.register(shutil.rmtree, _private_dir, True)
    return _private_dir


def _write_private(name: str, data: bytes) -> str:
    path = os.path.join(_workdir(), name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {path}: {exc.strerror}") from None


def _pem_certs(ders: List[bytes]) -> bytes:
    return b"".join(x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)
                    for der in ders)


def _load_jks(path: str, password: Optional[str], what: str):
    jks = require("jks", "jks", f"{what}: a JKS store")
    data = _read(path, what)
    try:
        return jks.KeyStore.loads(data, password or "", try_decrypt_keys=False)
    except jks.util.KeystoreSignatureException:
        raise ConfigError(f"{what}: wrong password for {path} (the store's integrity check failed)") from None
    except Exception as exc:
        raise ConfigError(f"{what}: {path} is not a readable JKS store: {type(exc).__name__}") from None


def _load_pkcs12(path: str, password: Optional[str], what: str):
    data = _read(path, what)
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise ConfigError(f"{what}: {path} is not a PKCS12 store, or the password is wrong") from None


def truststore_to_pem(path: str, store_type: str, password: Optional[str], tag: str) -> str:
    """The CA certificates of a JKS or PKCS12 truststore, as a PEM file path."""
    what = "ssl.truststore.location"
    if store_type == "JKS":
        store = _load_jks(path, password, what)
        ders = [entry.cert for entry in store.certs.values()]
        ders += [cert[1] for entry in store.private_keys.values() for cert in entry.cert_chain[:1]]
    elif store_type == "PKCS12":
        bundle = _load_pkcs12(path, password, what)
        certs = [c.certificate for c in bundle.additional_certs]
        if bundle.cert is not None:
            certs.append(bundle.cert.certificate)
        ders = [c.public_bytes(serialization.Encoding.DER) for c in certs]
    else:
        raise ConfigError(f"ssl.truststore.type={store_type} is not supported (JKS, PKCS12 or PEM)")
    if not ders:
        raise ConfigError(f"{what}: {path} holds no certificates")
    return _write_private(f"{tag}-truststore.pem", _pem_certs(ders))


def jks_keystore_to_pem(path: str, password: Optional[str], key_password: Optional[str],
                        tag: str) -> Tuple[str, str, str]:
    """A JKS keystore's private key (kept encrypted) and certificate chain as PEM files.

    Returns (certificate path, key path, the password the key file is encrypted with).
    """
    what = "ssl.keystore.location"
    store = _load_jks(path, password, what)
    if len(store.private_keys) != 1:
        raise ConfigError(f"{what}: {path} must hold exactly one private key entry, "
                          f"it holds {len(store.private_keys)}")
    entry = next(iter(store.private_keys.values()))
    secret = key_password or password or ""
    try:
        entry.decrypt(secret)
    except Exception:
        raise ConfigError(f"{what}: cannot decrypt the private key in {path} "
                          "(check ssl.key.password)") from None
    key = serialization.load_der_private_key(entry.pkey_pkcs8, password=None)
    encryption = (serialization.BestAvailableEncryption(secret.encode()) if secret
                  else serialization.NoEncryption())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                encryption)
    cert_path = _write_private(f"{tag}-certificate.pem", _pem_certs([c[1] for c in entry.cert_chain]))
    key_path = _write_private(f"{tag}-key.pem", key_pem)
    return cert_path, key_path, secret
