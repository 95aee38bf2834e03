"""MirrorMaker 2's dedicated mode, ``connect-mirror-maker mm2.properties``, on three Apache Kafka
clusters A, B and C started for this module (an authorizer for the ACLs, SASL users for a login
that fails): flows A->B, B->A and A->C from one file with per-flow overrides, then the same file
run by Kafka's own MirrorMaker 2 (connect-mirror 4.3.1) on the same clusters, emptied in between;
two nodes sharing a flow, one of them killed; ``--clusters``; a flow that fails while the others
go on; bad input. The clusters are this module's own, so it is skipped on your own clusters.

Cost: about 2 minutes for the module on this machine: the three clusters start together once
(about 25 s), Kafka's MirrorMaker 2 and the restart before it about 50 s, the flow that cannot log
in about 20 s (the time the engine takes to notice a refused login at the target).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ConfigResource,
                                   ConfigSource, ResourcePatternType, ResourceType)

from mirror_maker.embedded import free_port
from mirror_maker.replication.formats import decode_heartbeat
from mirror_maker.replication.translate import translate_offsets

from ..brokers.apache_kafka import FORMAT_TIMEOUT_S, KAFKA_4, READY_TIMEOUT_S, start_budget_s
from ..brokers.java_mirror_makers import MIRROR_CLIENT_CHECK_TIMEOUT_S
from ..budgets import setup_budget
from .conftest import SASL_USERS
from .harness import (ROOT, BackgroundProducer, Cluster, MirrorProcess, group_settings, make_records, unique, values,
                      wait_until)

pytestmark = [
    pytest.mark.needs_own_brokers("three clusters of its own, restarted between ours and Kafka's MirrorMaker 2"),
    pytest.mark.needs_kafka_feature("ACLs, topic configs and MirrorMaker 2 on Apache Kafka"),
]

BIN = ROOT / "bin" / "connect-mirror-maker.py"
#: Settings every file of this module has: single-node clusters, and intervals short enough for a
#: test (Kafka's MirrorMaker 2 reads the same file, Connect's internal topics included).
FAST = {
    "replication.factor": 1, "offset-syncs.topic.replication.factor": 1, "checkpoints.topic.replication.factor": 1,
    "heartbeats.topic.replication.factor": 1, "offset.storage.replication.factor": 1,
    "status.storage.replication.factor": 1, "config.storage.replication.factor": 1,
    "refresh.topics.interval.seconds": 1, "refresh.groups.interval.seconds": 1,
    "sync.topic.configs.interval.seconds": 1, "sync.topic.acls.interval.seconds": 1,
    "emit.checkpoints.interval.seconds": 1, "sync.group.offsets.interval.seconds": 1,
    "status.interval.ms": 1000,
}


#: What the scenario's steps may take on a cold, loaded machine: seeding it (topics, ACLs, a
#: group that reads 600 records), ours and then Kafka's MirrorMaker 2 mirroring and syncing it,
#: one look at the clusters past a wait's deadline (three topics read, 20 s each), the outcome
#: (MirrorMaker 2's client on three clusters, and the topics' configs and ACLs), a stop.
SEED_S = 60
MIRRORED_S, SYNCED_S = 120, 90
THEIRS_MIRRORED_S, THEIRS_SYNCED_S = 240, 180
LOOK_S = 60
OUTCOME_S = 3 * MIRROR_CLIENT_CHECK_TIMEOUT_S + 60
STOP_S = 60
#: ``--verify`` on the file once ours stopped: three flows, each read on both of its clusters.
VERIFY_S = 120
#: ``--cutover`` then: three drains (a group join each), the verify, the placements.
CUTOVER_S = 240
OURS_ABC_S = SEED_S + MIRRORED_S + SYNCED_S + 2 * LOOK_S + OUTCOME_S + 30 + STOP_S + VERIFY_S + CUTOVER_S
#: Emptied clusters, the scenario under Kafka's MirrorMaker 2, then ours taking over and the reads,
#: then Kafka's MirrorMaker 2 taking the flows back.
THEIRS_S = (FORMAT_TIMEOUT_S + READY_TIMEOUT_S + SEED_S + THEIRS_MIRRORED_S + THEIRS_SYNCED_S + 2 * LOOK_S
            + OUTCOME_S + STOP_S + SEED_S + 120 + STOP_S + 60 + SEED_S + THEIRS_MIRRORED_S + STOP_S + 60)


@pytest.fixture(scope="module")
@setup_budget(start_budget_s(KAFKA_4))
def abc(tmp_path_factory) -> Dict[str, Cluster]:
    from ..brokers.apache_kafka import KafkaCluster, Security, start_together

    work = tmp_path_factory.mktemp("mm2-clusters")
    security = Security(users=SASL_USERS, super_users=["admin"])
    brokers = [KafkaCluster(name, work, KAFKA_4, security=security) for name in ("A", "B", "C")]
    start_together(brokers)
    try:
        yield {b.name: Cluster(b.name, b.bootstrap, b) for b in brokers}
    finally:
        for broker in brokers:
            broker.stop()


def write_mm2(path: Path, aliases: Dict[str, Cluster], extra: Dict[str, object]) -> Path:
    """An mm2.properties for ``aliases`` (alias -> cluster): FAST, short group timeouts, and ``extra``."""
    props: Dict[str, object] = {"clusters": ", ".join(aliases)}
    for alias, cluster in aliases.items():
        props[f"{alias}.bootstrap.servers"] = cluster.bootstrap
        props[f"{alias}.offset.flush.interval.ms"] = 1000
        for key, value in group_settings().items():
            props[f"{alias}.consumer.{key}"] = value
    props.update(FAST)
    props.update(extra)
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return path


def ours(path: Path, log: Path, *args: str) -> MirrorProcess:
    return MirrorProcess([], log, command=[sys.executable, str(BIN), str(path), *args])


def topic_configs(cluster: Cluster, topic: str) -> Dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = cluster.admin().describe_configs([resource], request_timeout=30)[resource].result()
    return {name: e.value for name, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def topic_acls(cluster: Cluster, topic: str):
    found = cluster.admin().describe_acls(AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
        AclPermissionType.ANY), request_timeout=30).result()
    return sorted((b.principal, b.operation.name, b.permission_type.name) for b in found)


def heartbeat_pairs(cluster: Cluster, topic: str = "heartbeats"):
    if not cluster.topic_exists(topic):
        return set()
    return {(hb.source_alias, hb.target_alias) for hb in
            (decode_heartbeat(rec.key, rec.value) for _p, _o, rec in cluster.read_all(topic, timeout_s=30))}


def mirror_maker_2_client(cluster: Cluster, alias: str, group: str) -> List[str]:
    """RemoteClusterUtils (translateOffsets, upstreamClusters) and the heartbeats, read by
    MirrorMaker 2's own client, sorted."""
    from ..brokers.java_mirror_makers import mirror_client_check

    return sorted(mirror_client_check(cluster.bootstrap, alias, group))


