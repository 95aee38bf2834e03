"""``connect-mirror-maker``: MirrorMaker 2's dedicated mode, with Kafka's arguments
(``connect-mirror-maker.sh mm2.properties [--clusters A B ...]``, ``MirrorMaker.main``).

Reads and checks the whole file before anything connects (one ERROR line and exit 1 for bad
input), then runs every flow this node takes under one supervisor (``mirror_maker.dedicated``):
exit 143/130 after a clean stop on SIGTERM/SIGINT, 255 after a fatal failure.
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
from ..ops.stop_watchdog import dump_stacks_on_sigusr1
from . import exit_codes
from .command import error_status

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
    p.add_argument("--spark", action="store_true",
                   help="Not available in this mode yet: run a flow on Spark with kafka-mirror-maker --spark.")
    p.add_argument("--version", action="version", version=__version__)
    return p


def main(argv: Optional[List[str]] = None) -> None:
    dump_stacks_on_sigusr1()
    sys.exit(invoke(list(sys.argv[1:] if argv is None else argv)))


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
        if args.spark:
            raise ConfigError("--spark is not available in the dedicated mode yet: run a flow on Spark with "
                              "kafka-mirror-maker --spark and its MirrorMaker 2 options")
        return run(args.config, args.clusters)
    except (KeyboardInterrupt, Exception) as exc:
        return error_status(exc)


def run(path: str, clusters: Optional[List[str]]) -> int:
    from ..dedicated.flows import plan_flows, run_settings
    from ..dedicated.mm2_file import read_mm2_file
    from ..dedicated.supervisor import Supervisor

    log.info("Kafka MirrorMaker initializing ...")
    file = read_mm2_file(path)
    flows = plan_flows(file, clusters)
    settings = run_settings(file)
    log.info("Targeting clusters %s", ", ".join(sorted(clusters or file.clusters)))
    return Supervisor(flows, settings, server_factory=_ops_server(settings)).run()


def _ops_server(settings):
    if settings.metrics_port is None:
        return None

    def start(supervisor):
        from ..dedicated.metrics import DedicatedMetrics
        from ..ops.endpoint import OpsServer

        return OpsServer(settings.metrics_bind, settings.metrics_port, DedicatedMetrics(supervisor),
                         supervisor.readiness).start()
    return start
