"""The command line contract of Kafka 3.9's kafka-mirror-maker.sh: options, streams, exit codes."""

import logging

import pytest

from mirror_maker import __version__
from mirror_maker.cli import command as cli, exit_codes
from mirror_maker.engine import runner


@pytest.fixture
def captured_run(monkeypatch):
    """Replace the mirror run with a recorder: these tests never connect."""
    seen = {}

    def fake_run(config, handler, listener):
        seen.update(config=config, handler=handler, listener=listener)
        return exit_codes.OK

    monkeypatch.setattr(runner, "run", fake_run)
    return seen


def base_args(good_files, *extra):
    consumer, producer = good_files
    return ["--consumer.config", consumer, "--producer.config", producer, *extra]


def test_no_arguments_prints_usage_to_stderr_and_exits_1(capsys):
    assert cli.invoke([]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("This tool helps to continuously copy data between two Kafka clusters.")
    assert "--consumer.config" in err and "Extensions" in err


def test_help_is_usage_on_stderr_with_exit_1(capsys):
    assert cli.invoke(["--help"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "--offset.commit.interval.ms" in err


def test_help_lists_kafka_options_sorted_with_defaults(capsys):
    cli.invoke(["--help"])
    err = capsys.readouterr().err
    kafka_part = err.split("Extensions")[0]
    names = [line.split()[0].rstrip(",") for line in kafka_part.splitlines() if line.startswith("--") and not line.startswith("---")]
    assert names == sorted(names)
    assert len(names) == 14
    flat = " ".join(err.split())
    assert "(default: 60000)" in flat and "(default: true)" in flat and "(default: 1)" in flat


def test_version_goes_to_stdout_with_exit_0(capsys):
    assert cli.invoke(["--version"]) == 0
    assert capsys.readouterr().out.strip() == __version__


def test_missing_consumer_config_is_named_like_kafka(capsys, good_files):
    assert cli.invoke(["--producer.config", good_files[1], "--include", "t"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == 'Missing required argument "[consumer.config]"'


def test_missing_producer_config_is_named(capsys, good_files):
    assert cli.invoke(["--consumer.config", good_files[0], "--include", "t"]) == 1
    assert 'Missing required argument "[producer.config]"' in capsys.readouterr().err


def test_missing_include_exits_1_with_kafka_message(capsys, good_files):
    assert cli.invoke(base_args(good_files)) == 1
    assert "include list must be specified" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["--unknown.option", "x"],
    ["--consumer.confi", "x"],        # abbreviations are rejected
    ["--num.streams"],                # option without its value
    ["--num.streams", "two"],
])
def test_usage_errors_exit_1_without_traceback(capsys, argv):
    assert cli.invoke(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip()


def test_equals_and_space_forms_both_work(captured_run, good_files):
    consumer, producer = good_files
    assert cli.invoke([f"--consumer.config={consumer}", "--producer.config", producer,
                       '--whitelist="topic"', "--num.streams=3"]) == 0
    config = captured_run["config"]
    assert config.num_streams == 3
    assert config.include.pattern == "topic"


def test_include_wins_over_whitelist_and_whitelist_is_deprecated(captured_run, good_files, caplog):
    assert cli.invoke(base_args(good_files, "--whitelist", "old", "--include", "new")) == 0
    assert captured_run["config"].include.pattern == "new"
    assert any("--whitelist is deprecated" in r.message and r.levelno == logging.WARNING
               for r in caplog.records)


def test_whitelist_alone_is_used(captured_run, good_files):
    assert cli.invoke(base_args(good_files, "--whitelist", "a,b")) == 0
    assert captured_run["config"].include.pattern == "a|b"


@pytest.mark.parametrize("value,expected", [("true", True), ("FALSE", False), ("True", True)])
def test_abort_on_send_failure_takes_true_false_in_any_case(captured_run, good_files, value, expected):
    assert cli.invoke(base_args(good_files, "--include", "t", "--abort.on.send.failure", value)) == 0
    assert captured_run["config"].abort_on_send_failure is expected


def test_abort_on_send_fail_alias(captured_run, good_files):
    assert cli.invoke(base_args(good_files, "--include", "t", "--abort.on.send.fail", "false")) == 0
    assert captured_run["config"].abort_on_send_failure is False


def test_abort_on_send_failure_rejects_other_values(capsys, good_files):
    assert cli.invoke(base_args(good_files, "--include", "t", "--abort.on.send.failure", "yes")) == 1
    assert "abort.on.send.failure" in capsys.readouterr().err


def test_new_consumer_is_accepted_and_ignored(captured_run, good_files):
    assert cli.invoke(base_args(good_files, "--include", "t", "--new.consumer")) == 0


def test_rebalance_listener_args_alias(captured_run, good_files):
    assert cli.invoke(base_args(good_files, "--include", "t",
                                "--consumer.rebalance.listener", "tests.unit.sample_plugins:ArgListener",
                                "--consumer.rebalance.listener.args", "a b")) == 0
    assert captured_run["config"].rebalance_listener_args == "a b"


def test_repeated_value_option_is_an_error(capsys, good_files):
    assert cli.invoke(base_args(good_files, "--include", "a", "--include", "b")) == 1
    assert "more than once" in capsys.readouterr().err


def test_defaults_match_kafka(captured_run, good_files):
    assert cli.invoke(base_args(good_files, "--include", "t")) == 0
    config = captured_run["config"]
    assert (config.num_streams, config.offset_commit_interval_ms, config.abort_on_send_failure) == (1, 60000, True)


@pytest.mark.parametrize("streams", ["0", "-2"])
def test_non_positive_num_streams_is_a_config_error(capsys, good_files, streams):
    assert cli.invoke(base_args(good_files, "--include", "t", "--num.streams", streams)) == 1
    assert "--num.streams" in capsys.readouterr().err


def test_invalid_regex_is_one_line_and_exit_1(capsys, good_files):
    assert cli.invoke(base_args(good_files, "--include", "a(")) == 1
    err = capsys.readouterr().err
    assert "invalid regex" in err and "Traceback" not in err


def test_missing_file_is_named(capsys, good_files, tmp_path):
    missing = str(tmp_path / "nope.properties")
    assert cli.invoke(["--consumer.config", missing, "--producer.config", good_files[1],
                       "--include", "t"]) == 1
    assert f"file not found: {missing}" in capsys.readouterr().err


def test_handler_that_cannot_be_loaded_exits_1(capsys, good_files):
    assert cli.invoke(base_args(good_files, "--include", "t", "--message.handler", "no.such.Handler")) == 1
    assert "cannot load 'no.such.Handler'" in capsys.readouterr().err


def test_java_handler_class_gets_a_python_hint(capsys, good_files):
    assert cli.invoke(base_args(good_files, "--include", "t", "--message.handler",
                                "org.apache.kafka.Handler")) == 1
    assert "Python class" in capsys.readouterr().err


def test_bad_log_level_is_a_usage_error(capsys, caplog, good_files):
    assert cli.invoke(base_args(good_files, "--include", "t", "--log.level", "LOUD")) == 1
    # One line: to stderr before logging is set up, or through the handlers already there (caplog's).
    assert "LOUD" in capsys.readouterr().err + caplog.text
