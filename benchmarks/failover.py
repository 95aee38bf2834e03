"""FAILOVER: what a consumer group's failover costs, ours against Kafka's MirrorMaker 2 on the
same brokers: the same mm2.properties (one flow, MirrorMaker 2's defaults: the default policy,
offset syncs, checkpoints every second) run by each tool over the same source topic, with groups
committed at random offsets; then each group's checkpoints, read as ``RemoteClusterUtils`` reads
them, against the exact place (the target offset of the first record the group had not read,
the group's own offset here: a new remote topic, partitions kept, no gaps). Counted: the records
the groups would read again and skip, the offset syncs written (records, bytes), and the tool's
CPU seconds until every checkpoint stood still.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict

from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

#: Groups, and how long every checkpoint must stand still to count as the tool's answer.
GROUPS, STILL_S, WAIT_S = 7, 10.0, 300.0


def commit_groups(bootstrap: str, topic: str, ends: Dict[int, int], prefix: str) -> Dict[str, Dict[int, int]]:
    """``GROUPS`` groups, each committed at a random offset of every partition (seeded)."""
    draw = random.Random(11)
    groups = {}
    for number in range(GROUPS):
        group = f"{prefix}-g{number}"
        offsets = {p: draw.randrange(0, end + 1) for p, end in ends.items()}
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[KafkaTopicPartition(topic, p, o) for p, o in offsets.items()],
                            asynchronous=False)
        finally:
            consumer.close()
        groups[group] = offsets
    return groups


def syncs_written(bootstrap: str, syncs_topic: str, topic: str) -> Dict[str, int]:
    """The offset syncs of ``topic`` in ``syncs_topic``: records and bytes (key, value, headers)."""
    from mirror_maker.replication.formats import decode_offset_sync

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-syncs-{time.time_ns()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    records = size = 0
    try:
        consumer.assign([KafkaTopicPartition(syncs_topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                break  # the end (or no such topic)
            if decode_offset_sync(msg.key(), msg.value()).topic == topic:
                records += 1
                size += len(msg.key()) + len(msg.value()) + sum(len(k) + len(v or b"") for k, v in msg.headers() or ())
    finally:
        consumer.close()
    return {"records": records, "bytes": size}


def translated(target: str, groups, alias: str, remote: str) -> Dict[str, Dict[int, int]]:
    from mirror_maker.replication.translate import translate_offsets

    out = {}
    for group in groups:
        try:
            answer = translate_offsets({"bootstrap.servers": target}, group, alias, timeout_s=20)
        except LookupError:
            answer = {}
        out[group] = {tp.partition: o for tp, o in answer.items() if tp.topic == remote}
    return out


def run_tool(command, log: Path, source: str, target: str, topic: str, alias: str, target_alias: str,
             groups: Dict[str, Dict[int, int]], tree_cpu: Callable[[int], tuple]) -> dict:
    """One tool on the flow until every group's checkpoints stood still for STILL_S."""
    remote = f"{alias}.{topic}"
    started = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    last, still_since, answer, cpu = None, None, {}, 0.0
    try:
        while time.monotonic() - started < WAIT_S and process.poll() is None:
            answer = translated(target, groups, alias, remote)
            complete = all(len(answer[g]) == len(groups[g]) for g in groups)
            if complete and answer == last:
                if still_since is not None and time.monotonic() - still_since >= STILL_S:
                    break
                still_since = still_since or time.monotonic()
            else:
                still_since = None
            last = answer
            cpu = sum(tree_cpu(process.pid))
            time.sleep(1.0)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
    placed = sum(len(v) for v in answer.values())
    re_read = sum(max(0, exact - answer[g][p]) for g, offsets in groups.items() for p, exact in offsets.items()
                  if p in answer.get(g, {}))
    skipped = sum(max(0, answer[g][p] - exact) for g, offsets in groups.items() for p, exact in offsets.items()
                  if p in answer.get(g, {}))
    return {"partitions": sum(len(v) for v in groups.values()), "checkpointed": placed, "re_read": re_read,
            "skipped": skipped, "worst_group": max((sum(max(0, o - answer[g].get(p, o)) for p, o in offs.items())
                                                    for g, offs in groups.items()), default=0),
            "syncs": syncs_written(source, f"mm2-offset-syncs.{target_alias}.internal", topic),
            "cpu_s": round(cpu, 1), "seconds": round(time.monotonic() - started, 1),
            "ok": placed == sum(len(v) for v in groups.values())}


