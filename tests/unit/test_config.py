"""Java-to-librdkafka translation, MirrorMaker's forced and default settings, and logged overrides."""

import logging
from pathlib import Path

import pytest

from mirror_maker.config.client_conf import (
    MAX_DELIVERY_TIMEOUT_MS,
    PRODUCER_DEFAULTS,
    _resolve_ssl,
    build_consumer_conf,
    build_producer_conf,
)
from mirror_maker.config.mirror_config import build_config
from mirror_maker.config.translate import CONSUMER, PRODUCER, parse_jaas, translate
from mirror_maker.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
C = {"bootstrap.servers": "h:1", "group.id": "g"}
P = {"bootstrap.servers": "h:2"}


def warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_no_data_loss_defaults():
    consumer, _ = build_consumer_conf(dict(C), "c")
    producer, _ = build_producer_conf(dict(P), "p")
    assert consumer["enable.auto.commit"] == "false"
    assert producer["acks"] == "all"
    assert producer["enable.idempotence"] == "true"
    assert producer["max.in.flight.requests.per.connection"] == "5"  # ordered: idempotence
    assert producer["delivery.report.only.error"] is True
    assert consumer["fetch.queue.backoff.ms"] == "10"
    assert producer["message.timeout.ms"] == str(MAX_DELIVERY_TIMEOUT_MS)
    assert producer["partitioner"] == "murmur2_random"


def test_defaults_are_silent(caplog):
    build_producer_conf(dict(P), "p")
    build_consumer_conf(dict(C), "c")
    assert warnings(caplog) == []


@pytest.mark.parametrize("key,value,risk", [
    ("acks", "1", "data loss"),
    ("enable.idempotence", "false", "duplicates"),
    ("delivery.timeout.ms", "30000", "send failure"),
])
def test_weakening_producer_overrides_warn_once(caplog, key, value, risk):
    conf, _ = build_producer_conf({**P, key: value}, "p")
    relevant = [w for w in warnings(caplog) if risk in w]
    assert len(relevant) == 1


def test_acks_1_turns_implicit_idempotence_off_as_java_does():
    conf, _ = build_producer_conf({**P, "acks": "1"}, "p")
    assert conf["enable.idempotence"] == "false"
    assert conf["max.in.flight.requests.per.connection"] == "1"  # MirrorMaker's rule without idempotence


def test_several_requests_in_flight_warn_only_without_idempotence(caplog):
    build_producer_conf({**P, "max.in.flight.requests.per.connection": "5"}, "p")
    assert not [w for w in warnings(caplog) if "reordering" in w]  # the idempotent producer keeps order
    build_producer_conf({**P, "enable.idempotence": "false", "max.in.flight.requests.per.connection": "5"}, "p")
    assert len([w for w in warnings(caplog) if "reordering is possible" in w]) == 1


def test_auto_commit_override_warns(caplog):
    build_consumer_conf({**C, "enable.auto.commit": "true"}, "c")
    assert any("data loss" in w for w in warnings(caplog))


def test_client_id_is_forced_per_thread(caplog):
    caplog.set_level(logging.INFO)
    consumer, _ = build_consumer_conf({**C, "client.id": "mine"}, "c")
    assert "client.id" not in consumer


def test_missing_group_id_is_clear():
    with pytest.raises(ConfigError, match="group.id is missing"):
        build_consumer_conf({"bootstrap.servers": "h:1"}, "--consumer.config c")


def test_missing_bootstrap_is_clear():
    with pytest.raises(ConfigError, match="bootstrap.servers is missing"):
        build_producer_conf({}, "--producer.config p")


@pytest.mark.parametrize("java,librdkafka", [
    ("org.apache.kafka.clients.consumer.RangeAssignor", "range"),
    ("org.apache.kafka.clients.consumer.RoundRobinAssignor", "roundrobin"),
    ("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", "cooperative-sticky"),
    ("org.apache.kafka.clients.consumer.RangeAssignor, org.apache.kafka.clients.consumer.RoundRobinAssignor",
     "range,roundrobin"),
    ("org.apache.kafka.clients.consumer.RangeAssignor,org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
     "range"),
    ("range", "range"),
])
def test_assignors(java, librdkafka):
    assert translate({"partition.assignment.strategy": java}, "consumer").conf[
        "partition.assignment.strategy"] == librdkafka


def test_unknown_assignor_is_an_error():
    with pytest.raises(ConfigError, match="unknown assignor"):
        translate({"partition.assignment.strategy": "com.acme.MyAssignor"}, "consumer")