# -- the A, B, C scenario: the same for ours and for Kafka's MirrorMaker 2 ---------------------

ALIASES = ("A", "B", "C")
GROUP = "app"
ORDERS = make_records(1000, "orders")
ACLS = (("reader", AclOperation.READ, AclPermissionType.ALLOW), ("owner", AclOperation.ALL, AclPermissionType.ALLOW),
        ("writer", AclOperation.WRITE, AclPermissionType.ALLOW), ("banned", AclOperation.READ, AclPermissionType.DENY))
#: The scenario's topics: its own, remote ones, and MirrorMaker 2's internal topics of A, B and C
#: (not Connect's own, Kafka's MirrorMaker 2's, nor our elections': each tool's internals; nor
#: what other tests of the module leave, under other aliases).
SCENARIO_TOPICS = re.compile(r"orders|orders-b|payments|heartbeats|[ABC]\..*|mm2-offset-syncs\.[ABC]\.internal")
SCENARIO_LINE = re.compile(r"offset .*|upstream [ABC]|heartbeat [ABC] [ABC]")


#: Every series Strimzi's MirrorMaker 2 Grafana dashboard charts (its
#: examples/metrics/grafana-dashboards/strimzi-kafka-mirror-maker-2.json) but its JVM and container
#: panels, with the label matchers its expressions use (regexes, anchored as PromQL's =~); the
#: strimzi_io_* and kubernetes_* labels come from Prometheus' Kubernetes scrape, not the exporter.
STRIMZI_DASHBOARD = (
    ("kafka_connect_worker_connector_count", {}),
    ("kafka_connect_worker_task_count", {}),
    *((f"kafka_connect_mirror_mirrorsourceconnector_{name}", {}) for name in (
        "record_rate", "byte_rate", *(f"{window}{suffix}" for window in ("record_age_ms", "replication_latency_ms")
                                      for suffix in ("", "_avg", "_min", "_max")))),
    ("kafka_consumer_fetch_manager_records_lag", {"clientid": '.*replication-consumer"'}),
    ("kafka_consumer_incoming_byte_total", {}),
    ("kafka_producer_outgoing_byte_total", {}),
    ("kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms", {}),
    ("kafka_producer_buffer_available_bytes", {"clientid": '".*SourceConnector-[0-9]+"'}),
    ("kafka_connect_connector_task_offset_commit_avg_time_ms", {"connector": '".*SourceConnector"', "task": "[0-9]+"}),
    ("kafka_connect_source_task_source_record_active_count", {"connector": '".*SourceConnector"'}),
    ("kafka_connect_coordinator_assigned_connectors", {}),
    ("kafka_connect_worker_rebalance_rebalancing", {}),
    ("kafka_connect_coordinator_assigned_tasks", {}),
)


