"""A feature asked for without its extra: one line naming the extra, exit 1, no traceback."""

import sys

import pytest

from mirror_maker.cli import command as cli
from mirror_maker.cli import exit_codes

from .test_cli import base_args


@pytest.mark.parametrize("module,extra,args", [
    ("google_crc32c", "raw", ["--use.raw.bytes"]),
    ("pyspark", "spark", ["--spark"]),
])
def test_a_mode_without_its_extra_names_it(monkeypatch, capsys, good_files, module, extra, args):
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    assert cli.invoke(base_args(good_files, "--include", "t", *args)) == exit_codes.USAGE
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and f"needs the '{extra}' extra" in errors[0], err
    assert f"pip install 'kafka-mirror-maker[{extra}]'" in errors[0] and "Traceback" not in err


def test_a_jks_store_without_the_jks_extra_names_it(monkeypatch, capsys, props, tmp_path):
    store = tmp_path / "trust.jks"
    store.write_bytes(b"\xfe\xed\xfe\xed")
    monkeypatch.setitem(sys.modules, "jks", None)
    consumer = props(f"bootstrap.servers=h:1\ngroup.id=g\nsecurity.protocol=SSL\n"
                     f"ssl.truststore.location={store}\nssl.truststore.password=changeit\n", "c.properties")
    producer = props("bootstrap.servers=h:2\n", "p.properties")
    assert cli.invoke(["--consumer.config", consumer, "--producer.config", producer, "--include", "t"]) == 1
    err = capsys.readouterr().err
    assert "ssl.truststore.location: a JKS store needs the 'jks' extra" in err and "Traceback" not in err
