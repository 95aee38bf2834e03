"""SASL and ACLs on Apache Kafka's own listeners, with properties files as Java users write them
(``sasl.jaas.config``): PLAIN and SCRAM logins, a wrong password, and principals missing one
permission. A refusal is one clear line naming the resource and the permission, exit 255,
nothing committed past it, and no secret in any log line."""

from __future__ import annotations

import signal

import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                   ResourceType)

from .conftest import SASL_USERS
from .harness import Cluster, MirrorProcess, make_records, mirror_args, mirror_files, unique, wait_until

pytestmark = [pytest.mark.needs_kafka_feature("SASL logins and ACLs"),
              pytest.mark.needs_own_brokers("SASL users and ACLs the tests set up")]

JAAS_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def sasl(cluster: Cluster, user: str, mechanism: str = "SCRAM-SHA-256", password: str = None):
    """The cluster's SASL listener as a Java client's properties name it, and the same for the
    tests' own clients."""
    password = SASL_USERS[user] if password is None else password
    java = {"bootstrap.servers": cluster.broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{JAAS_MODULES[mechanism]} required username="{user}" password="{password}";'}
    return java


def sasl_files(tmp_path, source, target, consumer_user="admin", producer_user="admin",
               mechanism="SCRAM-SHA-256", producer_password=None):
    files = mirror_files(tmp_path, source, target,
                         consumer=sasl(source, consumer_user, mechanism),
                         producer=sasl(target, producer_user, mechanism, producer_password))
    return files


def allow(cluster: Cluster, user: str, resource_type, name: str, *operations,
          pattern=ResourcePatternType.LITERAL) -> None:
    bindings = [AclBinding(resource_type, name, pattern, f"User:{user}", "*",
                           operation, AclPermissionType.ALLOW) for operation in operations]
    for future in cluster.admin().create_acls(bindings, request_timeout=30).values():
        future.result()


def reads_as(cluster: Cluster, user: str, password: str, topic: str, group: str,
             mechanism: str = "SCRAM-SHA-256", timeout_s: float = 60.0) -> None:
    """Wait until ``user`` reads ``topic`` in ``group`` over SASL: its credential and ACLs reach the
    broker's authorizer through the metadata log a moment after the controller took them, and a
    mirror started before that sees a different cluster than the test set up."""
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": cluster.broker.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0}

    def one_record() -> bool:
        consumer = Consumer(conf)
        try:
            consumer.subscribe([topic])
            msg = consumer.poll(5)
            return msg is not None and msg.error() is None
        finally:
            consumer.close()

    wait_until(one_record, timeout_s, f"{user} allowed to read {topic} in group {group}")


def assert_no_secret(log: str) -> None:
    for secret in SASL_USERS.values():
        assert secret not in log


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_mirror_over_sasl(tmp_path, source, target, mechanism):
    topic = source.create_topic("sasl", partitions=2)
    records = make_records(300)
    source.seed(topic, records)
    files = sasl_files(tmp_path, source, target, mechanism=mechanism)
    mirror = MirrorProcess(mirror_args(files, topic, "--offset.commit.interval.ms", "300"), tmp_path / "m.log")
    try:
        target.read_values(topic, [r.value for r in records], timeout_s=60)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    assert sum(source.committed(files.group, topic).values()) == 300
    assert_no_secret(mirror.log())


def test_a_wrong_password_names_the_side_and_exits_255(tmp_path, source, target):
    topic = source.create_topic("badpw")
    files = sasl_files(tmp_path, source, target, producer_password="not-the-password")
    mirror = MirrorProcess(mirror_args(files, topic), tmp_path / "m.log")
    assert mirror.wait(60) == 255, mirror.log()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert any("authentication failed with the target cluster" in line for line in errors), errors
    assert "not-the-password" not in mirror.log()
    assert_no_secret(mirror.log())


@pytest.mark.parametrize("writes_elsewhere", [True, False], ids=["write-on-other-topics", "no-write-at-all"])
def test_a_principal_without_write_on_the_target_topic(tmp_path, source, target, writes_elsewhere):
    topic = source.create_topic("nowrite")
    source.seed(topic, make_records(50))
    target.create_topic(name=topic)
    allow(target, "bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE)  # DESCRIBE, not WRITE
    if writes_elsewhere:  # enough for an idempotent producer id (KIP-679), not for this topic
        allow(target, "bob", ResourceType.TOPIC, "bob-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED)
    files = sasl_files(tmp_path, source, target, producer_user="bob")
    mirror = MirrorProcess(mirror_args(files, topic, "--offset.commit.interval.ms", "200"), tmp_path / "m.log")
    assert mirror.wait(60) == 255, mirror.log()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1, errors
    assert "not authorized" in errors[0] and "User:bob" in errors[0], errors
    if writes_elsewhere:
        assert f"needs WRITE on topic {topic}" in errors[0], errors
    else:  # the produce or the producer id request is refused first, whichever librdkafka reports
        assert (f"needs WRITE on topic {topic}" in errors[0]
                or "needs WRITE on the target topics (or IDEMPOTENT_WRITE on the cluster)" in errors[0]), errors
    assert source.committed(files.group, topic) == {}
    assert "Traceback" not in mirror.log()
    assert_no_secret(mirror.log())


def test_a_principal_without_read_on_the_source_group(tmp_path, source, target):
    topic = source.create_topic("noread")
    source.seed(topic, make_records(50))
    group = unique("acl-group")
    allow(source, "alice", ResourceType.TOPIC, topic, AclOperation.READ, AclOperation.DESCRIBE)
    files = sasl_files(tmp_path, source, target, consumer_user="alice")
    files.consumer.write_text(files.consumer.read_text().replace(f"group.id={files.group}", f"group.id={group}"))
    mirror = MirrorProcess(mirror_args(files, topic), tmp_path / "m.log")
    assert mirror.wait(60) == 255, mirror.log()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1, errors
    assert f"User:alice, which needs READ on consumer group {group}" in errors[0], errors
    assert source.committed(group, topic) == {}
    assert "Traceback" not in mirror.log()
    assert_no_secret(mirror.log())


def test_a_principal_that_may_not_create_the_missing_target_topic(tmp_path, source, target):
    topic = source.create_topic("nocreate")
    source.seed(topic, make_records(10))
    allow(target, "bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE, AclOperation.WRITE)
    files = sasl_files(tmp_path, source, target, producer_user="bob")
    mirror = MirrorProcess(mirror_args(files, topic), tmp_path / "m.log")
    assert mirror.wait(60) == 255, mirror.log()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and topic in errors[0] and "cannot be created" in errors[0], errors
    assert not target.topic_exists(topic)
    assert source.committed(files.group, topic) == {}


def test_a_dedicated_flow_s_admin_clients_log_in_as_the_cluster_s_admin_settings_say(tmp_path, source, target):
    """mm2.properties' ``<alias>.admin.*`` (MirrorMaker 2's targetAdminConfig): the target's
    principal may read and write topics but not create them nor alter their configs and ACLs; its
    admin principal does that. Ignored, the flow's topics could not be created."""
    import re

    from .test_dedicated_mode import ours, write_mm2

    allow(target, "alice", ResourceType.TOPIC, "*", AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
    allow(target, "alice", ResourceType.GROUP, "*", AclOperation.READ)
    scratch = target.create_topic(unique("alice-reads"))
    target.seed(scratch, make_records(1))
    reads_as(target, "alice", SASL_USERS["alice"], scratch, unique("alice"), mechanism="PLAIN")
    topic = source.create_topic(unique("admin-login"), partitions=2)
    records = make_records(200)
    source.seed(topic, records)
    plain = JAAS_MODULES["PLAIN"]
    path = write_mm2(tmp_path / "mm2.properties", {"A": source, "B": target}, extra={
        "A->B.enabled": "true", "topics": re.escape(topic), "B.bootstrap.servers": target.broker.sasl_bootstrap,
        "B.security.protocol": "SASL_PLAINTEXT", "B.sasl.mechanism": "PLAIN",
        "B.sasl.jaas.config": f'{plain} required username="alice" password="{SASL_USERS["alice"]}";',
        "B.admin.sasl.jaas.config": f'{plain} required username="admin" password="{SASL_USERS["admin"]}";'})
    mirror = ours(path, tmp_path / "ours.log")
    try:
        target.read_values(f"A.{topic}", [r.value for r in records], timeout_s=120)
        log = mirror.log()
        assert "not authorized" not in log and "AUTHORIZATION" not in log, log[-3000:]
        assert "admin.sasl.jaas.config" not in log  # read, not warned about
    finally:
        assert mirror.stop() == 143, mirror.log()[-3000:]
    assert_no_secret(mirror.log())