def dashboard_gaps(metrics_text: str) -> List[str]:
    """The dashboard's series that ``/metrics`` has no sample for."""
    from prometheus_client.parser import text_string_to_metric_families

    samples = [sample for family in text_string_to_metric_families(metrics_text) for sample in family.samples]
    return [f"{name}{matchers or ''}" for name, matchers in STRIMZI_DASHBOARD
            if not any(sample.name == name and all(re.fullmatch(pattern, sample.labels.get(label, ""))
                                                   for label, pattern in matchers.items()) for sample in samples)]


def scenario_file(tmp_path: Path, abc: Dict[str, Cluster]) -> Path:
    return write_mm2(tmp_path / "mm2.properties", {alias: abc[alias] for alias in ALIASES}, extra={
        "A->B.enabled": "true", "B->A.enabled": "true", "A->C.enabled": "true",
        "topics": "orders.*", "A->C.topics": "payments.*",
        "tasks.max": 2, "A->C.tasks.max": 1,
        "A->B.sync.group.offsets.enabled": "true",
        "metrics.port": free_port(),
    })


def seed_scenario(abc: Dict[str, Cluster]) -> List[tuple]:
    """On A: orders (2 partitions, configs and ACLs, DENY included), payments, and a group that read
    600 orders; on B: orders-b. Returns what the group read."""
    from .test_consumer_failover import read_and_commit

    a, b = abc["A"], abc["B"]
    a.create_topic(name="orders", partitions=2, config={"retention.ms": "12345678", "max.message.bytes": "500000",
                                                        "min.insync.replicas": "1"})
    a.create_topic(name="payments", partitions=1)
    b.create_topic(name="orders-b", partitions=1)
    for future in a.admin().create_acls([AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                                                    f"User:{user}", "*", operation, permission)
                                         for user, operation, permission in ACLS], request_timeout=30).values():
        future.result()
    a.seed("orders", ORDERS)
    a.seed("payments", make_records(50, "payments"))
    b.seed("orders-b", make_records(100, "orders-b"))
    return read_and_commit(a, GROUP, "orders", 600)


@dataclass
class Outcome:
    topics: Dict[str, List[str]]
    partitions: Dict[str, int]
    configs: Dict[str, Dict[str, str]]
    acls: Dict[str, list]
    #: MirrorClientCheck's lines on each cluster (checkpoints of the group, upstream clusters, heartbeats)
    client: Dict[str, List[str]]
    synced: Dict[int, int]
    log: str = ""
    metrics: str = ""
    extra: dict = field(default_factory=dict)


def _without_offsets(client: Dict[str, List[str]]) -> Dict[str, List[str]]:
    """MirrorClientCheck's lines with each checkpoint's offset left out."""
    return {alias: [re.sub(r"^(offset \S+ \d+) \d+$", r"\1", line) for line in lines]
            for alias, lines in client.items()}


def mirrored(abc) -> Dict[str, bool]:
    """Each flow's remote topic, with its partitions and every record (at least once: a rebalance
    at the start, when the heartbeats topics appear, may mirror a partition's first records again)."""
    a, b, c = abc["A"], abc["B"], abc["C"]

    def every(cluster, topic, partitions, expected) -> bool:
        return (cluster.partitions(topic) == partitions
                and {rec.value for _p, _o, rec in cluster.read_all(topic, timeout_s=20)} >= expected)

    return {"A.orders on B": every(b, "A.orders", 2, {r.value for r in ORDERS}),
            "A.payments on C": every(c, "A.payments", 1, {r.value for r in make_records(50, "payments")}),
            "B.orders-b on A": every(a, "B.orders-b", 1, {r.value for r in make_records(100, "orders-b")})}


