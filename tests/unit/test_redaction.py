"""No secret of the configuration in a log line or the error line, whatever quotes it."""

import logging

import pytest

from mirror_maker import redaction
from mirror_maker.cli.command import invoke
from mirror_maker.ops.log import FORMAT, KafkaFormatter

MARKER = "Marker-Pa55word-7f3e"


@pytest.fixture(autouse=True)
def fresh_registry():
    redaction.forget_all()
    yield
    redaction.forget_all()


def test_registered_secrets_are_hidden_longest_first_in_any_case_and_short_values_are_left():
    redaction.register(MARKER, MARKER + "-longer", "abc", None, 42)
    assert redaction.redact(f"a {MARKER}-longer b {MARKER.lower()} c abc") == "a [hidden] b [hidden] c abc"


def test_the_log_formatter_hides_them_in_messages_and_tracebacks():
    redaction.register(MARKER)
    formatter = KafkaFormatter(FORMAT)
    try:
        raise ValueError(f"bad {MARKER}")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, "f", 1, "value %s", (MARKER,), exc_info=True)
        record.exc_info = __import__("sys").exc_info()
    text = formatter.format(record)
    assert MARKER not in text and "value [hidden]" in text and "bad [hidden]" in text


def test_a_secret_librdkafka_quotes_in_its_error_is_hidden_from_the_error_line(tmp_path, capfd):
    """A secret used for the wrong key by mistake: librdkafka quotes the value it refuses."""
    secrets = tmp_path / "secrets.properties"
    secrets.write_text(f"pw={MARKER}\n")
    providers = ("config.providers=file\n"
                 "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n")
    consumer = tmp_path / "c.properties"
    consumer.write_text(f"bootstrap.servers=h:1\ngroup.id=g\n{providers}ssl.key.password=${{file:{secrets}:pw}}\n")
    producer = tmp_path / "p.properties"
    producer.write_text(f"bootstrap.servers=h:1\n{providers}ssl.key.password=${{file:{secrets}:pw}}\n"
                        f"acks=${{file:{secrets}:pw}}\n")
    status = invoke(["--consumer.config", str(consumer), "--producer.config", str(producer), "--include", "t",
                     "--log.level", "DEBUG"])
    err = capfd.readouterr().err
    assert status == 1
    assert "acks=[hidden]: Invalid value" in err and "WARN producer acks=[hidden] overrides all" in err, err
    assert MARKER.lower() not in err.lower()


def test_only_secret_settings_are_registered_and_a_token_endpoint_is_no_secret():
    from mirror_maker.config.client_conf import register_secrets

    register_secrets({"sasl.password": MARKER, "bootstrap.servers": "broker-1:9092",
                      "sasl.oauthbearer.token.endpoint.url": "https://idp/token"})
    assert redaction.redact(f"broker-1:9092 https://idp/token {MARKER}") == "broker-1:9092 https://idp/token [hidden]"