def properties(source: str, target: str, topic: str, a: str, b: str) -> Dict[str, object]:
    """One flow a->b of ``topic`` with MirrorMaker 2's defaults for failover, checkpoints every second."""
    props: Dict[str, object] = {
        "clusters": f"{a}, {b}", f"{a}.bootstrap.servers": source, f"{b}.bootstrap.servers": target,
        f"{a}->{b}.enabled": "true", f"{b}->{a}.enabled": "false", f"{a}->{b}.topics": topic,
        f"{a}->{b}.groups": f"{a.lower()}-g.*", "tasks.max": 1, "status.interval.ms": 0,
        "emit.checkpoints.interval.seconds": 1, "refresh.groups.interval.seconds": 1,
        "refresh.topics.interval.seconds": 1, "sync.group.offsets.enabled": "false",
        "emit.heartbeats.enabled": "false",
    }
    for internal in ("replication", "offset-syncs.topic.replication", "checkpoints.topic.replication",
                     "heartbeats.topic.replication", "offset.storage.replication",
                     "status.storage.replication", "config.storage.replication"):
        props[f"{internal}.factor"] = 1
    return props


def failover(brokers, work: Path, root: Path, seed, create_topic, tree_cpu, records: int) -> dict:
    """Both tools on the same source topic and groups (new aliases, so new remote topics)."""
    from tests.brokers.java_mirror_makers import mirror_maker_2

    topic = "failover-s"
    create_topic(brokers.source.bootstrap, topic)
    seed(brokers.source.bootstrap, [topic], 100, records, "none")
    consumer = Consumer({"bootstrap.servers": brokers.source.bootstrap, "group.id": "bench-ends"})
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        ends = {p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=30)[1]
                for p in metadata.partitions}
    finally:
        consumer.close()
    results: Dict[str, dict] = {}
    for tool in ("ours", "mm2"):
        run_id = time.time_ns()
        a, b = f"S{run_id}", f"T{run_id}"
        groups = commit_groups(brokers.source.bootstrap, topic, ends, a.lower())
        command = mirror_maker_2(properties(brokers.source.bootstrap, brokers.target.bootstrap, topic, a, b),
                                 work / f"failover-{tool}")
        if tool == "ours":
            command = [sys.executable, str(root / "bin" / "connect-mirror-maker.py"),
                       str(work / f"failover-{tool}" / "mm2.properties"), "--log.level", "WARN"]
        results[tool] = run_tool(command, work / f"failover-{tool}.log", brokers.source.bootstrap,
                                 brokers.target.bootstrap, topic, a, b, groups, tree_cpu)
        print(f"  failover, {'ours' if tool == 'ours' else 'Kafka MirrorMaker 2'}: {results[tool]}", flush=True)
    return {"records": records, "partitions": len(ends), "groups": GROUPS, "results": results}


def table(row: dict) -> list:
    """The report's lines for the FAILOVER section."""
    lines = ["", f"### Consumer failover: {row['groups']} groups at random offsets of {row['partitions']} partitions "
             f"({row['records']:,} records)", "",
             "| Tool | Partitions checkpointed | Records read again | Records skipped | Worst group | "
             "Offset syncs | Sync bytes | CPU s | Seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for tool, label in (("ours", "connect-mirror-maker (ours)"), ("mm2", "Kafka MirrorMaker 2")):
        r = row["results"].get(tool)
        if r is None:
            continue
        lines.append(f"| {label} | {r['checkpointed']} of {r['partitions']} | {r['re_read']:,} | {r['skipped']:,} | "
                     f"{r['worst_group']:,} | {r['syncs']['records']:,} | {r['syncs']['bytes']:,} | {r['cpu_s']} | "
                     f"{r['seconds']} |")
    return lines
