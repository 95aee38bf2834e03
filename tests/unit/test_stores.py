"""Java key/trust stores converted to private PEM files for librdkafka."""

import os
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

from mirror_maker.config import stores
from mirror_maker.config.client_conf import build_producer_conf
from mirror_maker.errors import ConfigError

from ..tls_material import make_tls_files


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def private(path):
    mode = stat.S_IMODE(os.stat(path).st_mode)
    folder = stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)
    return mode == 0o600 and folder == 0o700


def test_jks_truststore_becomes_a_private_pem(tls):
    path = stores.truststore_to_pem(str(tls.truststore_jks), "JKS", tls.store_password, "t1")
    assert private(path)
    (cert,) = x509.load_pem_x509_certificates(read(path))
    assert cert.subject.rfc4514_string() == "CN=test-ca"


def test_pkcs12_truststore(tls, tmp_path):
    ca = x509.load_pem_x509_certificate(tls.ca_pem.read_bytes())
    p12 = tmp_path / "trust.p12"
    p12.write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca],
                                                           BestAvailableEncryption(b"pw")))
    path = stores.truststore_to_pem(str(p12), "PKCS12", "pw", "t2")
    assert b"BEGIN CERTIFICATE" in read(path)


def test_jks_keystore_key_stays_encrypted(tls):
    cert, key, secret = stores.jks_keystore_to_pem(str(tls.keystore_jks), tls.store_password,
                                                   tls.key_password, "k1")
    assert private(cert) and private(key) and secret == tls.key_password
    assert b"ENCRYPTED PRIVATE KEY" in read(key)
    assert read(cert).count(b"BEGIN CERTIFICATE") == 2  # client + CA chain


def test_producer_properties_with_jks_stores(tls):
    conf, _ = build_producer_conf({
        "bootstrap.servers": "h:1", "security.protocol": "SSL",
        "ssl.truststore.location": str(tls.truststore_jks), "ssl.truststore.password": tls.store_password,
        "ssl.keystore.location": str(tls.keystore_jks), "ssl.keystore.password": tls.store_password,
        "ssl.key.password": tls.key_password}, "p")
    assert conf["ssl.ca.location"].endswith("producer-truststore.pem")
    assert conf["ssl.key.location"].endswith("producer-key.pem")
    assert conf["ssl.key.password"] == tls.key_password


@pytest.mark.parametrize("call", [
    lambda t: stores.truststore_to_pem(str(t.truststore_jks), "JKS", "wrong-pass-123", "x"),
    lambda t: stores.jks_keystore_to_pem(str(t.keystore_jks), t.store_password, "wrong-pass-123", "x"),
    lambda t: stores.truststore_to_pem(str(t.ca_pem), "PKCS12", "wrong-pass-123", "x"),
])
def test_errors_are_clear_and_never_show_the_password(tls, call):
    with pytest.raises(ConfigError) as info:
        call(tls)
    assert "wrong-pass-123" not in str(info.value)