def synced(abc) -> Dict[str, bool]:
    """The configs, ACLs, synced group offsets, heartbeats and checkpoints of the scenario."""
    a, b, c = abc["A"], abc["B"], abc["C"]
    return {"configs of A.orders": topic_configs(b, "A.orders").get("retention.ms") == "12345678",
            "ACLs of A.orders": len(topic_acls(b, "A.orders")) == 3,
            "the group's offsets on B": len(b.committed(GROUP, "A.orders")) == 2,
            "heartbeats on A": heartbeat_pairs(a) >= {("B", "A"), ("C", "A")},
            "heartbeats on B": heartbeat_pairs(b) >= {("A", "B"), ("C", "B")},
            "heartbeats on C": heartbeat_pairs(c) >= {("A", "C"), ("B", "C")},
            "remote heartbeats": (b.topic_exists("A.heartbeats") and a.topic_exists("B.heartbeats")
                                  and c.topic_exists("A.heartbeats")),
            "checkpoints on C": c.topic_exists("A.checkpoints.internal")}


def wait_for_all(checks: Callable[[], Dict[str, bool]], timeout_s: float, what: str, mirror: MirrorProcess) -> None:
    """Until every check holds; at the deadline, the checks that do not, and the mirror's log."""
    last: Dict[str, bool] = {}

    def holds() -> bool:
        last.clear()
        last.update(checks())
        return all(last.values())

    wait_until(holds, timeout_s, what, step_s=1, evidence=lambda: (
        f"not yet: {', '.join(name for name, ok in last.items() if not ok)}\n{mirror.log_tail()}"))


def outcome(abc: Dict[str, Cluster]) -> Outcome:
    topics = {alias: sorted(t for t in abc[alias].admin().list_topics(timeout=10).topics
                            if SCENARIO_TOPICS.fullmatch(t)) for alias in ALIASES}
    remote = [(alias, t) for alias in ALIASES for t in topics[alias] if re.match(r"[ABC]\.(orders|payments)", t)]
    return Outcome(
        topics=topics,
        partitions={f"{alias}:{t}": abc[alias].partitions(t) for alias, t in remote},
        configs={f"{alias}:{t}": topic_configs(abc[alias], t) for alias, t in remote},
        acls={f"{alias}:{t}": topic_acls(abc[alias], t) for alias, t in remote},
        client={alias: [line for line in mirror_maker_2_client(abc[alias], upstream, GROUP)
                        if SCENARIO_LINE.fullmatch(line)] for alias, upstream in (("A", "B"), ("B", "A"), ("C", "A"))},
        synced=abc["B"].committed(GROUP, "A.orders"))


