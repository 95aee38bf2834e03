"""The command line options: Kafka 3.9 MirrorMaker's 14, its aliases, our extensions and Spark's.

Kafka's dotted names are kept verbatim; each gets an explicit Python name because click cannot
derive one from a dotted flag. ``KAFKA_OPTIONS`` and ``EXTENSION_OPTIONS`` drive the help text
(jopt-simple's layout for Kafka's, a separate "Extensions" section for ours).
"""

from __future__ import annotations

import click


def _boolean(ctx, param, value):
    if value is None:
        return None
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise click.BadParameter(f"'{value}' is not true or false", param_hint="--abort.on.send.failure")
    return text == "true"


# (declarations, python name, metavar "Type: description", default shown, click kwargs)
KAFKA_OPTIONS = [
    (("--abort.on.send.failure", "--abort.on.send.fail"), "abort_on_send_failure",
     "String: Stop the entire mirror maker when a send failure occurs", "true",
     dict(default="true", callback=_boolean)),
    (("--consumer.config",), "consumer_config",
     "String: Embedded consumer config for consuming from the source cluster.", None, {}),
    (("--consumer.rebalance.listener",), "rebalance_listener",
     "String: A custom rebalance listener of type ConsumerRebalanceListener", None, {}),
    (("--help",), "show_help", "Print usage information.", None, dict(is_flag=True)),
    (("--include",), "include",
     "String: Java regex (String): List of included topics to mirror.", None, {}),
    (("--message.handler",), "message_handler",
     "String: Message handler which will process every record in-between consumer and producer.",
     None, {}),
    (("--message.handler.args",), "message_handler_args",
     "String: Arguments used by custom message handler for mirror maker.", None, {}),
    (("--new.consumer",), "new_consumer",
     "DEPRECATED Use new consumer in mirror maker (this is the default so this option will be "
     "removed in a future version).", None, dict(is_flag=True)),
    (("--num.streams",), "num_streams", "Integer: Number of threads: Number of consumption streams.",
     "1", dict(type=int, default=1)),
    (("--offset.commit.interval.ms",), "offset_commit_interval_ms",
     "Integer: offset commit interval in millisecond: Offset commit interval in ms.", "60000",
     dict(type=int, default=60000)),
    (("--producer.config",), "producer_config", "String: Embedded producer config.", None, {}),
    (("--rebalance.listener.args", "--consumer.rebalance.listener.args"), "rebalance_listener_args",
     "String: Arguments used by custom rebalance listener for mirror maker consumer.", None, {}),
    (("--version",), "show_version", "Display Kafka version.", None, dict(is_flag=True)),
    (("--whitelist",), "whitelist",
     "String: Java regex (String): DEPRECATED, use --include instead; ignored if --include "
     "specified. List of included topics to mirror.", None, {}),
]

EXTENSION_OPTIONS = [
    (("--log.level",), "log_level",
     "String: DEBUG, INFO, WARN or ERROR (or the MIRROR_MAKER_LOG_LEVEL environment variable).",
     "INFO", {}),
    (("--metrics.port",), "metrics_port",
     "Integer: Serve Prometheus metrics on /metrics, and /healthz and /ready, on this port "
     "(off unless given).", None, dict(type=click.IntRange(0, 65535))),
    (("--metrics.bind",), "metrics_bind", "String: The address the metrics server listens on.",
     "0.0.0.0", dict(default="0.0.0.0")),
    (("--status.interval.ms",), "status_interval_ms",
     "Integer: Log a status line (rates, lag, dropped, partitions) this often; 0 turns it off.",
     "30000", dict(type=click.IntRange(min=0), default=30000)),
    (("--exit.when.caught.up",), "exit_when_caught_up",
     "Stop, after the final flush and commit, once every assigned partition has reached its end; "
     "exit 0 and print a summary (for cron).", None, dict(is_flag=True)),
    (("--use.raw.bytes",), "use_raw_bytes",
     "Shallow mirroring (KIP-712): copy whole record batches as they are (same compression, same "
     "partition numbers) instead of record by record; a handler then decides per batch.", None,
     dict(is_flag=True)),
    (("--exactly.once",), "exactly_once",
     "Exactly-once (KIP-656): each stream commits its records and the source offsets in one "
     "transaction on the target; readers use isolation.level=read_committed.", None, dict(is_flag=True)),
    (("--exactly.once.group",), "exactly_once_group_option",
     "String: The consumer group on the target that holds the source offsets (exactly-once).",
     "the source group.id", {}),
    (("--shutdown.timeout.ms",), "shutdown_timeout_ms",
     "Integer: How long a clean stop may wait for the target to acknowledge queued records "
     "before it exits without committing them.", "30000", dict(type=int, default=30000)),
]

SPARK_OPTIONS = [
    (("--spark",), "spark",
     "Run the streams as tasks of one Spark job (PySpark: pip install "
     "'kafka-mirror-maker[spark]').", None, dict(is_flag=True)),
    (("--spark.master",), "spark_master",
     "String: The Spark master URL (spark://host:port, yarn, k8s://...).",
     "local[<num.streams>]", {}),
    (("--spark.conf",), "spark_conf",
     "String: key=value: A Spark setting; repeat the option for several.", None,
     dict(multiple=True)),
    (("--spark.py.files",), "spark_py_files",
     "String: Comma-separated .py/.zip/.egg files the executors need (plugin modules that only "
     "this machine has are shipped without it).", None, {}),
    (("--spark.max.restarts",), "spark_max_restarts",
     "Integer: How often in a row the driver restarts the job after a worker died or stopped on "
     "its own.", "3",
     dict(type=click.IntRange(min=0), default=3)),
]

ALL_OPTIONS = KAFKA_OPTIONS + EXTENSION_OPTIONS + SPARK_OPTIONS


def apply(command):
    """Decorate ``command`` with every option, in a stable order."""
    for decls, name, description, _default, kwargs in reversed(ALL_OPTIONS):
        command = click.option(*decls, name, help=description, **kwargs)(command)
    return command


def value_options():
    """Options that take a value (a repeated one is an error, as in jopt-simple)."""
    return {decls: decls for decls, _n, _d, _df, kw in ALL_OPTIONS
            if not kw.get("is_flag") and not kw.get("multiple")}
