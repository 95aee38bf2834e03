"""A real TLS mirror: Java-style properties files pointing at JKS stores made in the test."""

import signal

import pytest

from ..tls_material import make_tls_files
from .harness import Cluster, MirrorProcess, make_records, mirror_args, mirror_files
from .tls import tls_target as reach_over_tls

pytestmark = pytest.mark.smoke


@pytest.mark.needs_own_brokers("a TLS listener with the test's certificates")
def test_mirror_to_a_tls_target_with_jks_stores(tmp_path, source, target):
    with reach_over_tls(tmp_path, target) as (tls_target, tls, front):
        topic = source.create_topic("tls", partitions=2)
        source.seed(topic, make_records(300))
        files = mirror_files(tmp_path, source, tls_target, producer={
            "security.protocol": "SSL",
            "ssl.truststore.location": tls.truststore_jks,
            "ssl.truststore.password": tls.store_password,
            "ssl.keystore.location": tls.keystore_jks,
            "ssl.keystore.password": tls.store_password,
            "ssl.key.password": tls.key_password,
            "ssl.endpoint.identification.algorithm": "https",
        })
        mirror = MirrorProcess(mirror_args(files, topic), tmp_path / "m.log")
        try:
            rows = tls_target.read_all(topic, expected=300, timeout_s=60)
            assert len(rows) == 300
        finally:
            assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
        if front is not None:  # Tansu: the records went through the front, certificate checked
            assert front.handshakes > 0
    log = mirror.log()
    assert "SSL handshake failed" not in log
    for secret in (tls.store_password, tls.key_password):
        assert secret not in log


def test_wrong_truststore_password_is_a_clear_startup_error(tmp_path, source):
    tls = make_tls_files(tmp_path)
    files = mirror_files(tmp_path, source, Cluster("tls", "127.0.0.1:1"), producer={
        "security.protocol": "SSL", "ssl.truststore.location": tls.truststore_jks,
        "ssl.truststore.password": "not-the-password"})
    mirror = MirrorProcess(mirror_args(files, "t"), tmp_path / "m.log")
    assert mirror.wait(30) == 1
    assert "wrong password" in mirror.log() and "not-the-password" not in mirror.log()
    assert "Traceback" not in mirror.log()
