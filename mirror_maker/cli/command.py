"""``kafka-mirror-maker``: the command line, compatible with Kafka 3.9's ``kafka-mirror-maker.sh``.

Parses and validates everything before connecting, builds one :class:`MirrorMakerConfig`, runs
the mirror, and is the one place that maps errors to exit codes: usage and configuration
errors exit 1 (one line on stderr), fatal runtime failures 255, a clean stop on SIGTERM 143 and
on SIGINT 130, ``--version`` 0.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from typing import List, Optional, Tuple

import click

from .. import __version__
from ..config import spec
from . import cutover, exit_codes, options, translate_offsets, verify
from ..errors import ConfigError, MirrorMakerError
from ..extras import require
from ..redaction import redact
from ..ops.log import configure_logging, resolve_level
from ..ops.signals import exit_on_sigterm_until_handled
from ..ops.stop_watchdog import dump_stacks_on_sigusr1, exit_process

log = logging.getLogger("mirror_maker.MirrorMaker")


class UsageProblem(Exception):
    """A usage error that Kafka answers with the message and the usage table (exit 1)."""


def usage_text() -> str:
    return options.usage_text()


def _check_repeats(argv: List[str]) -> None:
    seen = set()
    for arg in argv:
        name = arg.split("=", 1)[0]
        for flags in options.value_flags():
            if name in flags:
                if flags in seen:
                    raise UsageProblem(f"Option {flags[0]} was given more than once")
                seen.add(flags)


class _MirrorMakerCommand(click.Group):
    """Kafka's options, and subcommands beside them (``translate-offsets``)."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands:
            raise click.UsageError(f"Got unexpected extra argument ({args[0]}); the subcommands are "
                                   f"{', '.join(sorted(self.commands))}.")
        return super().resolve_command(ctx, args)


@click.group(cls=_MirrorMakerCommand, invoke_without_command=True, add_help_option=False,
             context_settings={"ignore_unknown_options": False})
@options.apply
@click.pass_context
def command(ctx: click.Context, **params) -> Optional[int]:
    """Kafka's command line runs the mirror; a first argument naming a subcommand runs that."""
    if ctx.invoked_subcommand is not None:
        mixed = [f"--{name}" for name in options.given(params)]
        if mixed:
            raise click.UsageError(f"{ctx.invoked_subcommand} takes its own options, not {mixed[0]}.")
        return None
    return _mirror(params)


command.add_command(translate_offsets.command)
command.add_command(verify.command)
command.add_command(cutover.command)


def _mirror(params: dict) -> int:
    if params.pop("help"):
        raise UsageProblem(None)
    if params.pop("version"):
        click.echo(__version__)
        return exit_codes.OK
    for option in spec.command_line():
        if option.required and not params.get(option.attr):
            raise UsageProblem(f'Missing required argument "[{option.name}]"')
    configure_logging(resolve_level(params.pop("log_level")))
    log.info("Starting mirror maker")
    config, handler, listener, spark = configured(params)
    if spark is not None:
        from ..spark.driver import run_on_spark

        return run_on_spark(config, spark)
    from ..engine.runner import run

    return run(config, handler, listener)


def configured(params: dict):
    """The run the options describe, checked as a whole: its config, handler, listener and Spark
    options (``verify`` reads the same command line)."""
    if params.pop("new_consumer"):
        log.info("--new.consumer is deprecated and ignored: the new consumer is the default")
    include_option, include = _include(params.pop("include"), params.pop("whitelist"))
    given = options.given(params)
    for name, value in given.items():
        problem = spec.BY_NAME[name].problem(value)
        if problem:
            raise ConfigError(f"--{name}: {problem}")
    for rule in spec.rules(spec.OnlyWith):
        if rule.option in given and not given.get(rule.switch):
            raise ConfigError(f"--{rule.option} is only used with --{rule.switch}")
    if given.get("use.raw.bytes"):
        require("raw", "google_crc32c", "--use.raw.bytes")
    fields = {kind: {spec.BY_NAME[name].attr: value for name, value in given.items()
                     if (spec.BY_NAME[name].field or "").startswith(kind + ".")}
              for kind in ("mirror", "replication", "spark")}
    spark = spark_options(given.get("spark", False), fields["spark"])
    replication = _replication_options(given, fields["replication"])

    from ..config.client_conf import settle_transactions
    from ..config.replication import follow_partitions
    from ..config.mirror_config import build_config
    from ..engine.runner import load_plugins

    config = build_config(params["consumer_config"], params["producer_config"], include, include_option,
                          replication=replication, **fields["mirror"])
    _check_excludes(config, given)
    config = settle_transactions(config)
    config = replace(config, consumer=follow_partitions(config.consumer, config.replication))
    handler, listener = load_plugins(config)  # a bad plugin fails here, before Spark starts
    from ..replication.policies import cycle_warning, topic_rules

    warning = cycle_warning(topic_rules(config.replication))  # and so does a bad replication policy
    if warning:
        log.warning("%s", warning)
    _check_offset_syncs(config, handler)
    return config, handler, listener, spark


