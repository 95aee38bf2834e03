"""KAFKA_OPTS' -Djava.security.auth.login.config: the KafkaClient section of a JAAS file."""

import pytest

from mirror_maker.config.client_conf import build_consumer_conf
from mirror_maker.config.java_options import client_login, parse_jaas_file, system_properties
from mirror_maker.errors import ConfigError

JAAS = """
// the broker's section is beside it in many files
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret" user_admin="admin-secret";
};
/* the client's */
KafkaClient {
    org.apache.kafka.common.security.scram.ScramLoginModule required
    username="alice"
    password="pa\\"ss word";
};
"""
SASL = {"bootstrap.servers": "h:1", "group.id": "g", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512"}


def test_system_properties_are_the_d_words_of_kafka_opts():
    opts = "-Xmx1g -Djava.security.auth.login.config=/etc/kafka/jaas.conf -Dflag -Da=1 -Da=2"
    assert system_properties({"KAFKA_OPTS": opts}) == {
        "java.security.auth.login.config": "/etc/kafka/jaas.conf", "flag": "", "a": "2"}


def test_sections_modules_and_options():
    sections = parse_jaas_file(JAAS, "j.conf")
    assert sections["KafkaClient"] == [("org.apache.kafka.common.security.scram.ScramLoginModule", "required",
                                       {"username": "alice", "password": 'pa"ss word'})]
    assert set(sections) == {"KafkaServer", "KafkaClient"}


def test_a_sasl_client_without_sasl_jaas_config_logs_in_with_the_kafka_client_section(tmp_path, monkeypatch):
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas}")
    conf, _ = build_consumer_conf(dict(SASL), "c")
    assert (conf["sasl.username"], conf["sasl.password"]) == ("alice", 'pa"ss word')
    # The file's own sasl.jaas.config wins, as in Java; a plaintext client has no login at all.
    own = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="b";'
    assert build_consumer_conf({**SASL, "sasl.jaas.config": own}, "c")[0]["sasl.username"] == "bob"
    assert "sasl.username" not in build_consumer_conf({"bootstrap.servers": "h:1", "group.id": "g"}, "c")[0]


@pytest.mark.parametrize("text,message", [
    ("KafkaServer { x required; };", "no 'KafkaClient' section"),
    ("KafkaClient { m required a=\"1\" }", "expected an option or ';' ending m's entry, found '}'"),
    ("KafkaClient { m maybe; };", "expected a control flag"),
    ("KafkaClient { a required; b required; };", "has 2 login modules"),
    ('KafkaClient { m required a="1;', "unbalanced quotes"),
])
def test_a_bad_jaas_file_is_one_line(tmp_path, text, message):
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(text)
    with pytest.raises(ConfigError, match=message):
        client_login({"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})


def test_a_missing_jaas_file_names_it():
    with pytest.raises(ConfigError, match="java.security.auth.login.config /no/jaas.conf .from KAFKA_OPTS.: cannot read"):
        client_login({"KAFKA_OPTS": "-Djava.security.auth.login.config==/no/jaas.conf"})
    assert client_login({}) is None
