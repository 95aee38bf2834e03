"""``kafka-mirror-maker translate-offsets``: where a consumer group resumes on the target cluster,
read from the mirror's checkpoints (MirrorMaker 2's format), one ``topic partition offset`` line
per partition. Bad input is one line and exit 1, as for the mirror."""

from __future__ import annotations

import click

from ..config import spec
from ..errors import ConfigError
from .options import click_option


def _option(name: str, **overrides):
    return click_option(spec.BY_NAME[name], **overrides)


@click.command("translate-offsets", short_help="Where a consumer group resumes on the target cluster.")
@click.option("--config", "config_file", required=True, metavar="FILE",
              help="A Java properties file for a client of the target cluster.")
@click.option("--group", required=True, help="The consumer group to translate.")
@_option("source.cluster.alias", required=True, help="The source cluster's alias, as the mirror named it.")
@_option("replication.policy.separator", default=".", show_default=True)
@click.option("--timeout.ms", "timeout_ms", type=click.IntRange(min=1), default=30000, show_default=True,
              help="How long to read the checkpoints for.")
@_option("log.level")
def command(config_file: str, group: str, source_alias: str, separator: str, timeout_ms: int,
            log_level) -> int:
    """Where GROUP resumes on the target cluster, from the checkpoints the mirror wrote there with
    --emit.checkpoints.enabled (MirrorMaker 2's RemoteClusterUtils.translateOffsets reads the same)."""
    import confluent_kafka

    from ..config.client_conf import build_consumer_conf
    from ..config.properties import load_properties
    from ..errors import ClientFailed
    from ..ops.log import configure_logging, resolve_level
    from ..replication.translate import translate_offsets

    configure_logging(resolve_level(log_level))
    for name, value in (("source.cluster.alias", source_alias), ("replication.policy.separator", separator)):
        problem = spec.BY_NAME[name].problem(value)
        if problem:
            raise ConfigError(f"--{name}: {problem}")
    props = load_properties(config_file, "--config")
    props.setdefault("group.id", f"mirror-translate-{group}")
    conf, _engine = build_consumer_conf(props, f"--config {config_file}")
    try:
        offsets = translate_offsets(conf, group, source_alias, separator, timeout_ms / 1000.0)
    except (LookupError, TimeoutError) as exc:
        raise ConfigError(str(exc)) from None
    except confluent_kafka.KafkaException as exc:
        raise ClientFailed(f"cannot read the checkpoints on the target: {exc.args[0].str()}") from None
    if not offsets:
        raise ConfigError(f"no checkpoints for group {group} from {source_alias}")
    for tp, offset in sorted(offsets.items()):
        click.echo(f"{tp.topic} {tp.partition} {offset}")
    return 0
