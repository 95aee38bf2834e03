"""Secrets given the ways companies give them, against Apache Kafka's SASL and SSL listeners:
Kafka's config providers (file, env, dir), a JAAS file named by KAFKA_OPTS; and a marker
password given every way never reaches a log line (at DEBUG, librdkafka's debug lines included),
the status line, /metrics or an error line, on success and on failure. OAUTHBEARER's client
secret is in test_oauthbearer.py."""

from __future__ import annotations

import signal
import urllib.request

import jks
import pytest
from confluent_kafka.admin import (AclOperation, ResourcePatternType, ResourceType, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)

from mirror_maker.embedded import free_port

from .harness import MirrorProcess, make_records, mirror_args, mirror_files, unique, wait_until
from .test_security import JAAS_MODULES, allow, reads_as, sasl

pytestmark = [pytest.mark.needs_kafka_feature("SASL logins and TLS listeners"),
              pytest.mark.needs_own_brokers("SASL users and the TLS listener the tests set up")]

MARKER = "Mm-Marker-Pa55-4d1f"
FILE, ENV, DIR = ("org.apache.kafka.common.config.provider." + name
                  for name in ("FileConfigProvider", "EnvVarConfigProvider", "DirectoryConfigProvider"))
PROVIDERS = {"config.providers": "file,env,dir", "config.providers.file.class": FILE,
             "config.providers.env.class": ENV, "config.providers.dir.class": DIR}


def jaas_file(tmp_path, user: str, password: str, module: str = JAAS_MODULES["SCRAM-SHA-256"]):
    path = tmp_path / "kafka_client_jaas.conf"
    path.write_text(f'KafkaClient {{\n  {module} required\n  username="{user}"\n  password="{password}";\n}};\n')
    return {"KAFKA_OPTS": f"-Xmx1g -Djava.security.auth.login.config={path}"}


def no_marker(*texts: str) -> None:
    for text in texts:
        assert MARKER.lower() not in text.lower()


def test_config_providers_and_a_kafka_opts_jaas_file_log_in(tmp_path, source, target):
    topic = source.create_topic("providers", partitions=2)
    records = make_records(200)
    source.seed(topic, records)
    (tmp_path / "secrets.properties").write_text("user=admin\n")
    (tmp_path / "volume").mkdir()
    (tmp_path / "volume" / "password").write_text("admin-secret")  # a mounted Kubernetes secret
    consumer = {**sasl(source, "admin"), **PROVIDERS, "sasl.mechanism": "${env:MM_TEST_MECHANISM}",
                "config.providers.dir.param.allowed.paths": str(tmp_path / "volume"),
                "sasl.jaas.config": f'{JAAS_MODULES["SCRAM-SHA-256"]} required '
                                    f'username="${{file:{tmp_path}/secrets.properties:user}}" '
                                    f'password="${{dir:{tmp_path}/volume:password}}";'}
    producer = {key: value for key, value in sasl(target, "admin").items() if key != "sasl.jaas.config"}
    files = mirror_files(tmp_path, source, target, consumer=consumer, producer=producer)
    env = {"MM_TEST_MECHANISM": "SCRAM-SHA-256", **jaas_file(tmp_path, "admin", "admin-secret")}
    mirror = MirrorProcess(mirror_args(files, topic, "--offset.commit.interval.ms", "300"), tmp_path / "m.log",
                           env=env)
    try:
        target.read_values(topic, [r.value for r in records], timeout_s=60)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    assert sum(source.committed(files.group, topic).values()) == 200
    assert "logging in with the KafkaClient section of" in mirror.log()
    assert "admin-secret" not in mirror.log()


def _marker_user(cluster, user: str) -> None:
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          MARKER.encode())
    for future in cluster.admin().alter_user_scram_credentials([upsert]).values():
        future.result()


def _marker_stores(tmp_path, tls):
    """The session's client stores again, with the marker as store and key password."""
    trust = jks.KeyStore.load(str(tls.truststore_jks), tls.store_password)
    trust.save(str(tmp_path / "trust.jks"), MARKER)
    keys = jks.KeyStore.load(str(tls.keystore_jks), tls.store_password)
    for entry in keys.private_keys.values():
        entry.decrypt(tls.key_password)
        entry.encrypt(MARKER)
    keys.save(str(tmp_path / "keys.jks"), MARKER)
    return tmp_path / "trust.jks", tmp_path / "keys.jks"


