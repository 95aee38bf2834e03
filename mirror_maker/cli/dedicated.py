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
    p.add_argument("--cutover", action="store_true",
                   help="For a planned move, once the source's producers are stopped: mirror every flow until "
                   "it is at its end, verify it, and place every consumer group on its target before the first "
                   "record it has not read; exit 0 only when all of it holds (5: not drained, the source moved "
                   "or a group not placed). Stop the running mirror first. Ours, not Kafka's.")
    p.add_argument("--report", metavar="FILE", help="With --verify or --cutover: the report as JSON in FILE too.")
    p.add_argument("--sample", type=int, metavar="N",
                   help="With --verify: compare only the first N records of each partition.")
    p.add_argument("--timeout.ms", dest="timeout_ms", type=int, metavar="MS",
                   help="With --verify or --cutover: how long each flow's reads (and drain) may take; default "
                   "3600000 for --verify, 600000 for --cutover.")
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
        if args.verify and args.cutover:
            raise ConfigError("--verify and --cutover: cutover verifies each flow itself; give one of them")
        if args.timeout_ms is not None and args.timeout_ms < 1:
            raise ConfigError(f"--timeout.ms: {args.timeout_ms} is not a positive number of milliseconds")
        if args.verify:
            return verify(args.config, args.clusters, args.report, args.sample, args.timeout_ms)
        if args.sample is not None:
            raise ConfigError("--sample is only used with --verify")
        if args.cutover:
            return cutover(args.config, args.clusters, args.report, args.timeout_ms)
        for given, name in ((args.report, "--report"), (args.timeout_ms, "--timeout.ms")):
            if given is not None:
                raise ConfigError(f"{name} is only used with --verify or --cutover")
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


def _enabled_flows(path: str, clusters: Optional[List[str]], what: str):
    from ..dedicated.flows import plan_flows
    from ..dedicated.mm2_file import read_mm2_file

    flows = [flow for flow in plan_flows(read_mm2_file(path), clusters) if flow.enabled]
    if not flows:
        raise ConfigError(f"{path}: no enabled flow to {what}")
    return flows


def verify(path: str, clusters: Optional[List[str]], report_file: Optional[str], sample: Optional[int],
           timeout_ms: Optional[int] = None) -> int:
    """Every enabled flow into ``clusters`` (all without), compared as ``kafka-mirror-maker verify``
    compares one."""
    from ..engine.runner import load_plugins
    from ..verify.check import VerifyOptions, verify as verify_flow
    from .verify import answer

    if sample is not None and sample < 1:
        raise ConfigError(f"--sample: {sample} is not a positive number of records")
    options = VerifyOptions(sample, (timeout_ms or 3600000) / 1000.0)
    reports = [verify_flow(flow.config, load_plugins(flow.config)[0], options, flow.source, flow.target)
               for flow in _enabled_flows(path, clusters, "verify")]
    return answer(reports, report_file)


def cutover(path: str, clusters: Optional[List[str]], report_file: Optional[str],
            timeout_ms: Optional[int] = None) -> int:
    """Every enabled flow into ``clusters`` (all without), one after the other, cut over as
    ``kafka-mirror-maker cutover`` cuts over one; a flow that does not hold stops the rest."""
    from ..cutover.flow import CutoverOptions, cutover as cutover_flow
    from ..dedicated.takeover import take_over
    from ..engine.runner import load_plugins
    from .cutover import answer
    from .verify import show

    options, results = CutoverOptions((timeout_ms or 600000) / 1000.0), []
    try:
        for flow in _enabled_flows(path, clusters, "cut over"):
            take_over(flow)  # a flow Kafka's MirrorMaker 2 ran drains from where it left it
            handler, listener = load_plugins(flow.config)
            results.append(cutover_flow(flow.config, handler, listener, options, flow.source, flow.target))
            if not results[-1].complete:
                break
    except BaseException:
        if results:  # the flows cut over before the failure are reported all the same
            show(results, report_file)
        raise
    return answer(results, report_file)


def _ops_server(settings):
    if settings.metrics_port is None:
        return None

    def start(supervisor):
        from ..dedicated.metrics import DedicatedMetrics
        from ..ops.endpoint import OpsServer

        return OpsServer(settings.metrics_bind, settings.metrics_port, DedicatedMetrics(supervisor),
                         supervisor.readiness).start()
    return start
