"""Kafka's config providers (FileConfigProvider, EnvVarConfigProvider, DirectoryConfigProvider)."""

import pytest

from mirror_maker.config.client_conf import build_producer_conf
from mirror_maker.config.providers import DIRECTORY_CLASS, ENV_CLASS, FILE_CLASS, resolve
from mirror_maker.errors import ConfigError

FILE = {"config.providers": "file", "config.providers.file.class": FILE_CLASS}
ENV = {"config.providers": "env", "config.providers.env.class": ENV_CLASS}
DIR = {"config.providers": "dir", "config.providers.dir.class": DIRECTORY_CLASS}


def resolved(props, environ=None, java=None):
    return resolve(props, "p.properties", environ=environ or {}, java_properties=java or {})


def test_nothing_is_replaced_without_config_providers():
    assert resolved({"a": "${file:/x:y}"}) == {"a": "${file:/x:y}"}


def test_file_provider_reads_a_key_of_a_properties_file(tmp_path):
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("password = s3cret\nuser: alice\n")
    props = {**FILE, "sasl.password": f"${{file:{secrets}:password}}", "u": f"x-${{file:{secrets}:user}}-y"}
    assert resolved(props) == {"sasl.password": "s3cret", "u": "x-alice-y"}  # provider settings dropped


def test_env_provider_and_its_allowlist():
    props = {**ENV, "config.providers.env.param.allowlist.pattern": "KAFKA_.*", "a": "${env:KAFKA_PW}"}
    assert resolved(props, {"KAFKA_PW": "pw-1"})["a"] == "pw-1"
    with pytest.raises(ConfigError, match="p.properties: b: the 'env' config provider has no value for 'HOME'"):
        resolved({**props, "b": "${env:HOME}"}, {"KAFKA_PW": "pw-1", "HOME": "/root"})
    with pytest.raises(ConfigError, match="a path is not supported"):
        resolved({**ENV, "a": "${env:/x:KAFKA_PW}"}, {"KAFKA_PW": "pw-1"})


def test_directory_provider_reads_a_file_whole(tmp_path):
    (tmp_path / "password").write_text("from-a-secret-volume\n")
    (tmp_path / "sub").mkdir()
    props = {**DIR, "p": f"${{dir:{tmp_path}:password}}"}
    assert resolved(props)["p"] == "from-a-secret-volume\n"  # as Kafka: the content, newline and all
    with pytest.raises(ConfigError, match="no value for 'sub'"):
        resolved({**DIR, "p": f"${{dir:{tmp_path}:sub}}"})  # regular files only


def test_allowed_paths_are_checked_after_normalisation_component_by_component(tmp_path):
    allowed, beside = tmp_path / "kafka", tmp_path / "kafka-other"
    allowed.mkdir()
    beside.mkdir()
    (allowed / "s.properties").write_text("k=v\n")
    (beside / "s.properties").write_text("k=v\n")
    props = {**FILE, "config.providers.file.param.allowed.paths": str(allowed)}
    assert resolved({**props, "a": f"${{file:{allowed}/s.properties:k}}"})["a"] == "v"
    for outside in (beside / "s.properties", f"{allowed}/../kafka-other/s.properties"):
        with pytest.raises(ConfigError, match=r"p.properties: a: the 'file' config provider: the path .* is not "
                                              r"in its allowed.paths"):
            resolved({**props, "a": f"${{file:{outside}:k}}"})
    with pytest.raises(ConfigError, match="is not absolute"):
        resolved({**props, "config.providers.file.param.allowed.paths": "relative/dir", "a": "x"})


@pytest.mark.parametrize("props,message", [
    ({"config.providers": "vault", "config.providers.vault.class": "com.example.VaultConfigProvider", "a": "x"},
     "config.providers.vault.class: config provider com.example.VaultConfigProvider is not supported"),
    ({"config.providers": "file", "a": "x"}, "config.providers names 'file' but config.providers.file.class is missing"),
    ({**FILE, "a": "${env:X}"}, "a: ${env:...} names a config provider that config.providers does not list"),
    ({**FILE, "a": "${file:/nonexistent/f.properties:k}"},
     "a: the 'file' config provider: could not read properties from file /nonexistent/f.properties"),
])
def test_each_problem_is_one_line_naming_the_property_and_the_provider(props, message):
    with pytest.raises(ConfigError) as info:
        resolved(props)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_kafka_opts_automatic_config_providers_limits_the_classes(tmp_path):
    java = {"org.apache.kafka.automatic.config.providers": ENV_CLASS}
    with pytest.raises(ConfigError, match="FileConfigProvider is not allowed by the system property"):
        resolved({**FILE, "a": "x"}, java=java)
    assert resolved({**ENV, "a": "${env:A}"}, {"A": "1"}, java=java) == {"a": "1"}


def test_a_producer_file_with_providers_reaches_librdkafka_resolved(tmp_path, monkeypatch):
    monkeypatch.setenv("MM_TEST_PASSWORD", "pw-from-env")
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    conf, _ = build_producer_conf({**ENV, "bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                                   "sasl.mechanism": "PLAIN",
                                   "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                                       'required username="u" password="${env:MM_TEST_PASSWORD}";'},
                                  "p")
    assert conf["sasl.password"] == "pw-from-env"
    assert not any(key.startswith("config.providers") for key in conf)
