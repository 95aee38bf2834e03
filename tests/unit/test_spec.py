"""The option spec is the one declaration: the command line, --help, the config objects' defaults
and the dedicated mode's reading of mm2.properties all come from it."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest

from mirror_maker.cli import command as cli
from mirror_maker.cli import options
from mirror_maker.config import spec
from mirror_maker.config.mirror_config import MirrorMakerConfig
from mirror_maker.config.replication import ReplicationOptions
from mirror_maker.dedicated.mm2_file import parse
from mirror_maker.spark.settings import SparkOptions

from .test_cli import base_args

CONFIG_OBJECTS = {"mirror": MirrorMakerConfig, "replication": ReplicationOptions, "spark": SparkOptions}


def _default(field):
    return field.default_factory() if field.default is MISSING else field.default


@pytest.mark.parametrize("kind", list(CONFIG_OBJECTS))
def test_each_config_object_takes_its_options_defaults_from_the_spec(kind):
    declared = {f.name: f for f in fields(CONFIG_OBJECTS[kind])}
    for option in spec.fields(kind):
        assert option.attr in declared, option.field
        if kind == "spark" and option.attr == "py_files":
            continue  # given as a comma-separated string, kept as a tuple
        assert _default(declared[option.attr]) == option.default, option.name


def test_the_command_line_s_defaults_build_the_config_objects_defaults(good_files, monkeypatch):
    from mirror_maker.engine import runner

    seen = {}
    monkeypatch.setattr(runner, "run", lambda config, handler, listener: seen.setdefault("config", config) and 0)
    assert cli.invoke(base_args(good_files, "--include", "t")) == 0
    config = seen["config"]
    for option in spec.fields("mirror"):
        assert getattr(config, option.attr) == option.default, option.name
    assert config.replication == ReplicationOptions()


def test_every_option_of_the_command_line_is_in_help_once_with_its_shown_default():
    usage = options.usage_text()
    text = "".join(usage.split())  # --help wraps lines, also at hyphens
    first_words = [line.split()[0].rstrip(",") for line in usage.splitlines() if line.startswith("--")]
    for option in spec.command_line():
        assert first_words.count(option.flags[0]) == 1, option.name
        shown = option.shown_default()
        if shown is not None:
            assert f"(default:{''.join(shown.split())})" in text, option.name
    assert len(list(spec.command_line(spec.KAFKA))) == 14


def test_names_are_unique_and_every_rule_names_options_that_exist():
    flags = [flag for option in spec.OPTIONS for flag in option.flags]
    assert len(flags) == len(set(flags))
    assert len(spec.BY_NAME) == len(spec.OPTIONS)
    for rule in spec.RULES:
        for role in ("option", "switch", "feature", "needed", "other"):
            if hasattr(rule, role):
                assert getattr(rule, role) in spec.BY_NAME, rule


def test_a_rule_s_options_are_where_the_rule_is_applied():
    for rule in spec.rules(spec.Implies):
        for name in (rule.feature, rule.needed):
            assert spec.BY_NAME[name].prop is not None and spec.BY_NAME[name].cli, name
    for rule in spec.rules(spec.Needs):
        assert spec.BY_NAME[rule.option].group == spec.BY_NAME[rule.switch].group == spec.MM2


@pytest.mark.parametrize("name, value, problem", [
    ("num.streams", 0, "0 is not a positive number of threads"),
    ("offset.commit.interval.ms", -1, "-1 is negative"),
    ("metrics.port", 65536, "65536 is not a port"),
    ("offset-syncs.topic.location", "moon", "'moon' is not one of source, target"),
    ("groups", "a, (", "invalid regex list"),
    ("source.cluster.alias", " a", "' a' is not a cluster alias"),
    ("replication.policy.separator", "", "must not be empty"),
])
def test_validators_say_what_is_wrong(name, value, problem):
    assert problem in spec.BY_NAME[name].problem(value)
    assert spec.BY_NAME[name].problem(None) is None
    assert spec.BY_NAME[name].problem(spec.BY_NAME[name].default) is None


@pytest.mark.parametrize("argv, message", [
    (["--num.streams", "0"], "--num.streams: 0 is not a positive number of threads"),
    (["--metrics.port", "70000"], "--metrics.port: 70000 is not a port"),
    (["--status.interval.ms", "-1"], "--status.interval.ms: -1 is negative"),
    (["--emit.heartbeats.enabled", "true", "--emit.heartbeats.interval.seconds", "0"],
     "--emit.heartbeats.interval.seconds: 0 is not a positive number"),
    (["--spark.conf", "a=b"], "--spark.conf is only used with --spark"),
    (["--exactly.once", "--use.raw.bytes"], "--exactly.once with --use.raw.bytes is not supported"),
    (["--exactly.once", "--emit.checkpoints.enabled", "true"],
     "--emit.offset-syncs.enabled (on with --emit.checkpoints.enabled) needs the source partition kept"),
])
def test_the_command_line_applies_the_spec_s_validators_and_rules(capsys, good_files, argv, message):
    assert cli.invoke(base_args(good_files, "--include", "t", *argv)) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_mm2_properties_reads_each_setting_as_the_spec_declares_it():
    base = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1", "A->B.enabled": "true"}
    file = parse(base)
    for option in spec.OPTIONS:
        if option.prop is not None and option.prop.key not in ("bootstrap.servers", "enabled"):
            assert file.value(option.prop.key, "A", "B") == option.prop.default, option.name
    given = parse({**base, "tasks.max": "3", "B.offset.flush.interval.ms": "5", "A->B.use.raw.bytes": "true",
                   "B.exactly.once.source.support": "enabled", "replication.factor": "-1"})
    mirror = given.fields("mirror", "A", "B")
    assert (mirror["num_streams"], mirror["offset_commit_interval_ms"], mirror["use_raw_bytes"],
            mirror["exactly_once"]) == (3, 5, True, True)
    assert given.field("replication.factor", "A", "B") is None


def test_translate_offsets_is_a_subcommand_with_one_line_errors(capsys, tmp_path):
    assert cli.invoke(["translate-offsets", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--source.cluster.alias" in out and "--group" in out
    assert cli.invoke(["translate-offsets", "--config", "c.properties"]) == 1
    assert "Missing option '--group'" in capsys.readouterr().err
    assert cli.invoke(["--num.streams", "2", "translate-offsets"]) == 1
    assert "translate-offsets takes its own options, not --num.streams" in capsys.readouterr().err
    missing = str(tmp_path / "missing.properties")
    assert cli.invoke(["translate-offsets", "--config", missing, "--group", "g", "--source.cluster.alias", "a"]) == 1
    err = capsys.readouterr().err
    assert f"file not found: {missing}" in err and "Traceback" not in err
    assert cli.invoke(["--include", "t", "stray"]) == 1
    assert "unexpected extra argument (stray)" in capsys.readouterr().err
