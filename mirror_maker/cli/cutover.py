"""``kafka-mirror-maker cutover``: the mirror's own command line, run once its producers stopped,
until the target holds everything and every consumer group is placed there exactly; exit 0 only
when all of it holds."""

from __future__ import annotations

import click

from . import exit_codes, options
from .verify import cluster_names, mirror_command_line, show

#: The options cutover adds to the mirror's command line (docs/configuration.md's table of them).
OWN_OPTIONS = ("report_file", "cutover_timeout_ms")


@click.command("cutover", add_help_option=False,
               short_help="Drain, verify and place every consumer group on the target.")
@options.apply
@click.option("--report", "report_file", metavar="FILE", help="Write the report as JSON to FILE too.")
@click.option("--timeout.ms", "cutover_timeout_ms", type=click.IntRange(min=1), default=600000, show_default=True,
              help="How long the drain and the checks may take in all.")
def command(report_file, cutover_timeout_ms, **params) -> int:
    """For a planned move, once the source's producers are stopped: mirrors until every partition
    is at its end and acknowledged by the target, writes the last checkpoints, proves the target
    holds every record of the source (as verify), and commits each source consumer group on the
    target before the first record it has not read (0 read twice, 0 skipped), then prints where
    each group resumes. Needs the source partitions kept (PartitionPreservingHandler, or
    --use.raw.bytes). Stop the running mirror first. Exit 0: cut over; 3: the target differs; 4:
    not everything could be compared; 5: not drained in time, the source moved, or a group not
    placed; 255: the mirror failed."""
    from ..cutover.flow import CutoverOptions, cutover

    read = mirror_command_line("cutover", params)
    if read is None:
        return exit_codes.OK
    config, handler, listener, spark = read
    if spark is not None:
        raise click.UsageError("cutover runs the mirror in this process: --spark is not used with it")
    result = cutover(config, handler, listener, CutoverOptions(cutover_timeout_ms / 1000.0), *cluster_names(config))
    return answer([result], report_file)


def answer(results, report_file=None) -> int:
    """Each flow's steps on stdout, every flow in one JSON file, and the first failing status."""
    show(results, report_file)
    return next((r.status() for r in results if r.status() != exit_codes.OK), exit_codes.OK)