@pytest.mark.parametrize("role,key,value,expected", [
    ("consumer", "fetch.max.wait.ms", "100", ("fetch.wait.max.ms", "100")),
    ("consumer", "receive.buffer.bytes", "65536", ("socket.receive.buffer.bytes", "65536")),
    ("consumer", "metadata.max.age.ms", "2000", ("topic.metadata.refresh.interval.ms", "2000")),
    ("producer", "metadata.max.age.ms", "86400000", ("topic.metadata.refresh.interval.ms", "3600000")),
    ("consumer", "auto.offset.reset", "none", ("auto.offset.reset", "error")),
    ("consumer", "auto.offset.reset", "EARLIEST", ("auto.offset.reset", "earliest")),
    ("producer", "buffer.memory", "33554432", ("queue.buffering.max.kbytes", "32768")),
    ("producer", "max.request.size", "2000000", ("message.max.bytes", "2000000")),
    ("producer", "delivery.timeout.ms", "120000", ("message.timeout.ms", "120000")),
    ("producer", "sasl.mechanism", "SCRAM-SHA-512", ("sasl.mechanisms", "SCRAM-SHA-512")),
    ("producer", "ssl.endpoint.identification.algorithm", "", ("ssl.endpoint.identification.algorithm", "none")),
    ("producer", "ssl.endpoint.identification.algorithm", "HTTPS", ("ssl.endpoint.identification.algorithm", "https")),
    ("producer", "compression.type", "lz4", ("compression.type", "lz4")),
    ("producer", "linger.ms", "5", ("linger.ms", "5")),
    ("producer", "batch.size", "16384", ("batch.size", "16384")),
    ("producer", "retries", "10", ("retries", "10")),
    ("consumer", "isolation.level", "read_committed", ("isolation.level", "read_committed")),
    ("consumer", "queued.min.messages", "1000000", ("queued.min.messages", "1000000")),
])
def test_translation_rows(role, key, value, expected):
    assert translate({key: value}, role).conf[expected[0]] == expected[1]


@pytest.mark.parametrize("role,key", [
    ("consumer", "key.deserializer"), ("consumer", "value.deserializer"),
    ("producer", "key.serializer"), ("producer", "value.serializer"),
    ("consumer", "default.api.timeout.ms"), ("producer", "ssl.enabled.protocols"),
])
def test_ignored_keys_get_an_info_line(role, key):
    out = translate({key: "x"}, role)
    assert key not in out.conf and out.notes[0][0] == logging.INFO


@pytest.mark.parametrize("role,key", [
    ("consumer", "interceptor.classes"), ("producer", "interceptor.classes"),
    ("producer", "partitioner.class"),
])
def test_unsupported_keys_get_a_warning(role, key):
    out = translate({key: "x"}, role)
    assert key not in out.conf and out.notes[0][0] == logging.WARNING


def test_engine_settings():
    config_consumer = translate({"max.poll.records": "42", "exclude.internal.topics": "false"}, "consumer")
    assert config_consumer.engine == {"max.poll.records": "42", "exclude.internal.topics": "false"}
    assert translate({"producer.type": "sync", "max.block.ms": "5"}, "producer").engine == {
        "producer.type": "sync", "max.block.ms": "5"}


def test_unknown_key_is_dropped_with_a_warning_not_a_crash(caplog):
    conf, _ = build_consumer_conf({**C, "no.such.setting": "1"}, "c")
    assert "no.such.setting" not in conf
    assert any("no.such.setting" in w for w in warnings(caplog))


def test_invalid_value_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match="acks"):
        build_producer_conf({**P, "acks": "banana"}, "p")


@pytest.mark.parametrize("jaas,expected", [
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p w";',
     ("plain", {"username": "u", "password": "p w"})),
    ("org.apache.kafka.common.security.scram.ScramLoginModule required username=u password=p;",
     ("scram", {"username": "u", "password": "p"})),
    ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k.tab" principal="m@R";',
     ("kerberos", {"useKeyTab": "true", "keyTab": "/k.tab", "principal": "m@R"})),
])
def test_jaas(jaas, expected):
    assert parse_jaas(jaas) == expected


def test_jaas_to_librdkafka():
    out = translate({"sasl.jaas.config": 'x.PlainLoginModule required username="u" password="s";'}, "producer")
    assert (out.conf["sasl.username"], out.conf["sasl.password"]) == ("u", "s")
    krb = translate({"sasl.jaas.config": 'x.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="p@R";'},
                    "producer")
    assert (krb.conf["sasl.kerberos.keytab"], krb.conf["sasl.kerberos.principal"]) == ("/k", "p@R")


def test_unsupported_login_module_is_clear_and_hides_the_password():
    with pytest.raises(ConfigError) as info:
        translate({"sasl.jaas.config": 'com.acme.OAuthModule required password="hunter2";'}, "producer")
    assert "not supported" in str(info.value) and "hunter2" not in str(info.value)


def test_invalid_secret_value_is_not_echoed():
    with pytest.raises(ConfigError) as info:
        build_producer_conf({**P, "sasl.mechanism": "PLAIN", "sasl.password": "hunter2",
                             "sasl.oauthbearer.method": "nonsense-secret"}, "p")
    assert "hunter2" not in str(info.value)


