"""Java .properties syntax, read with jproperties."""

import os

import pytest

from mirror_maker.errors import ConfigError
from mirror_maker.config.properties import load_properties, parse_properties


def test_java_syntax(props):
    path = props(
        "# comment\n! also a comment\n"
        "a=1\nb : two\nc three\n"
        "d=long \\\n    line\n"
        "e=\\u0041\\tz\n"
        "f\n"
        "  spaced.key  =  value with spaces\n")
    assert load_properties(path, "--consumer.config") == {
        "a": "1", "b": "two", "c": "three", "d": "long line", "e": "A\tz", "f": "",
        "spaced.key": "value with spaces"}


def test_iso_8859_1_file(tmp_path):
    path = tmp_path / "latin.properties"
    path.write_bytes("name=caf\xe9\n".encode("iso-8859-1"))
    assert load_properties(str(path), "--producer.config") == {"name": "caf\xe9"}


@pytest.mark.parametrize("text", ["=value-without-key\n", "a=\\uZZZZ\n"])
def test_malformed_line_is_one_line_error(text):
    with pytest.raises(ConfigError) as info:
        parse_properties(text, "--consumer.config c.properties")
    assert "malformed properties" in str(info.value) and "\n" not in str(info.value)


def test_missing_and_directory(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_properties(str(tmp_path / "x"), "--consumer.config")
    with pytest.raises(ConfigError, match="is a directory"):
        load_properties(str(tmp_path), "--consumer.config")


def test_unreadable_file(tmp_path, monkeypatch):
    path = tmp_path / "secret.properties"
    path.write_text("a=1\n")
    path.chmod(0)
    if os.access(path, os.R_OK):  # root reads anything: make the read fail as it would for a user
        def denied(*args, **kwargs):
            raise PermissionError(13, "Permission denied")
        monkeypatch.setattr("mirror_maker.config.properties.open", denied, raising=False)
    with pytest.raises(ConfigError) as info:
        load_properties(str(path), "--consumer.config")
    assert str(info.value) == f"--consumer.config: cannot read {path}: Permission denied"