@pytest.fixture(scope="module")
@setup_budget(OURS_ABC_S)
def ours_abc(abc, tmp_path_factory):
    """Ours on the scenario, once for the module: what it did, and its log and metrics."""
    tmp_path = tmp_path_factory.mktemp("ours-abc")
    read_on_a = seed_scenario(abc)
    path = scenario_file(tmp_path, abc)
    port = int(re.search(r"metrics.port = (\d+)", path.read_text()).group(1))
    mirror = ours(path, tmp_path / "ours.log")
    try:
        wait_for_all(lambda: mirrored(abc), MIRRORED_S, "every flow mirrored", mirror)
        wait_for_all(lambda: synced(abc), SYNCED_S, "configs, ACLs, checkpoints and heartbeats", mirror)
        result = outcome(abc)
        result.metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        result.extra["ready"] = urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=10).status
        result.extra["translated"] = translate_offsets({"bootstrap.servers": abc["B"].bootstrap}, GROUP, "A")
        result.extra["read_on_a"] = read_on_a
    finally:
        status = mirror.stop(timeout_s=STOP_S)
    result.log = mirror.log()
    result.extra["status"] = status
    report = tmp_path / "verify.json"
    done = subprocess.run([sys.executable, str(BIN), str(path), "--verify", "--report", str(report)],
                          capture_output=True, text=True, timeout=VERIFY_S)
    result.extra["verify"] = (done.returncode, done.stdout + done.stderr,
                              json.loads(report.read_text()) if report.exists() else None)
    report = tmp_path / "cutover.json"
    done = subprocess.run([sys.executable, str(BIN), str(path), "--cutover", "--report", str(report),
                           "--timeout.ms", str(CUTOVER_S * 1000 // 4)], capture_output=True, text=True,
                          timeout=CUTOVER_S)
    result.extra["cutover"] = (done.returncode, done.stdout + done.stderr,
                               json.loads(report.read_text()) if report.exists() else None,
                               abc["B"].committed(GROUP, "A.orders"))
    return result


def test_three_clusters_from_one_file(ours_abc, abc):
    from .test_consumer_failover import read_from_committed

    result = ours_abc
    assert result.extra["status"] == 143, result.log[-3000:]
    b = abc["B"]
    # Named by the default policy; per-flow overrides: A->C mirrors payments only.
    assert "A.orders" in result.topics["B"] and "A.payments" not in result.topics["B"]
    assert "A.payments" in result.topics["C"] and "A.orders" not in result.topics["C"]
    assert "B.orders-b" in result.topics["A"]
    # A->B and B->A at once: nothing comes back; each record there, at most once more (a rebalance
    # at the start, when the heartbeats topics appear, may mirror a partition's first stretch again).
    assert "B.A.orders" not in result.topics["A"] and "A.B.orders-b" not in result.topics["B"]
    counts = Counter(rec.value for _p, _o, rec in b.read_all("A.orders"))
    assert set(counts) == {r.value for r in ORDERS} and max(counts.values()) <= 2, counts.most_common(3)
    # Partitions kept, configs and ACLs synced (MirrorMaker 2's exclusions; DENY kept, ALL as READ, no WRITE).
    assert result.partitions["B:A.orders"] == 2
    assert {p for p, _o, _r in b.read_all("A.orders")} == {0, 1}
    assert result.configs["B:A.orders"] == {"retention.ms": "12345678", "max.message.bytes": "500000"}
    assert result.acls["B:A.orders"] == [("User:banned", "READ", "DENY"), ("User:owner", "READ", "ALLOW"),
                                         ("User:reader", "READ", "ALLOW")]
    # The group fails over from A to B: the checkpoints translate its offsets (ours and MirrorMaker 2's
    # client agree), A->B synced them, and it resumes on B missing nothing.
    committed = result.synced
    assert {tp.partition: offset for tp, offset in result.extra["translated"].items()} == committed
    assert sorted(f"offset A.orders {p} {o}" for p, o in committed.items()) == \
        [line for line in result.client["B"] if line.startswith("offset")]
    on_b = read_from_committed(b, GROUP, "A.orders")
    assert {v for *_x, v in result.extra["read_on_a"]} | {v for *_x, v in on_b} == {r.value for r in ORDERS}
    # Heartbeats: every pair, as MirrorMaker 2's herders write them, upstream clusters found by
    # RemoteClusterUtils from the mirrored heartbeats topics.
    assert "heartbeat A B" in result.client["B"] and "heartbeat C B" in result.client["B"]
    assert "upstream A" in result.client["B"] and "upstream B" in result.client["A"]
    # One process, one log line per flow start, and no loop of failures.
    assert "starting: 3 flows (A->B, A->C, B->A), heartbeats only for B->C, C->A, C->B" in result.log
    assert "This flow failed" not in result.log
    assert re.search(r"INFO Status A->C: .* partitions assigned", result.log)
    assert "INFO [A->C] This node now runs the syncs, checkpoints and heartbeats of A->C" in result.log
    # MirrorMaker 2's metric names as Strimzi's dashboard reads them, beside ours.
    metrics = result.metrics
    assert re.search(r'kafka_connect_mirror_mirrorsourceconnector_record_count\{partition="0",source="A",'
                     r'target="B",topic="A.orders"\} \d+', metrics), metrics[:2000]
    assert re.search(r'kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms\{group="app",'
                     r'partition="\d+",source="A",target="B",topic="A.orders"\}', metrics)  # the remote topic
    for name in ("kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_avg",
                 "kafka_connect_mirror_mirrorsourceconnector_record_age_ms_max",
                 "kafka_connect_mirror_mirrorsourceconnector_byte_rate",
                 'kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms{group="app"',
                 "kafka_connect_worker_task_count 5.0", 'mirrormaker_heartbeats_total{source="C",target="A"}',
                 'mirrormaker_checkpoints_total{source="A",target="B"}', "process_cpu_seconds_total"):
        assert name in metrics, name
    assert not dashboard_gaps(metrics), dashboard_gaps(metrics)  # each panel of Strimzi's dashboard has its series
    assert result.extra["ready"] == 200
    # --verify on the same file: every flow's target holds every record of its source.
    status, printed, report = result.extra["verify"]
    assert status == 0 and report is not None, printed
    assert {(flow["source"], flow["target"]) for flow in report["flows"]} == {("A", "B"), ("A", "C"), ("B", "A")}
    rows = {(row["target_topic"], row["partition"]): row for flow in report["flows"] for row in flow["rows"]}
    assert set(rows) == {("A.orders", 0), ("A.orders", 1), ("A.payments", 0), ("B.orders-b", 0)}, printed
    assert sum(rows["A.orders", p]["source_records"] for p in (0, 1)) == len(ORDERS)
    assert all(row["method"] == "in order" and row["status"] == "ok" for row in rows.values()), printed
    # --cutover on the same file: every flow drained and verified, the group placed on B where
    # the checkpoints and the synced offsets already had it.
    status, printed, report, placed = result.extra["cutover"]
    assert status == 0 and report is not None, printed[-4000:]
    assert [flow["complete"] for flow in report["flows"]] == [True, True, True], printed[-4000:]
    assert {(g["group"], g["target_topic"], g["partition"], g["target_offset"]) for flow in report["flows"]
            for g in flow["groups"]} == {(GROUP, "A.orders", p, o) for p, o in committed.items()}
    assert placed == committed


def assigned(log: str, flow: str) -> int:
    """The partitions a node's last status line of ``flow`` says it has."""
    found = re.findall(rf"Status {re.escape(flow)}: .*?, (\d+) partitions assigned", log)
    return int(found[-1]) if found else 0


def group_assignment(cluster: Cluster, group: str) -> list:
    described = cluster.admin().describe_consumer_groups([group], request_timeout=30)[group].result()
    return [(tp.topic, tp.partition) for member in described.members
            for tp in member.assignment.topic_partitions]


def leads(log: str, flow: str) -> bool:
    """Whether a node's log says it runs the flow's singletons now."""
    events = re.findall(rf"This node (now runs|no longer runs) the syncs, checkpoints and heartbeats of "
                        rf"{re.escape(flow)}\b", log)
    return bool(events) and events[-1] == "now runs"


EAST_WEST_ELECTED = "This node now runs the syncs, checkpoints and heartbeats of east->west"


def east_west_flow(abc, tmp_path: Path, name: str, **extra):
    """A file with one flow, A (east) -> B (west), of a new 4-partition topic, tasks.max 2:
    (east, west, topic, file)."""
    east, west = abc["A"], abc["B"]
    topic = east.create_topic(name=unique(name), partitions=4)
    path = write_mm2(tmp_path / "mm2.properties", {"east": east, "west": west}, extra={
        "east->west.enabled": "true", "topics": topic, "tasks.max": 2,
        "west->east.emit.heartbeats.enabled": "false", **extra})
    return east, west, topic, path


def test_two_nodes_share_a_flow_and_one_killed_leaves_the_other_doing_all_of_it(abc, tmp_path):
    east, west, topic, path = east_west_flow(abc, tmp_path, "shared")
    producer = BackgroundProducer(east, topic, rate=300).start()
    nodes = [ours(path, tmp_path / "first.log")]
    elected = EAST_WEST_ELECTED
    try:
        nodes[0].wait_for_log(elected, 60)
        nodes.append(ours(path, tmp_path / "second.log"))
        # Both nodes' streams share the flow's group, and its partitions.
        wait_until(lambda: assigned(nodes[0].log(), "east->west") and assigned(nodes[1].log(), "east->west")
                   and {p for t, p in group_assignment(east, "mm2-east->west") if t == topic} == {0, 1, 2, 3},
                   60, "the partitions shared by both nodes")
        # The singletons run on one node only: the first, which a node that joins leaves them to.
        assert leads(nodes[0].log(), "east->west") and elected not in nodes[1].log()
        nodes[0].kill()
        killed_at = time.time() * 1000
        nodes[1].wait_for_log(elected, 60)
        wait_until(lambda: len(group_assignment(east, "mm2-east->west")) >= 4 and
                   {p for t, p in group_assignment(east, "mm2-east->west") if t == topic} == {0, 1, 2, 3}, 60,
                   "every partition on the node left")
        wait_until(lambda: any(hb.source_alias == "east" and hb.timestamp_ms > killed_at
                               for hb in (decode_heartbeat(r.key, r.value) for _p, _o, r in
                                          west.read_all("heartbeats", timeout_s=30))), 60,
                   "a heartbeat from the node left")
        acked = producer.stop()
        west.read_values(f"east.{topic}", acked)  # nothing lost
    finally:
        producer.stop()
        statuses = [node.stop() for node in nodes[1:]]
        nodes[0].kill()
    assert statuses == [143], nodes[1].log()[-3000:]


def test_an_exactly_once_flow_runs_on_one_node_and_moves_when_it_is_killed(abc, tmp_path):
    """Its shards' transactional ids are the same on every node: the second node stands by, and
    takes the flow over when the first is killed; read_committed, every record once."""
    from collections import Counter

    east, west, topic, path = east_west_flow(abc, tmp_path, "eos-shared", **{
        "west.exactly.once.source.support": "enabled", "east.consumer.session.timeout.ms": 6000,
        "west.consumer.session.timeout.ms": 6000})
    producer = BackgroundProducer(east, topic, rate=300).start()
    nodes = [ours(path, tmp_path / "first.log")]
    elected = EAST_WEST_ELECTED
    try:
        nodes[0].wait_for_log(elected, 60)
        nodes.append(ours(path, tmp_path / "second.log"))
        nodes[1].wait_for_log("standing by", 60)
        # (the heartbeats topics too: MirrorMaker 2 always mirrors them)
        wait_until(lambda: assigned(nodes[0].log(), "east->west") >= 4, 60, "every partition on the first node")
        assert "Exactly-once shard" not in nodes[1].log()
        nodes[0].kill()
        nodes[1].wait_for_log(elected, 60)
        nodes[1].wait_for_log("Exactly-once shard", 30)
        acked = producer.stop()
        west.read_values(f"east.{topic}", acked)  # read_committed: every acknowledged record is there
        rows = west.read_all(f"east.{topic}", timeout_s=60)
        twice = {value: n for value, n in Counter(values(rows)).items() if n > 1}
        assert not twice, f"{len(twice)} records twice, e.g. {list(twice.items())[:3]}"
    finally:
        producer.stop()
        statuses = [node.stop() for node in nodes[1:]]
        nodes[0].kill()
    assert statuses == [143], nodes[1].log()[-3000:]
    assert " ERROR " not in nodes[1].log()


def test_clusters_option_and_a_failing_flow_retried_while_the_others_go_on(abc, tmp_path):
    """--clusters y z runs only the flows into y and z; x->z cannot log in (a wrong password): it
    is retried with a growing backoff while x->y mirrors, and the stop is still clean (143)."""
    x, y, z = abc["A"], abc["B"], abc["C"]
    prefix = unique("retried")
    on_x, on_y = x.create_topic(name=f"{prefix}-x"), y.create_topic(name=f"{prefix}-y")
    records = make_records(50)
    x.seed(on_x, records)
    y.seed(on_y, make_records(5))
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="wrong";'
    path = write_mm2(tmp_path / "mm2.properties", {"x": x, "y": y, "z": z}, extra={
        "x->y.enabled": "true", "x->z.enabled": "true", "y->x.enabled": "true", "topics": f"{prefix}.*",
        "x->z.emit.offset-syncs.enabled": "false",  # its assignment would wait 10 s more for the target
        "emit.heartbeats.enabled": "false", "z.bootstrap.servers": z.broker.sasl_bootstrap,
        "z.security.protocol": "SASL_PLAINTEXT", "z.sasl.mechanism": "SCRAM-SHA-256", "z.sasl.jaas.config": jaas,
        "consumer.poll.timeout.ms": 1000})
    node = ours(path, tmp_path / "node.log", "--clusters", "y", "z")
    try:
        y.read_values(f"x.{on_x}", [r.value for r in records])
        wait_until(lambda: "starts again in 1 s (restart 1)" in node.log(), 120, "x->z failed and started again")
        more = make_records(50, "more")
        x.seed(on_x, more)  # after x->z failed: x->y goes on
        y.read_values(f"x.{on_x}", [r.value for r in more])
        assert "starting: 2 flows (x->y, x->z)" in node.log()
        assert not x.topic_exists(f"y.{on_y}")  # y->x runs on the nodes given --clusters x
    finally:
        status = node.stop()
    log = node.log()
    assert status == 143, log[-3000:]
    assert re.search(r"WARN \[x->z\] This flow failed: authentication failed with the target cluster .*"
                     r"starts again in 1 s \(restart 1\)", log), log[-3000:]
    assert len([line for line in log.splitlines() if "consumer.poll.timeout.ms" in line]) == 1
    assert "wrong" not in log  # the password is never logged


def test_a_bad_file_and_an_unknown_alias_are_one_line_and_exit_1(tmp_path):
    for name, text, message in (
            ("malformed", "clusters = A\nA.bootstrap.servers = x:1\nbad = \\u00zz\n", "malformed properties"),
            ("alias", "clusters = A, B\nA.bootstrap.servers = x:1\nB.bootstrap.servers = y:1\nA->C.enabled = true\n",
             "A->C.enabled: not a flow between two clusters listed in clusters"),
            ("filter", "clusters = A, B\nA.bootstrap.servers = x:1\nB.bootstrap.servers = y:1\nA->B.enabled = true\n"
                       "topic.filter.class = com.example.TopicFilter\n",
             "topic.filter.class = com.example.TopicFilter: a Java TopicFilter cannot run here; use topics and "
             "topics.exclude")):
        path = tmp_path / f"{name}.properties"
        path.write_text(text)
        done = subprocess.run([sys.executable, str(BIN), str(path)], capture_output=True, text=True, timeout=60)
        errors = [line for line in done.stderr.splitlines() if "ERROR" in line]
        assert done.returncode == 1 and len(errors) == 1 and message in errors[0], done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.skipif(__import__("shutil").which("java") is None, reason="Kafka's MirrorMaker 2 needs Java")
@pytest.mark.timeout(THEIRS_S)
def test_kafka_mirror_maker_2_on_the_same_file_gives_the_same(ours_abc, abc, tmp_path):
    """Last in this module: it empties the clusters (formatted afresh, on the same ports, so the
    same file reaches them), seeds the same scenario and runs Kafka's MirrorMaker 2 on it."""
    from ..brokers.apache_kafka import MIRROR_MAKER_2, restart_together
    from ..brokers.java_mirror_makers import RUN_CLASS_FLAGS
    from ..brokers.maven_jars import classpath, java

    ours_result = ours_abc
    restart_together([abc[alias].broker for alias in ALIASES])
    seed_scenario(abc)
    theirs_on_a = abc["A"].committed(GROUP, "orders")
    path = scenario_file(tmp_path, abc)
    log4j2 = tmp_path / "log4j2.properties"
    log4j2.write_text("status = error\nappender.e.type = Console\nappender.e.name = e\nappender.e.target = SYSTEM_ERR\n"
                      "appender.e.layout.type = PatternLayout\nappender.e.layout.pattern = [%d] %p %m (%c)%n\n"
                      "rootLogger.level = WARN\nrootLogger.appenderRef.e.ref = e\n")
    command = [java(), *RUN_CLASS_FLAGS, f"-Dlog4j2.configurationFile={log4j2}", "-cp", classpath(MIRROR_MAKER_2),
               "org.apache.kafka.connect.mirror.MirrorMaker", str(path)]
    theirs = MirrorProcess([], tmp_path / "mm2.log", command=command)
    try:
        wait_for_all(lambda: mirrored(abc), THEIRS_MIRRORED_S, "every flow mirrored by MirrorMaker 2", theirs)
        wait_for_all(lambda: synced(abc), THEIRS_SYNCED_S, "MirrorMaker 2's syncs, checkpoints and heartbeats", theirs)
        theirs_result = outcome(abc)
    finally:
        theirs.stop()
    assert theirs_result.topics == ours_result.topics
    assert theirs_result.partitions == ours_result.partitions
    assert theirs_result.configs == ours_result.configs
    assert theirs_result.acls == ours_result.acls
    # The group's offsets: which partitions, and translated at or behind where the group was on A
    # (its split between the partitions, and how far each translation got, vary from run to run).
    assert _without_offsets(theirs_result.client) == _without_offsets(ours_result.client)
    assert set(theirs_result.synced) == set(ours_result.synced)
    assert all(0 < offset <= theirs_on_a[p] for p, offset in theirs_result.synced.items()), \
        (theirs_result.synced, theirs_on_a)
    # Then the switch: ours takes the flows over where Kafka's MirrorMaker 2 left them.
    later = make_records(100, "later")
    abc["A"].seed("orders", later)
    takeover = ours(path, tmp_path / "takeover.log")
    try:
        abc["B"].read_values("A.orders", [r.value for r in later])
    finally:
        assert takeover.stop() == 143, takeover.log()[-3000:]
    assert "Flow A->B resumes where Kafka's MirrorMaker 2 left it (mm2-offsets.A.internal)" in takeover.log()
    counts = Counter(rec.value for _p, _o, rec in abc["B"].read_all("A.orders"))
    assert set(counts) == {r.value for r in ORDERS + later}  # nothing skipped
    assert sum(counts.values()) - len(counts) < len(ORDERS)  # and not mirrored again from the start
    # And back: Kafka's MirrorMaker 2 resumes where ours left the flows, from Connect's offsets,
    # which ours kept current: nothing mirrored twice past ours' last commit, nothing skipped.
    again = make_records(100, "again")
    abc["A"].seed("orders", again)
    back = MirrorProcess([], tmp_path / "mm2-back.log", command=command)
    try:
        abc["B"].read_values("A.orders", [r.value for r in again], timeout_s=THEIRS_MIRRORED_S,
                             evidence=back.log_tail)
    finally:
        back.stop()
    counts = Counter(rec.value for _p, _o, rec in abc["B"].read_all("A.orders"))
    assert all(counts[r.value] == 1 for r in later + again), {r.value: counts[r.value] for r in later + again
                                                               if counts[r.value] != 1}