def test_pem_truststore_and_pkcs12_keystore():
    out = translate({**P, "security.protocol": "SSL", "ssl.truststore.type": "PEM",
                     "ssl.truststore.location": "/ca.pem", "ssl.keystore.type": "PKCS12",
                     "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw"}, "producer")
    _resolve_ssl(out, "p", "unit")
    assert out.conf["ssl.ca.location"] == "/ca.pem"
    assert (out.conf["ssl.keystore.location"], out.conf["ssl.keystore.password"]) == ("/k.p12", "pw")


def test_missing_ca_file_is_found_before_connecting():
    with pytest.raises(ConfigError, match="ssl.ca.location"):
        build_producer_conf({**P, "security.protocol": "SSL", "ssl.truststore.type": "PEM",
                             "ssl.truststore.location": "/no/such/ca.pem"}, "p")


def test_settings_that_do_not_go_together_are_a_config_error():
    with pytest.raises(ConfigError, match="ssl.keystore.password"):
        build_producer_conf({**P, "security.protocol": "SSL", "ssl.keystore.type": "PKCS12",
                             "ssl.keystore.location": "/k.p12"}, "p")


def test_missing_jks_truststore_is_a_clear_error():
    with pytest.raises(ConfigError, match="ssl.truststore.location: cannot read /no/t.jks"):
        build_producer_conf({**P, "ssl.truststore.location": "/no/t.jks"}, "p")


def test_shipped_sample_files_are_valid():
    config = build_config(str(ROOT / "config" / "consumer.properties"),
                          str(ROOT / "config" / "producer.properties"), "orders.*")
    assert config.consumer["partition.assignment.strategy"] == "roundrobin"
    assert config.batch_size == 500 and not config.sync_send
    # The producer sample says its no-data-loss settings are the defaults: they are.
    for key in ("acks", "enable.idempotence", "max.in.flight.requests.per.connection", "message.timeout.ms"):
        assert str(config.producer[key]) == str(PRODUCER_DEFAULTS[key]), key


def test_producer_type_sync_and_bad_value(props):
    consumer = props("bootstrap.servers=h:1\ngroup.id=g\n", "c.properties")
    assert build_config(consumer, props("bootstrap.servers=h:2\nproducer.type=sync\n", "p.properties"),
                        "t").sync_send
    with pytest.raises(ConfigError, match="producer.type"):
        build_config(consumer, props("bootstrap.servers=h:2\nproducer.type=fast\n", "q.properties"), "t")


def test_consumer_conf_per_thread(props):
    config = build_config(props("bootstrap.servers=h:1\ngroup.id=grp\ngroup.instance.id=inst\n", "c.properties"),
                          props("bootstrap.servers=h:2\n", "p.properties"), "t", num_streams=2)
    assert config.consumer_conf(1)["client.id"] == "grp-1"
    assert config.consumer_conf(1)["group.instance.id"] == "inst-1"


SAMPLE_VALUES = {
    "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor",
    "sasl.jaas.config": 'x.PlainLoginModule required username="u" password="p";',
    "buffer.memory": "1048576",
    "auto.offset.reset": "earliest",
    "delivery.report.only.error": "true",
}


@pytest.mark.parametrize("role,key", [("consumer", k) for k in sorted(CONSUMER)] +
                                     [("producer", k) for k in sorted(PRODUCER)])
def test_every_table_row_has_a_defined_outcome(role, key):
    """Passed through, renamed, converted, taken by the mirror, or noted (INFO/WARN): never lost silently."""
    out = translate({key: SAMPLE_VALUES.get(key, "1")}, role)
    assert out.conf or out.engine or out.notes


def test_a_setting_confluent_kafka_reads_as_a_bool_is_given_one():
    conf, _engine = build_producer_conf({**P, "delivery.report.only.error": "True"}, "p")
    assert conf["delivery.report.only.error"] is True
    with pytest.raises(ConfigError, match="delivery.report.only.error: 'maybe' is not true or false"):
        build_producer_conf({**P, "delivery.report.only.error": "maybe"}, "p")


def test_transactional_settings_follow_the_mode(tmp_path, caplog):
    from dataclasses import replace

    from mirror_maker.config.client_conf import settle_transactions

    consumer = tmp_path / "c.properties"
    consumer.write_text("bootstrap.servers=h:1\ngroup.id=g\n")
    producer = tmp_path / "p.properties"
    producer.write_text("bootstrap.servers=h:2\ntransactional.id=mine\n")
    caplog.set_level(logging.INFO)
    config = build_config(str(consumer), str(producer), include="t")
    assert "transactional.id" not in config.producer  # the mirror sets its own, with --exactly.once only
    assert "transactional.id is ignored" in caplog.text
    exactly_once = settle_transactions(replace(config, exactly_once=True))
    assert exactly_once.exactly_once_group == "g" and exactly_once.transaction_timeout_ms == 180000
    with pytest.raises(ConfigError, match="needs producer acks=all"):
        settle_transactions(replace(config, exactly_once=True, producer={**config.producer, "acks": "1"}))
