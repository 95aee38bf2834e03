"""``kafka-mirror-maker``: the command line, compatible with Kafka 3.9's ``kafka-mirror-maker.sh``.

Parses and validates everything before connecting, builds one :class:`MirrorMakerConfig`, runs
the mirror, and is the one place that maps errors to exit codes: usage and configuration
errors exit 1 (one line on stderr), fatal runtime failures 255, a clean stop on SIGTERM 143 and
on SIGINT 130, ``--version`` 0.
"""

from __future__ import annotations

import logging
import sys
import textwrap
from typing import List, Optional

import click

from .. import __version__
from . import exit_codes
from . import options
from ..errors import ConfigError, MirrorMakerError
from ..extras import require
from ..redaction import redact
from ..ops.log import configure_logging, resolve_level

log = logging.getLogger("mirror_maker.MirrorMaker")

HEADLINE = "This tool helps to continuously copy data between two Kafka clusters."


class UsageProblem(Exception):
    """A usage error that Kafka answers with the message and the usage table (exit 1)."""


def _table(rows, width: int = 80, left: int = 40) -> List[str]:
    lines = []
    for name, description in rows:
        left_lines = textwrap.wrap(name, left - 2, subsequent_indent="  ") or [""]
        right_lines = textwrap.wrap(description, width - left) or [""]
        for i in range(max(len(left_lines), len(right_lines))):
            l_text = left_lines[i] if i < len(left_lines) else ""
            r_text = right_lines[i] if i < len(right_lines) else ""
            lines.append(f"{l_text:<{left}}{r_text}".rstrip())
    return lines


def _rows(specs):
    rows = []
    for decls, _name, description, default, kwargs in sorted(specs, key=lambda s: s[0][0]):
        if kwargs.get("is_flag"):
            text, meta = description, ""
        else:
            meta_type, _, text = description.partition(": ")
            meta = f" <{meta_type}>"
        if default is not None:
            text = f"{text} (default: {default})"
        rows.append((", ".join(decls) + meta, text))
    return rows


def usage_text() -> str:
    """Kafka's jopt-simple table (sorted, with defaults), then our Extensions section."""
    lines = [HEADLINE, *_table([("Option", "Description"), ("------", "-----------")])]
    lines += _table(_rows(options.KAFKA_OPTIONS))
    lines += ["", "Extensions (kafka-mirror-maker for Python only):"]
    lines += _table(_rows(options.EXTENSION_OPTIONS))
    lines += ["", "MirrorMaker 2 capabilities (MirrorMaker 2's property names; all off by default):"]
    lines += _table(_rows(options.MM2_OPTIONS))
    lines += ["", "Spark mode (kafka-mirror-maker for Python only):"]
    lines += _table(_rows(options.SPARK_OPTIONS))
    lines += ["", "Where a consumer group resumes on the target, from the checkpoints: "
              "kafka-mirror-maker translate-offsets --help"]
    return "\n".join(lines)


def _check_repeats(argv: List[str]) -> None:
    seen = {}
    for arg in argv:
        name = arg.split("=", 1)[0]
        for decls in options.value_options():
            if name in decls:
                if decls in seen:
                    raise UsageProblem(f"Option {decls[0]} was given more than once")
                seen[decls] = True