def _include(include: Optional[str], whitelist: Optional[str]) -> Tuple[str, str]:
    """Kafka's rule: ``--include`` wins, ``--whitelist`` is deprecated, one of them is needed.
    Returns the option that counts and its value."""
    if whitelist is not None:
        if include is not None:
            log.warning("--whitelist is deprecated and ignored because --include is given")
        else:
            log.warning("--whitelist is deprecated; use --include")
    if include is not None:
        return "--include", include
    if whitelist is not None:
        return "--whitelist", whitelist
    raise ConfigError("include list must be specified")


def _resolved(config, name: str):
    """The value an option has in the built config (given, implied or its default)."""
    kind, _, attr = spec.BY_NAME[name].field.partition(".")
    return getattr(config.replication if kind == "replication" else config, attr)


def _check_excludes(config, given: dict) -> None:
    """The spec's pairs of options that cannot go together, as the run would have them."""
    for rule in spec.rules(spec.Excludes):
        if _resolved(config, rule.option) and _resolved(config, rule.other):
            raise ConfigError(f"--{rule.option}{_implied(config, rule.option, given)} with --{rule.other} is not "
                              f"supported: {rule.reason}")


def _implied(config, name: str, given: dict) -> str:
    if name in given:
        return ""
    by = [r.feature for r in spec.rules(spec.Implies) if r.needed == name and _resolved(config, r.feature)]
    return f" (on with --{by[0]})" if by else ""


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
    if not getattr(handler, "keep_partition", False):
        implied = " (on with --emit.checkpoints.enabled)" if config.replication.emit_checkpoints else ""
        raise ConfigError(f"--emit.offset-syncs.enabled{implied} needs the source partition kept "
                          "(MirrorMaker 2's mapping): --message.handler mirror_maker.handlers.PartitionPreservingHandler")


def _replication_options(given: dict, fields: dict):
    """MirrorMaker 2's options, with the spec's rules as the command line applies them: a feature
    turns on what it needs (one error line if that is given as false), and an option given without
    its switch is one WARN and ignored."""
    from ..config.replication import build_replication_options

    on = dict(fields)
    for rule in reversed(list(spec.rules(spec.Implies))):
        feature, needed = spec.BY_NAME[rule.feature].attr, spec.BY_NAME[rule.needed].attr
        if on.get(feature) and not on.get(needed):
            if given.get(rule.needed) is False:
                raise ConfigError(f"--{rule.feature} true needs --{rule.needed} true, which is given as false")
            on[needed] = True
    replication = build_replication_options(**on)
    for rule in spec.rules(spec.Needs):
        if rule.option in given and not getattr(replication, spec.BY_NAME[rule.switch].attr):
            log.warning("--%s is only used with --%s true: ignored", rule.option, rule.switch)
    return replication


def spark_options(enabled: bool, fields: dict):
    """The ``--spark.*`` options (None without ``--spark``)."""
    if not enabled:
        return None
    from ..spark.settings import SparkOptions

    fields = dict(fields)
    fields["conf"] = tuple(fields.get("conf", ()))
    fields["py_files"] = tuple(p.strip() for p in (fields.get("py_files") or "").split(",") if p.strip())
    return SparkOptions(**fields)


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point: ends the process (``ops.stop_watchdog.exit_process``, no SystemExit to
    catch) with Kafka's status codes, never showing a traceback; ``invoke`` returns the status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    exit_on_sigterm_until_handled()
    dump_stacks_on_sigusr1()
    exit_process(invoke(argv))


def invoke(argv: List[str]) -> int:
    try:
        if not argv:
            raise UsageProblem(None)
        if argv[0] not in command.commands:
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
    except click.exceptions.Exit as exc:  # a subcommand's --help
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
