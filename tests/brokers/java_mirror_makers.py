"""Kafka's own mirror tools, run from Maven jars as their scripts run them: the peers of the
parity tests and of the benchmark.

* MirrorMaker v1 (``kafka.tools.MirrorMaker``, Kafka 3.9.x, the last line that has it), with
  ``kafka-run-class.sh``'s JVM flags and ``config/tools-log4j.properties`` (WARN on stderr).
* MirrorMaker 2 in dedicated mode (``org.apache.kafka.connect.mirror.MirrorMaker``), from
  connect-mirror 4.x, with a properties file written here.
* MirrorMaker 2's own client (``java/MirrorClientCheck.java``), reading what a mirror wrote.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

from .apache_kafka import KAFKA_3_9, MIRROR_MAKER_2, pom_name
from .maven_jars import classpath, java, java_program

#: MirrorMaker 2's own client reading what a mirror wrote (RemoteClusterUtils, heartbeats).
MIRROR_CLIENT_CHECK = Path(__file__).resolve().parent / "java" / "MirrorClientCheck.java"
#: It reads the checkpoints and the heartbeats for up to 30 s each, on a machine that may be busy.
MIRROR_CLIENT_CHECK_TIMEOUT_S = 120

#: What kafka-run-class.sh gives every tool (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS).
RUN_CLASS_FLAGS = ["-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                   "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]


def _write(path: Path, lines: List[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def mirror_maker_v1(args: List[str], work: Path, log_level: str = "WARN") -> List[str]:
    """The command ``kafka-mirror-maker.sh <args>`` runs, with the 3.9 jars."""
    work.mkdir(parents=True, exist_ok=True)
    log4j = _write(work / "tools-log4j.properties", [
        f"log4j.rootLogger={log_level}, stderr",
        "log4j.appender.stderr=org.apache.log4j.ConsoleAppender",
        "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n",
        "log4j.appender.stderr.Target=System.err",
    ])
    return [java(), *RUN_CLASS_FLAGS, f"-Dlog4j.configuration=file:{log4j}",
            "-cp", classpath(pom_name(KAFKA_3_9)), "kafka.tools.MirrorMaker", *args]


def mirror_maker_2_properties(source: str, target: str, topics: str, tasks: int,
                              extra: Optional[Dict[str, object]] = None,
                              aliases=("A", "B")) -> Dict[str, object]:
    """A dedicated-mode configuration for one flow A->B, MirrorMaker v1-like by default:
    topic names kept (IdentityReplicationPolicy), no heartbeats, checkpoints, syncs of
    offsets, configs or ACLs; replication factor 1 for every internal topic. Connect keeps its
    progress in internal topics named after the aliases: new aliases start afresh."""
    a, b = aliases
    props: Dict[str, object] = {
        "clusters": f"{a}, {b}",
        f"{a}.bootstrap.servers": source,
        f"{b}.bootstrap.servers": target,
        f"{a}->{b}.enabled": "true",
        f"{b}->{a}.enabled": "false",
        f"{a}->{b}.topics": topics,
        "tasks.max": tasks,
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "emit.offset-syncs.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "sync.topic.configs.enabled": "false",
        "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": 1,
        "refresh.groups.interval.seconds": 1,
        "replication.factor": 1,
    }
    props.update(extra or {})
    # Replication factor 1 for every internal topic of a feature that is on (MirrorMaker 2 refuses
    # offset-syncs settings while emit.offset-syncs.enabled is false).
    features = {"checkpoints.topic": "emit.checkpoints.enabled", "heartbeats.topic": "emit.heartbeats.enabled",
                "offset-syncs.topic": "emit.offset-syncs.enabled"}
    for internal in ("checkpoints.topic", "heartbeats.topic", "offset-syncs.topic", "offset.storage",
                     "status.storage", "config.storage"):
        if str(props.get(features.get(internal, ""), "true")).lower() == "true":
            props.setdefault(f"{internal}.replication.factor", 1)
    return props


def mirror_maker_2(properties: Dict[str, object], work: Path, log_level: str = "WARN",
                   heap: str = "-Xmx512m") -> List[str]:
    """The command ``connect-mirror-maker.sh mm2.properties`` runs (dedicated mode)."""
    work.mkdir(parents=True, exist_ok=True)
    config = _write(work / "mm2.properties", [f"{k} = {v}" for k, v in properties.items()])
    log4j2 = _write(work / "connect-log4j2.properties", [
        "status = error",
        "appender.stderr.type = Console",
        "appender.stderr.name = stderr",
        "appender.stderr.target = SYSTEM_ERR",
        "appender.stderr.layout.type = PatternLayout",
        "appender.stderr.layout.pattern = [%d] %p %m (%c)%n",
        f"rootLogger.level = {log_level}",
        "rootLogger.appenderRef.stderr.ref = stderr",
    ])
    flags = [heap if f.startswith("-Xmx") else f for f in RUN_CLASS_FLAGS]
    return [java(), *flags, f"-Dlog4j2.configurationFile={log4j2}", "-cp", classpath(MIRROR_MAKER_2),
            "org.apache.kafka.connect.mirror.MirrorMaker", str(config)]


def mirror_client_check(bootstrap: str, alias: str, group: str) -> List[str]:
    """What MirrorMaker 2's own client reads on the cluster at ``bootstrap`` (``MirrorClientCheck``):
    ``offset <topic> <partition> <offset>`` per partition that RemoteClusterUtils.translateOffsets
    gives ``group`` from ``alias``, ``upstream <alias>`` per upstream cluster and
    ``heartbeat <source> <target>`` per pair in the heartbeats topic."""
    return [line for line in _run_mirror_client_check(bootstrap, alias, [group]) if not line.startswith("group ")]


def mirror_client_offsets(bootstrap: str, alias: str, groups: List[str]) -> Dict[str, Dict[str, int]]:
    """RemoteClusterUtils.translateOffsets for each of ``groups`` in one JVM:
    ``{group: {"<topic> <partition>": offset}}``."""
    out: Dict[str, Dict[str, int]] = {}
    current: Optional[Dict[str, int]] = None
    for line in _run_mirror_client_check(bootstrap, alias, groups, heartbeats=False):
        if line.startswith("group "):
            current = out.setdefault(line[len("group "):], {})
        elif line.startswith("offset ") and current is not None:
            topic, partition, offset = line.split()[1:]
            current[f"{topic} {partition}"] = int(offset)
    return out


def _run_mirror_client_check(bootstrap: str, alias: str, groups: List[str], heartbeats: bool = True) -> List[str]:
    command = [*java_program(MIRROR_CLIENT_CHECK, MIRROR_MAKER_2), bootstrap, alias, *groups]
    env = {**os.environ, "MIRROR_CLIENT_CHECK_HEARTBEATS": "1" if heartbeats else "0"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=MIRROR_CLIENT_CHECK_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"MirrorClientCheck on {bootstrap} ({alias}, {groups}) did not end within "
                             f"{MIRROR_CLIENT_CHECK_TIMEOUT_S} s; its output:\n{exc.stdout}\n{exc.stderr}") from None
    assert done.returncode == 0, f"MirrorClientCheck on {bootstrap} exited {done.returncode}:\n{done.stderr[-2000:]}"
    return done.stdout.splitlines()