@options.apply
@click.command(add_help_option=False, context_settings={"ignore_unknown_options": False})
def command(**params) -> int:
    if params.pop("show_help"):
        raise UsageProblem(None)
    if params.pop("show_version"):
        click.echo(__version__)
        return exit_codes.OK
    for required in ("consumer_config", "producer_config"):
        if not params.get(required):
            raise UsageProblem(f'Missing required argument "[{required.replace("_", ".")}]"')
    configure_logging(resolve_level(params.pop("log_level")))
    log.info("Starting mirror maker")
    if params.pop("new_consumer"):
        log.info("--new.consumer is deprecated and ignored: the new consumer is the default")
    include, whitelist = params.pop("include"), params.pop("whitelist")
    if whitelist is not None:
        if include is not None:
            log.warning("--whitelist is deprecated and ignored because --include is given")
        else:
            log.warning("--whitelist is deprecated; use --include")
    include = include if include is not None else whitelist
    if include is None:
        raise ConfigError("include list must be specified")
    shutdown_timeout_ms = params.pop("shutdown_timeout_ms")
    if shutdown_timeout_ms < 0:
        raise ConfigError(f"--shutdown.timeout.ms: {shutdown_timeout_ms} is negative")
    extensions = {
        "shutdown_timeout_s": shutdown_timeout_ms / 1000.0,
        "metrics_port": params.pop("metrics_port"),
        "metrics_bind": params.pop("metrics_bind"),
        "status_interval_ms": params.pop("status_interval_ms"),
        "exit_when_caught_up": params.pop("exit_when_caught_up"),
        "use_raw_bytes": params.pop("use_raw_bytes"),
        "exactly_once": params.pop("exactly_once"),
        "exactly_once_group_option": params.pop("exactly_once_group_option"),
    }
    if extensions["exactly_once_group_option"] and not extensions["exactly_once"]:
        raise ConfigError("--exactly.once.group is only used with --exactly.once")
    if extensions["use_raw_bytes"]:
        require("raw", "google_crc32c", "--use.raw.bytes")
    if extensions["exactly_once"] and extensions["use_raw_bytes"]:
        raise ConfigError("--exactly.once with --use.raw.bytes is not supported: the raw path's producer "
                          "is not transactional")

    spark = _spark_options(params)
    extensions["replication"] = _replication_options(params)

    from dataclasses import replace

    from ..config.client_conf import settle_transactions
    from ..config.replication import follow_partitions
    from ..config.mirror_config import build_config
    from ..engine.runner import load_plugins, run

    config = settle_transactions(replace(build_config(include=include, **params), **extensions))
    config = replace(config, consumer=follow_partitions(config.consumer, config.replication))
    handler, listener = load_plugins(config)  # a bad plugin fails here, before Spark starts
    from ..replication.policies import cycle_warning, topic_rules

    warning = cycle_warning(topic_rules(config.replication))  # and so does a bad replication policy
    if warning:
        log.warning("%s", warning)
    _check_offset_syncs(config, handler)
    if spark is not None:
        from ..spark.driver import run_on_spark

        return run_on_spark(config, spark)
    return run(config, handler, listener)


#: MirrorMaker 2's options whose ReplicationOptions field has another name (the others: the same).
_RENAMED = {"replication_policy": "policy", "replication_policy_separator": "separator",
            "source_cluster_alias": "source_alias", "target_cluster_alias": "target_alias",
            "config_properties_exclude": "config_exclude"}
#: Options that mean nothing without a switch (dependent -> switch).
_NEEDS = {
    "refresh_topics_interval_s": "refresh_topics", "sync_topic_configs_interval_s": "sync_topic_configs",
    "config_properties_exclude": "sync_topic_configs", "sync_topic_acls_interval_s": "sync_topic_acls",
    "offset_syncs_location": "emit_offset_syncs", "offset_lag_max": "emit_offset_syncs",
    "emit_checkpoints_interval_s": "emit_checkpoints", "groups": "emit_checkpoints",
    "groups_exclude": "emit_checkpoints", "sync_group_offsets_interval_s": "sync_group_offsets",
    "emit_heartbeats_interval_s": "emit_heartbeats",
}


def _check_offset_syncs(config, handler) -> None:
    """Offset syncs map a source partition's offsets to the same partition's on the target."""
    if not config.replication.emit_offset_syncs:
        return
    if config.use_raw_bytes:
        from ..handlers import RawBatchHandler

        if type(handler) is not RawBatchHandler:
            raise ConfigError("--emit.offset-syncs.enabled with --use.raw.bytes needs raw mode's own handler "
                              "(each batch to its topic as the replication policy names it): a --message.handler "
                              "may send batches elsewhere, where their offsets cannot be followed")
        return  # raw mode keeps partition numbers
    if config.exactly_once:
        raise ConfigError(f"--emit.offset-syncs.enabled{_implied(config)} with --exactly.once is not supported: "
                          "transaction markers take target offsets, so target offsets cannot be counted")
    if not getattr(handler, "keep_partition", False):
        raise ConfigError(f"--emit.offset-syncs.enabled{_implied(config)} needs the source partition kept "
                          "(MirrorMaker 2's mapping): --message.handler mirror_maker.handlers.PartitionPreservingHandler")


