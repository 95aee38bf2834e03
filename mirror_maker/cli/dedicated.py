"""``connect-mirror-maker``: MirrorMaker 2's dedicated mode, with Kafka's arguments
(``connect-mirror-maker.sh mm2.properties [--clusters A B ...]``, ``MirrorMaker.main``).

Reads and checks the whole file before anything connects (one ERROR line and exit 1 for bad
input), then runs every flow this node takes under one supervisor (``mirror_maker.dedicated``):
exit 143/130 after a clean stop on SIGTERM/SIGINT, 255 after a fatal failure. ``--spark`` runs
every flow's streams as Spark tasks, with the ``--spark.*`` options of ``kafka-mirror-maker``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import List, Optional

from .. import __version__
from ..config import spec
from ..errors import ConfigError
from ..ops.log import configure_logging, resolve_level
from ..ops.signals import exit_on_sigterm_until_handled
from ..ops.stop_watchdog import dump_stacks_on_sigusr1, exit_process
from . import exit_codes
from .command import error_status, spark_options

log = logging.getLogger("mirror_maker.MirrorMaker")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # Kafka's usage errors are one line and exit 1 here
        raise _Usage(f"{message} (connect-mirror-maker mm2.properties [--clusters CLUSTER ...]; --help)")


class _Usage(Exception):
    pass


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="connect-mirror-maker", description="MirrorMaker 2.0 driver (kafka-mirror-maker for Python): "
                "runs every enabled flow of mm2.properties; see docs/dedicated-mode.md.")
    p.add_argument("config", metavar="mm2.properties", help="MM2 configuration file.")
    p.add_argument("--clusters", nargs="+", metavar="CLUSTER", help="Target cluster to use for this node.")
    p.add_argument("--log.level", dest="log_level", metavar="LEVEL",
                   help=f"{spec.BY_NAME['log.level'].doc} Default INFO. Ours, not Kafka's.")
    p.add_argument("--verify", action="store_true",
                   help="Do not mirror: compare every flow's target with its source and exit 0 only when the "
                   "target holds every record and nothing else (exit 3: it differs; 4: not all could be "
                   "compared). Ours, not Kafka's.")
    p.add_argument("--report", metavar="FILE", help="With --verify: the report as JSON in FILE too.")
    p.add_argument("--sample", type=int, metavar="N",
                   help="With --verify: compare only the first N records of each partition.")
    p.add_argument("--spark", action="store_true",
                   help="Run every flow's streams as Spark tasks, one Spark job per flow (PySpark: pip install "
                   "'kafka-mirror-maker[spark]'). Ours, not Kafka's.")
    for option in spec.command_line(spec.SPARK):
        if option.field:
            p.add_argument(option.flag, dest=_dest(option), metavar="N" if option.type == spec.INT else "VALUE",
                           type=int if option.type == spec.INT else str,
                           action="append" if option.repeatable else "store", help=_spark_help(option))
    p.add_argument("--version", action="version", version=__version__)
    return p


def _dest(option: spec.Option) -> str:
    return option.name.replace(".", "_")


def _spark_help(option: spec.Option) -> str:
    if option.name == "spark.master":
        return "The Spark master URL; default local[N], N the sum of tasks.max over this node's flows."
    return option.doc


def main(argv: Optional[List[str]] = None) -> None:
    exit_on_sigterm_until_handled()
    dump_stacks_on_sigusr1()
    exit_process(invoke(list(sys.argv[1:] if argv is None else argv)))


def invoke(argv: List[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except _Usage as problem:
        print(f"ERROR {problem}", file=sys.stderr)
        return exit_codes.USAGE
    except SystemExit as done:  # --help, --version
        return int(done.code or 0)
    try:
        configure_logging(resolve_level(args.log_level))
        if args.verify:
            return verify(args.config, args.clusters, args.report, args.sample)
        for given, name in ((args.report, "--report"), (args.sample, "--sample")):
            if given is not None:
                raise ConfigError(f"{name} is only used with --verify")
        return run(args.config, args.clusters, _spark_options(args))
    except (KeyboardInterrupt, Exception) as exc:
        return error_status(exc)


def _spark_options(args: argparse.Namespace):
    """The ``--spark.*`` options (None without ``--spark``), checked as kafka-mirror-maker does."""
    given = {option.name: getattr(args, _dest(option)) for option in spec.command_line(spec.SPARK)
             if option.field and getattr(args, _dest(option)) is not None}
    for rule in spec.rules(spec.OnlyWith):
        if rule.option in given and rule.switch == "spark" and not args.spark:
            raise ConfigError(f"--{rule.option} is only used with --spark")
    for name, value in given.items():
        problem = spec.BY_NAME[name].problem(value)
        if problem:
            raise ConfigError(f"--{name}: {problem}")
    return spark_options(args.spark, {spec.BY_NAME[name].attr: value for name, value in given.items()})


def run(path: str, clusters: Optional[List[str]], spark=None) -> int:
    """``spark``: the ``--spark.*`` options, to run the streams as Spark tasks."""
    from ..dedicated.flows import plan_flows, run_settings
    from ..dedicated.mm2_file import read_mm2_file
    from ..dedicated.supervisor import Supervisor

    log.info("Kafka MirrorMaker initializing ...")
    file = read_mm2_file(path)
    flows = plan_flows(file, clusters)
    settings = run_settings(file)
    on_spark = None
    if spark is not None:
        from ..dedicated.on_spark import SparkFlows

        on_spark = SparkFlows(flows, spark, worker_metrics=settings.metrics_port is not None)
    log.info("Targeting clusters %s", ", ".join(sorted(clusters or file.clusters)))
    return Supervisor(flows, settings, server_factory=_ops_server(settings), spark=on_spark).run()


def verify(path: str, clusters: Optional[List[str]], report_file: Optional[str], sample: Optional[int]) -> int:
    """Every enabled flow into ``clusters`` (all without), compared as ``kafka-mirror-maker verify``
    compares one."""
    from ..dedicated.flows import plan_flows
    from ..dedicated.mm2_file import read_mm2_file
    from ..engine.runner import load_plugins
    from ..verify.check import VerifyOptions, verify as verify_flow
    from .verify import answer

    if sample is not None and sample < 1:
        raise ConfigError(f"--sample: {sample} is not a positive number of records")
    flows = [flow for flow in plan_flows(read_mm2_file(path), clusters) if flow.enabled]
    if not flows:
        raise ConfigError(f"{path}: no enabled flow to verify")
    reports = [verify_flow(flow.config, load_plugins(flow.config)[0], VerifyOptions(sample), flow.source, flow.target)
               for flow in flows]
    return answer(reports, report_file)


def _ops_server(settings):
    if settings.metrics_port is None:
        return None

    def start(supervisor):
        from ..dedicated.metrics import DedicatedMetrics
        from ..ops.endpoint import OpsServer

        return OpsServer(settings.metrics_bind, settings.metrics_port, DedicatedMetrics(supervisor),
                         supervisor.readiness).start()
    return start
