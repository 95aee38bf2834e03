"""``kafka-mirror-maker verify``: the mirror's own command line (``--consumer.config``,
``--producer.config``, ``--include`` or ``--whitelist``, the handler, the replication policy),
answered with whether the target holds every record of the source and nothing else: a table, a
JSON report with ``--report``, exit 0 only when everything was compared and nothing differs."""

from __future__ import annotations

import click

from . import exit_codes, options

#: The options verify adds to the mirror's command line (docs/configuration.md's table of them).
OWN_OPTIONS = ("report_file", "sample", "verify_timeout_ms")


@click.command("verify", add_help_option=False, short_help="Whether the target holds every record of the source.")
@options.apply
@click.option("--report", "report_file", metavar="FILE", help="Write the report as JSON to FILE too.")
@click.option("--sample", type=click.IntRange(min=1), metavar="N",
              help="Compare only the first N records of each partition (a bounded read).")
@click.option("--timeout.ms", "verify_timeout_ms", type=click.IntRange(min=1), default=3600000, show_default=True,
              help="How long the reads may take in all; what is not read by then is reported as not compared.")
def command(report_file, sample, verify_timeout_ms, **params) -> int:
    """Compares every partition the mirror copies on both clusters, up to the ends they have when
    the check begins: offsets, record counts and each record's key, value, headers and timestamp
    (in order where the mirror keeps partitions, as a multiset per key where the partitioner chose
    them, by the latest record of each key where either side is compacted). It takes the mirror's
    own command line: options that only change how records are copied are accepted and ignored.
    Exit 0: the target holds everything; 3: it differs; 4: not everything could be compared."""
    from ..verify.check import VerifyOptions, verify

    read = mirror_command_line("verify", params)
    if read is None:
        return exit_codes.OK
    config, handler, _listener, _spark = read
    report = verify(config, handler, VerifyOptions(sample, verify_timeout_ms / 1000.0), *cluster_names(config))
    return answer([report], report_file)


def mirror_command_line(name: str, params: dict):
    """The mirror's command line as ``name`` reads it: (config, handler, listener, Spark
    options), or None once ``--help`` was printed."""
    from ..ops.log import configure_logging, resolve_level
    from .command import configured

    if params.pop("help"):
        click.echo(click.get_current_context().get_help())
        return None
    if params.pop("version"):
        raise click.UsageError(f"{name} takes no --version")
    if not params.get("consumer_config") or not params.get("producer_config"):
        raise click.UsageError(f"{name} needs --consumer.config (the source) and --producer.config (the target)")
    configure_logging(resolve_level(params.pop("log_level")))
    return configured(params)


def cluster_names(config):
    """The two clusters' names in a report: their aliases under a replication policy."""
    if config.replication.policy:
        return config.replication.source_alias, config.replication.target_alias
    return "source", "target"


def answer(reports, report_file=None) -> int:
    """Each flow's table on stdout, every flow in one JSON file, and one status for all of them
    (a flow that differs outranks one not proven)."""
    show(reports, report_file)
    return exit_codes.for_verification(any(r.differs for r in reports), all(r.proven for r in reports))


def show(results, report_file=None) -> None:
    """Each flow's ``table()`` on stdout, and every flow's ``as_json()`` in ``report_file``."""
    import json

    for result in results:
        for line in result.table():
            click.echo(line)
    if report_file:
        document = results[0].as_json() if len(results) == 1 else {"flows": [r.as_json() for r in results]}
        with open(report_file, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2)
            out.write("\n")