def _implied(config) -> str:
    return " (on with --emit.checkpoints.enabled)" if config.replication.emit_checkpoints else ""


def _option_name(python_name: str) -> str:
    decls = next(d for d, name, *_ in options.MM2_OPTIONS if name == python_name)
    return decls[0]


def _replication_options(params: dict):
    """MirrorMaker 2's options; one that means nothing without its switch is worth a WARN line (a
    MirrorMaker 2 user expects its switch on, as it is by default there)."""
    from ..config.replication import build_replication_options

    given = {name: params.pop(name) for _decls, name, *_rest in options.MM2_OPTIONS}
    replication = build_replication_options(**{_RENAMED.get(name, name): value for name, value in given.items()})
    for dependent, switch in _NEEDS.items():
        if given[dependent] is not None and not getattr(replication, _RENAMED.get(switch, switch)):
            log.warning("%s is only used with %s true: ignored", _option_name(dependent), _option_name(switch))
    return replication


def _spark_options(params: dict):
    """The ``--spark.*`` options (None without ``--spark``); they mean nothing without it."""
    enabled = params.pop("spark")
    given = {"master": params.pop("spark_master"), "conf": tuple(params.pop("spark_conf")),
             "py_files": params.pop("spark_py_files"), "max_restarts": params.pop("spark_max_restarts")}
    if not enabled:
        for name in ("master", "conf", "py_files"):
            if given[name]:
                raise ConfigError(f"--spark.{name.replace('_', '.')} is only used with --spark")
        return None
    from ..spark.settings import SparkOptions

    py_files = tuple(p.strip() for p in (given["py_files"] or "").split(",") if p.strip())
    return SparkOptions(given["master"], given["conf"], py_files, given["max_restarts"])


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point; exits with Kafka's status codes and never shows a traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    sys.exit(invoke(argv))


def invoke(argv: List[str]) -> int:
    try:
        if argv and argv[0] == "translate-offsets":
            configure_logging(resolve_level(None))
            from ..replication.translate import main as translate_main

            return translate_main(argv[1:])
        if not argv:
            raise UsageProblem(None)
        _check_repeats(argv)
        return command.main(argv, prog_name="kafka-mirror-maker", standalone_mode=False) or 0
    except UsageProblem as problem:
        if problem.args[0]:
            click.echo(problem.args[0], err=True)
        click.echo(usage_text(), err=True)
        return exit_codes.USAGE
    except click.UsageError as exc:
        click.echo(f"{exc.format_message()} Run with --help for the options.", err=True)
        return exit_codes.USAGE
    except click.exceptions.Exit as exc:  # pragma: no cover - not raised without help options
        return exc.exit_code
    except click.Abort:
        return exit_codes.SIGINT
    except (KeyboardInterrupt, Exception) as exc:
        return error_status(exc)


def error_status(exc: BaseException) -> int:
    """One ERROR line for what ended the run (none for Ctrl-C), and its exit status."""
    if isinstance(exc, MirrorMakerError):
        _error_line(exc)
    elif not isinstance(exc, KeyboardInterrupt):  # the last resort: one line, the traceback only at DEBUG
        log.debug("unexpected error", exc_info=True)
        _error_line(f"unexpected error: {type(exc).__name__}: {exc}")
    return exit_codes.for_error(exc)


def _error_line(message) -> None:
    if logging.getLogger().handlers:
        log.error("%s", message)
    else:
        click.echo(redact(f"ERROR {message}"), err=True)