def test_a_marker_password_given_every_way_is_never_shown(tmp_path, source, target):
    user = unique("marker")
    _marker_user(source, user)
    topic = source.create_topic(f"{user}-t", partitions=2)
    allow(source, user, ResourceType.TOPIC, user, AclOperation.READ, AclOperation.DESCRIBE,
          pattern=ResourcePatternType.PREFIXED)
    allow(source, user, ResourceType.GROUP, user, AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    records = make_records(100)
    source.seed(topic, records)
    trust, keys = _marker_stores(tmp_path, target.tls)
    (tmp_path / "secrets.properties").write_text(f"store={MARKER}\n")
    consumer = {**sasl(source, user, password=MARKER), "ssl.key.password": MARKER}
    producer = {"bootstrap.servers": target.broker.ssl_bootstrap, "security.protocol": "SSL", **PROVIDERS,
                "ssl.truststore.location": trust, "ssl.truststore.password": "${env:MM_TEST_STORE_PASSWORD}",
                "ssl.keystore.location": keys, "ssl.keystore.password": f"${{file:{tmp_path}/secrets.properties:store}}",
                "ssl.key.password": MARKER, "ssl.endpoint.identification.algorithm": ""}
    files = mirror_files(tmp_path, source, target, group=f"{user}-group", consumer=consumer, producer=producer)
    port = free_port()
    mirror = MirrorProcess(mirror_args(files, topic, "--log.level", "DEBUG", "--metrics.port", str(port),
                                       "--status.interval.ms", "1000", "--offset.commit.interval.ms", "300"),
                           tmp_path / "m.log", env={"MM_TEST_STORE_PASSWORD": MARKER})
    try:
        target.read_values(topic, [r.value for r in records], timeout_s=60)
        mirror.wait_for_log("Status:", 15)
        metrics = wait_until(lambda: _scrape(port), 15, "/metrics")
        assert "mirrormaker_record_count_total" in metrics
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    no_marker(mirror.log(), metrics)


def _scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            return answer.read().decode()
    except OSError:
        return ""


def test_a_refused_marker_password_from_a_jaas_file_with_librdkafka_debugging(tmp_path, source, target):
    producer = {key: value for key, value in sasl(target, "admin").items() if key != "sasl.jaas.config"}
    producer["debug"] = "security,broker,conf"  # librdkafka's own debug lines, at --log.level DEBUG
    files = mirror_files(tmp_path, source, target, producer=producer)
    mirror = MirrorProcess(mirror_args(files, source.create_topic("refused"), "--log.level", "DEBUG"),
                           tmp_path / "m.log", env=jaas_file(tmp_path, "admin", MARKER))
    try:
        assert mirror.wait(60) == 255, mirror.log()
    finally:
        mirror.kill()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert any("authentication failed with the target cluster" in line for line in errors), errors
    assert "librdkafka" in mirror.log() and "Traceback" not in mirror.log()
    no_marker(mirror.log())


def test_a_wrong_store_password_from_a_directory_provider(tmp_path, source, target):
    (tmp_path / "volume").mkdir()
    (tmp_path / "volume" / "truststore-password").write_text(MARKER)
    producer = {"bootstrap.servers": target.broker.ssl_bootstrap, "security.protocol": "SSL", **PROVIDERS,
                "ssl.truststore.location": target.tls.truststore_jks,
                "ssl.truststore.password": f"${{dir:{tmp_path}/volume:truststore-password}}"}
    files = mirror_files(tmp_path, source, target, producer=producer)
    mirror = MirrorProcess(mirror_args(files, "t", "--log.level", "DEBUG"), tmp_path / "m.log")
    assert mirror.wait(30) == 1, mirror.log()
    assert "wrong password" in mirror.log() and "Traceback" not in mirror.log()
    no_marker(mirror.log())


def test_a_marker_password_in_an_mm2_properties_file_is_never_shown(tmp_path, source, target):
    """The dedicated mode: the source's SASL password as a value and through the env provider, a
    store password through the file provider, at DEBUG, in the log, the status lines and /metrics."""
    import sys

    from .test_dedicated_mode import BIN

    user = unique("marker-mm2")
    _marker_user(source, user)
    topic = source.create_topic(f"{user}-t", partitions=2)
    allow(source, user, ResourceType.TOPIC, user, AclOperation.READ, AclOperation.DESCRIBE,
          pattern=ResourcePatternType.PREFIXED)
    allow(source, user, ResourceType.GROUP, "mm2-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    # Its own topics only: a heartbeats topic another test left on the session's source would be
    # mirrored too (MirrorMaker 2 mirrors them whatever topics says), and this user cannot read it.
    allow(source, user, ResourceType.TOPIC, user, AclOperation.DESCRIBE_CONFIGS, pattern=ResourcePatternType.PREFIXED)
    records = make_records(100)
    source.seed(topic, records)
    reads_as(source, user, MARKER, topic, unique("mm2-probe"))
    (tmp_path / "secrets.properties").write_text(f"store={MARKER}\n")
    props = {**PROVIDERS, "clusters": "A, B", "A->B.enabled": "true", "A->B.topics": topic,
             "emit.heartbeats.enabled": "false", "emit.offset-syncs.enabled": "false",
             "sync.topic.acls.enabled": "false", "sync.topic.configs.enabled": "false",
             "B.bootstrap.servers": target.bootstrap, "replication.factor": 1, "offset-syncs.topic.replication.factor": 1,
             "metrics.port": free_port(), "status.interval.ms": 1000}
    props.update({f"A.{key}": value for key, value in sasl(source, user, password=MARKER).items()})
    props["A.sasl.jaas.config"] = props["A.sasl.jaas.config"].replace(MARKER, "${env:MM_TEST_SASL_PASSWORD}")
    props["A.ssl.key.password"] = f"${{file:{tmp_path}/secrets.properties:store}}"
    props["A.consumer.debug"] = "security,conf"  # librdkafka's own lines with the settings, at DEBUG
    path = tmp_path / "mm2.properties"
    path.write_text("".join(f"{key} = {value}\n" for key, value in props.items()))
    mirror = MirrorProcess([], tmp_path / "m.log", command=[sys.executable, str(BIN), str(path), "--log.level", "DEBUG"],
                           env={"MM_TEST_SASL_PASSWORD": MARKER})
    try:
        target.read_values(f"A.{topic}", [r.value for r in records], timeout_s=60,
                           evidence=lambda: "\n".join(line for line in mirror.log().splitlines()
                                                     if " DEBUG " not in line and "INFO Status" not in line))
        mirror.wait_for_log("Status A->B:", 15)
        metrics = wait_until(lambda: _scrape(props["metrics.port"]), 15, "/metrics")
        assert "kafka_connect_mirror_mirrorsourceconnector_record_count" in metrics
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    no_marker(mirror.log(), metrics)
