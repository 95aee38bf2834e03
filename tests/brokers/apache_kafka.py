"""Real Apache Kafka for the tests and the benchmark: KRaft clusters of one node or more (each node
broker and controller), from Maven jars (``maven_jars``), on free loopback ports. Not a dependency
of the tool.

A cluster is formatted afresh when it starts (its own cluster id, a data folder per node), counts as
ready only when every node answers a metadata request with that cluster id and is registered, logs
to a folder per node, and dies with the process that started it (``PR_SET_PDEATHSIG``), so no JVM
outlives a killed test run.

A cluster of several nodes (``nodes=3``) is what users run: a static quorum of every node,
replication factor 3 for the internal topics and new topics, ``min.insync.replicas=2``. Its nodes
can be stopped (a controlled shutdown, or SIGKILL) and started again on the same ports and data;
``wait_in_sync`` waits until every partition's replicas are all in sync again, and the cluster
names the node that leads most partitions of a topic or coordinates a group or a transactional id.

Besides its plaintext listener a node can have:

* ``SASL_PLAINTEXT`` with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for the given users (SCRAM
  credentials written by the storage tool at format time), and the StandardAuthorizer: the
  plaintext listener's principal (ANONYMOUS) and the listed super users may do anything,
  everyone else needs ACLs;
* ``SSL`` with JKS key and trust stores (client certificates required; a client certificate's
  principal is ``User:CN=<name>``);
* ``PROXIED`` (one-node clusters only): a plaintext listener that advertises another port, where a
  test puts a TCP proxy it can cut (an outage) and restore;
* ``OAUTH``: ``SASL_PLAINTEXT`` with OAUTHBEARER and Kafka's default unsecured token validator
  (``Security.oauthbearer``);
* ``OIDC``: ``SASL_PLAINTEXT`` with OAUTHBEARER tokens checked against a JWKS endpoint by
  ``OAuthBearerValidatorCallbackHandler`` (``Security.jwks_url``, which the JVM must be allowed).
"""

from __future__ import annotations

import atexit
import base64
import logging
import os
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional
from urllib.parse import urlsplit

from mirror_maker.embedded import die_with_parent, free_ports

from .maven_jars import MAVEN_TIMEOUT_S, archive_path, class_archive, classpath, java, jars_cached

log = logging.getLogger(__name__)

#: The newest 4.x Maven Central serves (the default broker), and the newest 3.9.x (the last line
#: with MirrorMaker v1). connect-mirror 4.4.0 is not on Maven Central: MirrorMaker 2 is 4.3.1.
KAFKA_4 = "4.4.0"
KAFKA_3_9 = "3.9.2"
MIRROR_MAKER_2 = "connect-mirror-4.3.1"

READY_TIMEOUT_S = 60.0
FORMAT_TIMEOUT_S = 120.0
#: A cluster that did not become ready is killed and started afresh, up to this many times.
START_ATTEMPTS = 3
#: The class-data archive's training: a one-node cluster formatted, started, stopped, its archive checked.

#: A node restarted into a running cluster recovers its logs (all of them after a SIGKILL) and
#: catches up the metadata log before it registers, while the rest of the test keeps the machine busy.
RESTART_TIMEOUT_S = 150.0
STOP_TIMEOUT_S = 15.0
#: The class-data archive's training: a one-node cluster formatted, started and stopped, its
#: archive then mapped once (``maven_jars._maps``).
ARCHIVE_TRAINING_S = FORMAT_TIMEOUT_S + READY_TIMEOUT_S + STOP_TIMEOUT_S + 60.0
#: A node of a one-node cluster, and of a larger one: two 3-node clusters, mirrors and a producer
#: share a 2-core machine.
HEAP = "-Xmx512m"
CLUSTER_NODE_HEAP = "-Xmx384m"
TRANSACTIONS_TOPIC = "__transaction_state"
#: The audience (``aud``) the OIDC listener expects in a token.
OIDC_AUDIENCE = "kafka"
_running: List["KafkaCluster"] = []


def pom_name(version: str) -> str:
    return f"kafka-{version}"


CLASS_ARCHIVE_APP = "kafka-node"


def first_start_cached(version: str) -> bool:
    """Whether this version's jars are fetched and its class-data archive made (``first_run``)."""
    return jars_cached(pom_name(version)) and archive_path(pom_name(version), CLASS_ARCHIVE_APP).exists()


def start_budget_s(version: str) -> float:
    """The longest ``start_together`` may take: each attempt formats, waits for every node and may
    kill them; and where ``tests.brokers.first_run`` has not run, the jars' fetch and the archive."""
    first_run = 0.0 if first_start_cached(version) else MAVEN_TIMEOUT_S + ARCHIVE_TRAINING_S
    return START_ATTEMPTS * (FORMAT_TIMEOUT_S + READY_TIMEOUT_S + STOP_TIMEOUT_S) + first_run


@dataclass
class Security:
    """Users for SASL (PLAIN and SCRAM), who is a super user, and the broker's TLS stores."""

    users: Dict[str, str] = field(default_factory=dict)
    super_users: List[str] = field(default_factory=list)
    #: JKS stores of the broker's SSL listener (None: no SSL listener).
    keystore: Optional[Path] = None
    truststore: Optional[Path] = None
    store_password: str = ""
    key_password: str = ""
    #: An OAUTH listener: OAUTHBEARER with the unsecured validator (a token's sub is the principal).
    oauthbearer: bool = False
    #: An OIDC listener: OAUTHBEARER tokens signed by a key of this JWKS endpoint, issued by its
    #: origin (scheme://host:port) for the audience OIDC_AUDIENCE.
    jwks_url: Optional[str] = None


@dataclass
class KafkaNode:
    """One JVM of a cluster: its node id, folder, ports (kept across restarts) and process."""

    node_id: int
    work: Path
    ports: Dict[str, int] = field(default_factory=dict)
    process: Optional[subprocess.Popen] = None

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def log_path(self) -> Path:
        return self.work / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.running:
            self.process.kill()
            self.process.wait()

    def last_words(self, lines: int = 12) -> str:
        """Why the node is not up, for a failure message that outlives the test's folder: its exit
        code if it ended, and the last lines of its log."""
        state = ("running" if self.running else
                 f"exited with {self.process.returncode}" if self.process else "not started")
        tail = []
        for path in (self.log_path, self.work / "stdout.log"):
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                if tail:
                    break
        return f"node {self.node_id} {state} ({self.log_path}):\n    " + "\n    ".join(tail)


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def _jaas_plain(users: Dict[str, str]) -> str:
    admin = next(iter(users.items()))
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{admin[0]}" password="{admin[1]}" {entries};')


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: 31-based over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(key: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets`` or ``__transaction_state`` whose leader coordinates a
    group or a transactional id: ``Utils.abs(key.hashCode) % partitions`` (``Utils.abs`` maps
    Integer.MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _probe_conf(bootstrap: str) -> Dict[str, object]:
    """An AdminClient's settings for looking at nodes that may be down: their connection errors
    go nowhere, and a node that comes back is tried again within a second (librdkafka's backoff
    otherwise grows to 10 s)."""
    quiet = logging.getLogger("tests.kafka.probe")
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    return {"bootstrap.servers": bootstrap, "logger": quiet, "reconnect.backoff.max.ms": 1000}


class KafkaCluster:
    """KRaft nodes 1..``nodes``; ``bootstrap`` is their plaintext ``host:port`` list."""

    def __init__(self, name: str, work_dir: os.PathLike, version: str = KAFKA_4,
                 security: Optional[Security] = None, proxied: bool = False,
                 overrides: Optional[Dict[str, object]] = None, nodes: int = 1) -> None:
        if proxied and nodes != 1:
            raise ValueError("the PROXIED listener advertises one proxy port: one-node clusters only")
        self.name = name
        self.version = version
        self.work = Path(work_dir) / f"kafka-{name}"
        self.security = security
        self.proxied = proxied
        self.overrides = dict(overrides or {})
        self.nodes: Dict[int, KafkaNode] = {
            node_id: KafkaNode(node_id, self.work / f"node-{node_id}") for node_id in range(1, nodes + 1)}
        self.cluster_id = ""
        self._admin = None
        #: The server JVMs' class-data sharing flags: an archive to use, or (the run that makes
        #: it) where to write one; None until the first start decides.
        self._class_sharing: Optional[List[str]] = None

    # -- addresses ---------------------------------------------------------------------

    @property
    def _first(self) -> KafkaNode:
        return self.nodes[1]

    def address(self, listener: str) -> str:
        """The listener's address on every node, comma-separated (a bootstrap list)."""
        return ",".join(node.address(listener) for node in self.nodes.values())

    @property
    def bootstrap(self) -> str:
        return self.address("PLAINTEXT")

    @property
    def sasl_bootstrap(self) -> str:
        return self.address("SASL_PLAINTEXT")

    @property
    def ssl_bootstrap(self) -> str:
        return self.address("SSL")

    @property
    def oauth_bootstrap(self) -> str:
        return self.address("OAUTH")

    @property
    def oidc_bootstrap(self) -> str:
        return self.address("OIDC")

    @property
    def proxy_port(self) -> int:
        """The port the PROXIED listener advertises: a test's TCP proxy listens there."""
        return self._first.ports["PROXY"]

    @property
    def log_path(self) -> Path:
        """The first node's log (each node's is ``nodes[id].log_path``)."""
        return self._first.log_path

    # -- lifecycle of the whole cluster -------------------------------------------------

    def start(self) -> "KafkaCluster":
        return start_together([self])[0]

    def _prepare(self) -> None:
        self._choose_ports()
        self._format()

    def _share_classes(self) -> None:
        """Decide the JVMs' class-data sharing before the first start (``class_archive``)."""
        if self._class_sharing is None:
            archive = class_archive(pom_name(self.version), CLASS_ARCHIVE_APP, self._train_class_archive)
            self._class_sharing = [f"-XX:SharedArchiveFile={archive}"] if archive else []

    def _train_class_archive(self, flags: List[str]) -> None:
        """A one-node cluster of this version started and stopped (a controlled shutdown, so that
        its JVM writes the archive at exit)."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="kafka-class-archive-") as work:
            cluster = KafkaCluster("class-archive", work, version=self.version)
            cluster._class_sharing = flags
            with cluster:
                pass

    def _format_flags(self) -> List[str]:
        """The storage tool shares the server's archive, and writes none of its own."""
        return [flag for flag in self._class_sharing or [] if flag.startswith("-XX:SharedArchiveFile=")]

    def _spawn(self) -> None:
        for node in self.nodes.values():
            self._spawn_node(node)
        if self not in _running:
            _running.append(self)

    def _ready_or_killed(self) -> bool:
        if self._wait_ready(list(self.nodes.values())):
            log.info("Apache Kafka %s (%s) ready at %s", self.version, self.name, self.bootstrap)
            return True
        self._kill()
        log.warning("Apache Kafka %s did not start; see %s", self.name, self.work)
        return False

    def stop(self) -> None:
        """A controlled shutdown of a one-node cluster (killed if it takes too long); the nodes of
        a larger one are killed: their data goes with them, and the last nodes' controlled
        shutdowns would wait for a quorum that is leaving too."""
        running = [node for node in self.nodes.values() if node.running]
        for node in running:
            if len(self.nodes) == 1:
                node.process.terminate()
            else:
                node.kill()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node in running:
            try:
                node.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.kill()
        for node in self.nodes.values():
            node.process = None
        self._admin = None
        if self in _running:
            _running.remove(self)

    def restart(self) -> "KafkaCluster":
        """An empty cluster again (storage formatted afresh), on the same ports."""
        self.stop()
        self._format()
        self._spawn()
        if not self._wait_ready(list(self.nodes.values())):
            raise RuntimeError(f"Apache Kafka {self.name} did not restart; see {self.work}")
        return self

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _kill(self) -> None:
        for node in self.nodes.values():
            node.kill()

    # -- one node at a time (same ports, same data: a restart, not a new node) ---------

    def stop_node(self, node_id: int, hard: bool = False) -> None:
        """SIGTERM (a controlled shutdown: leaders move away first) or, ``hard``, SIGKILL."""
        self.stop_nodes(node_id, hard=hard)

    def stop_nodes(self, *node_ids: int, hard: bool = False, wait: bool = True) -> None:
        """Signal each node at once; ``wait``: until each has exited (``wait_stopped``)."""
        for node_id in node_ids:
            node = self.nodes[node_id]
            if not node.running:
                continue
            if hard:
                node.kill()
            else:
                node.process.terminate()
        if wait:
            self.wait_stopped(*node_ids)

    def wait_stopped(self, *node_ids: int) -> None:
        """Wait for each node's exit; one that outlives STOP_TIMEOUT_S is killed."""
        for node_id in node_ids:
            node = self.nodes[node_id]
            if node.process is None:
                continue
            try:
                node.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning("Apache Kafka %s node %d did not stop within %.0f s: killed", self.name, node_id,
                            STOP_TIMEOUT_S)
                node.kill()

    def start_node(self, node_id: int) -> None:
        self.start_nodes(node_id)

    def start_nodes(self, *node_ids: int, wait: bool = True) -> None:
        """Start stopped nodes side by side (two are needed at once to win back a lost quorum);
        ``wait``: until each answers and is registered again (``wait_back``). Call it from the
        thread that lives as long as the nodes (``die_with_parent`` is per thread)."""
        for node_id in node_ids:
            node = self.nodes[node_id]
            if not node.running:
                self._spawn_node(node)
        if wait:
            self.wait_back(*node_ids)

    def wait_back(self, *node_ids: int) -> None:
        nodes = [self.nodes[node_id] for node_id in node_ids]
        started = time.monotonic()
        if not self._wait_ready(nodes, RESTART_TIMEOUT_S):
            raise RuntimeError(f"Apache Kafka {self.name} nodes {list(node_ids)} did not come back within "
                               f"{RESTART_TIMEOUT_S:.0f} s: " + "; ".join(node.last_words() for node in nodes))
        log.info("Apache Kafka %s nodes %s back after %.1f s", self.name, list(node_ids), time.monotonic() - started)

    # -- what the cluster says about itself ---------------------------------------------

    def admin(self):
        """An AdminClient on every node (quiet while some are down)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(_probe_conf(self.bootstrap))
        return self._admin

    def out_of_sync(self) -> List[str]:
        """What keeps the cluster from being whole: nodes not registered, partitions without a
        leader or whose in-sync replicas are not all of their replicas (internal topics too)."""
        from confluent_kafka import KafkaException

        try:
            metadata = self.admin().list_topics(timeout=5)
        except KafkaException as exc:
            return [f"no metadata: {exc}"]
        problems = [f"node {node_id} not registered" for node_id in self.nodes if node_id not in metadata.brokers]
        for topic in metadata.topics.values():
            if topic.error is not None:
                problems.append(f"{topic.topic}: {topic.error}")
                continue
            for partition in topic.partitions.values():
                if partition.leader < 0 or set(partition.isrs) != set(partition.replicas):
                    problems.append(f"{topic.topic}-{partition.id} (leader {partition.leader}, "
                                    f"in sync {sorted(partition.isrs)} of {sorted(partition.replicas)})")
        return problems

    def wait_in_sync(self, timeout_s: float = 60.0) -> None:
        """Wait until every node is registered and every partition's replicas are all in sync."""
        deadline = time.monotonic() + timeout_s
        while True:
            problems = self.out_of_sync()
            if not problems:
                return
            if time.monotonic() >= deadline:
                raise AssertionError(f"Apache Kafka {self.name} not in sync after {timeout_s:.0f} s: "
                                     f"{', '.join(problems[:10])}")
            time.sleep(0.25)

    def leaders(self, topic: str) -> Dict[int, int]:
        """Partition -> the node leading it (-1: none; nothing for a topic the cluster lacks)."""
        metadata = self.admin().list_topics(timeout=10).topics.get(topic)
        return {partition.id: partition.leader for partition in metadata.partitions.values()} if metadata else {}

    def preferred_leaders(self, topic: str) -> Dict[int, int]:
        """Partition -> its first assigned replica, where its leadership goes back to after the
        node's restart (``auto.leader.rebalance.enable``)."""
        metadata = self.admin().list_topics(timeout=10).topics[topic]
        return {partition.id: partition.replicas[0] for partition in metadata.partitions.values()}

    def leader_counts(self, *topics: str) -> Counter:
        """Node -> how many partitions of ``topics`` it leads."""
        return Counter(leader for topic in topics for leader in self.leaders(topic).values() if leader >= 0)

    def busiest_leader(self, *topics: str) -> int:
        """The node leading most partitions of ``topics`` (the lowest id among equals)."""
        counts = self.leader_counts(*topics)
        return max(sorted(self.nodes), key=lambda node_id: counts[node_id])

    def group_coordinator(self, group: str, within_s: float = 30.0) -> int:
        """The node coordinating a consumer group, as the group's description gives it. Asked
        again while the coordinator moves (a node just failed or came back), for ``within_s``."""
        from confluent_kafka import KafkaError, KafkaException

        moving = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                  KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
        deadline = time.monotonic() + within_s
        while True:
            try:
                description = self.admin().describe_consumer_groups([group], request_timeout=10)[group].result()
                return description.coordinator.id
            except KafkaException as exc:
                if exc.args[0].code() not in moving or time.monotonic() > deadline:
                    raise
                log.info("The coordinator of group %s is moving (%s); asking again", group, exc.args[0].name())
                time.sleep(0.5)  # a retry's pause, bounded by the deadline above

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The node coordinating a transactional id: the leader of its ``__transaction_state``
        partition (the transaction coordinator's own rule; the topic exists once a transactional
        producer has asked for its coordinator)."""
        leaders = self.leaders(TRANSACTIONS_TOPIC)
        return leaders[coordinator_partition(transactional_id, len(leaders))]

    # -- configuration -------------------------------------------------------------------

    def _choose_ports(self) -> None:
        names = ["PLAINTEXT", "CONTROLLER"]
        if self.security is not None:
            names.append("SASL_PLAINTEXT")
            if self.security.keystore is not None:
                names.append("SSL")
            names += ["OAUTH"] * self.security.oauthbearer + ["OIDC"] * bool(self.security.jwks_url)
        if self.proxied:
            names += ["PROXIED", "PROXY"]
        ports = iter(free_ports(len(names) * len(self.nodes)))
        for node in self.nodes.values():
            node.ports = {name: next(ports) for name in names}

    def server_properties(self, node: Optional[KafkaNode] = None) -> Dict[str, object]:
        node = node or self._first
        listeners = [n for n in node.ports if n != "PROXY"]
        advertised = [f"{n}://{node.address(n)}" for n in listeners if n != "CONTROLLER"]
        if self.proxied:
            advertised = [a for a in advertised if not a.startswith("PROXIED:")]
            advertised.append(f"PROXIED://127.0.0.1:{node.ports['PROXY']}")
        protocol = {"SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "OAUTH": "SASL_PLAINTEXT",
                    "OIDC": "SASL_PLAINTEXT"}
        voters = ",".join(f"{n.node_id}@{n.address('CONTROLLER')}" for n in self.nodes.values())
        replicas, min_isr = min(3, len(self.nodes)), min(2, len(self.nodes))
        props: Dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "listeners": ",".join(f"{n}://{node.address(n)}" for n in listeners),
            "advertised.listeners": ",".join(advertised),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(f"{n}:{protocol.get(n, 'PLAINTEXT')}" for n in listeners),
            "log.dirs": str(node.work / "data"),
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": 10,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": 10,
            "group.initial.rebalance.delay.ms": 0,
            # The tests' consumers use a 2 s session so that a killed member is noticed quickly.
            "group.min.session.timeout.ms": 1000,
            # The same for the consumer protocol (KIP-848), whose timeouts the broker sets.
            "group.consumer.min.session.timeout.ms": 1000,
            "group.consumer.session.timeout.ms": 6000,
            "group.consumer.min.heartbeat.interval.ms": 100,
            "group.consumer.heartbeat.interval.ms": 500,
            "num.network.threads": 2,
            "num.io.threads": 2,
            "background.threads": 2,
            "log.cleaner.dedupe.buffer.size": 2097152,
            "num.partitions": 1,
            # An idle controller appends a no-op record every 500 ms by default (KIP-835); each one
            # wakes every node, which halves the idle CPU of a test cluster when done every 5 s.
            "metadata.max.idle.interval.ms": 5000,
        }
        if len(self.nodes) > 1:
            props.update(self._replication_properties(replicas, min_isr))
        if not self.version.startswith("3."):
            props["share.coordinator.state.topic.replication.factor"] = replicas
            props["share.coordinator.state.topic.min.isr"] = min_isr
        if self.security is not None:
            props.update(self._security_properties())
        props.update(self.overrides)
        return props

    @staticmethod
    def _replication_properties(replicas: int, min_isr: int) -> Dict[str, object]:
        return {
            "default.replication.factor": replicas,
            "min.insync.replicas": min_isr,
            "unclean.leader.election.enable": "false",
            # A follower that stopped fetching leaves the in-sync replicas within seconds, not 30 s,
            # and leaders go back to their preferred node soon after it returns, as in a cluster
            # whose operators wait for that between the steps of a rolling restart.
            "replica.lag.time.max.ms": 5000,
            "leader.imbalance.check.interval.seconds": 10,
            # A node that stopped heartbeating is fenced after 6 s, not 9 s: a SIGKILLed node's
            # leaderships and coordinators move within a 10 s consumer session.
            "broker.session.timeout.ms": 6000,
            "broker.heartbeat.interval.ms": 1000,
            # Six nodes on two cores: one network thread each.
            "num.network.threads": 1,
        }

    def _security_properties(self) -> Dict[str, object]:
        sec = self.security
        supers = ["User:ANONYMOUS", *(f"User:{u}" for u in sec.super_users)]
        props: Dict[str, object] = {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join(supers),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": _jaas_plain(sec.users),
        }
        for mechanism in ("scram-sha-256", "scram-sha-512"):
            props[f"listener.name.sasl_plaintext.{mechanism}.sasl.jaas.config"] = \
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        if sec.keystore is not None:
            props.update({
                "listener.name.ssl.ssl.keystore.type": "JKS",
                "listener.name.ssl.ssl.keystore.location": str(sec.keystore),
                "listener.name.ssl.ssl.keystore.password": sec.store_password,
                "listener.name.ssl.ssl.key.password": sec.key_password,
                "listener.name.ssl.ssl.truststore.type": "JKS",
                "listener.name.ssl.ssl.truststore.location": str(sec.truststore),
                "listener.name.ssl.ssl.truststore.password": sec.store_password,
                "listener.name.ssl.ssl.client.auth": "required",
                "listener.name.ssl.ssl.endpoint.identification.algorithm": "",
            })
        login = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
        for listener in ("oauth",) * sec.oauthbearer + ("oidc",) * bool(sec.jwks_url):
            props[f"listener.name.{listener}.sasl.enabled.mechanisms"] = "OAUTHBEARER"
            props[f"listener.name.{listener}.oauthbearer.sasl.jaas.config"] = login
        if sec.jwks_url:
            props["listener.name.oidc.oauthbearer.sasl.server.callback.handler.class"] = \
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            props["listener.name.oidc.oauthbearer.sasl.oauthbearer.jwks.endpoint.url"] = sec.jwks_url
            # Kafka 4.4 checks a token's audience ("aud") and issuer ("iss") unless told not to.
            props["listener.name.oidc.oauthbearer.sasl.oauthbearer.expected.audience"] = OIDC_AUDIENCE
            origin = urlsplit(sec.jwks_url)
            props["listener.name.oidc.oauthbearer.sasl.oauthbearer.expected.issuer"] = \
                f"{origin.scheme}://{origin.netloc}"
        return props

    @staticmethod
    def _write(node: KafkaNode, name: str, lines: List[str]) -> Path:
        path = node.work / name
        path.write_text("\n".join(lines) + "\n")
        return path

    def _format(self) -> None:
        """Every node's storage, with one cluster id (formatted side by side: a JVM each)."""
        from concurrent.futures import ThreadPoolExecutor

        self.cluster_id = _cluster_id()
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(self._format_node, self.nodes.values()))

    def _format_node(self, node: KafkaNode) -> None:
        shutil.rmtree(node.work / "data", ignore_errors=True)
        node.work.mkdir(parents=True, exist_ok=True)
        props = self._write(node, "server.properties",
                            [f"{k}={v}" for k, v in self.server_properties(node).items()])
        command = [java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", *self._format_flags(),
                   "-cp", classpath(pom_name(self.version)),
                   *self._logging_flags(node), "kafka.tools.StorageTool", "format",
                   f"--cluster-id={self.cluster_id}", "-c", str(props), "--ignore-formatted"]
        if self.security is not None:
            for name, password in self.security.users.items():
                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                    command += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=FORMAT_TIMEOUT_S)
        if result.returncode != 0:
            raise RuntimeError(f"formatting Apache Kafka {self.name} node {node.node_id} failed:\n"
                               f"{result.stdout}{result.stderr}")

    def _logging_flags(self, node: KafkaNode) -> List[str]:
        """File logging at INFO (no binding, no log at all): log4j2 on 4.x, reload4j on 3.9."""
        if self.version.startswith("3."):
            config = self._write(node, "log4j.properties", [
                "log4j.rootLogger=INFO, file",
                "log4j.appender.file=org.apache.log4j.FileAppender",
                f"log4j.appender.file.File={node.log_path}",
                "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
                "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n",
            ])
            return [f"-Dlog4j.configuration=file:{config}", f"-Dkafka.logs.dir={node.work}"]
        config = self._write(node, "log4j2.properties", [
            "status = error",
            "appender.file.type = File",
            "appender.file.name = file",
            f"appender.file.fileName = {node.log_path}",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = file",
        ])
        return [f"-Dlog4j2.configurationFile={config}", f"-Dkafka.logs.dir={node.work}"]

    def _spawn_node(self, node: KafkaNode) -> None:
        heap = HEAP if len(self.nodes) == 1 else CLUSTER_NODE_HEAP
        # Kafka 4 fetches a JWKS only from URLs this system property allows.
        allowed = ([f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.security.jwks_url}"]
                   if self.security is not None and self.security.jwks_url else [])
        command = [java(), heap, "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", *(self._class_sharing or []),
                   "-Djava.awt.headless=true", *allowed,
                   "-cp", classpath(pom_name(self.version)), *self._logging_flags(node),
                   "kafka.Kafka", str(node.work / "server.properties")]
        with open(node.work / "stdout.log", "ab") as out:
            node.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, preexec_fn=die_with_parent(),
                                            start_new_session=True)

    def _wait_ready(self, nodes: List[KafkaNode], timeout_s: float = READY_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout_s
        return all(self._node_ready(node, deadline) for node in nodes)

    def _node_ready(self, node: KafkaNode, deadline: float) -> bool:
        """The node answers (a client that knows only its address gets a reply) with this cluster's
        id, and the cluster lists it among its live brokers (registered, not fenced)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(_probe_conf(node.address("PLAINTEXT")))
        while time.monotonic() < deadline:
            if not node.running:
                return False
            try:
                metadata = admin.list_topics(timeout=2)
            except Exception:
                time.sleep(0.1)
                continue
            if metadata.cluster_id != self.cluster_id:
                return False  # someone else's broker on our port
            if node.node_id in metadata.brokers:
                return True
            time.sleep(0.1)
        return False


def start_together(clusters: List[KafkaCluster], attempts: int = START_ATTEMPTS) -> List[KafkaCluster]:
    """Start several clusters side by side (each start is mostly JVMs warming up).

    Formatting runs in threads; the nodes are spawned from the calling thread, because
    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked a child ends.
    """
    from concurrent.futures import ThreadPoolExecutor

    waiting = list(clusters)
    for cluster in waiting:
        cluster._share_classes()
    for _attempt in range(attempts):
        with ThreadPoolExecutor(len(waiting)) as pool:
            list(pool.map(KafkaCluster._prepare, waiting))
        for cluster in waiting:
            cluster._spawn()
        waiting = [cluster for cluster in waiting if not cluster._ready_or_killed()]
        if not waiting:
            return clusters
    names = ", ".join(f"{c.name} (see {c.work})" for c in waiting)
    raise RuntimeError(f"Apache Kafka did not start: {names}")


def restart_together(clusters: List[KafkaCluster]) -> List[KafkaCluster]:
    """Every node empty again (storage formatted afresh), on the same ports, side by side: what a
    test that compares two tools on the same clusters and the same file needs between them."""
    from concurrent.futures import ThreadPoolExecutor

    for cluster in clusters:
        cluster.stop()
    with ThreadPoolExecutor(len(clusters)) as pool:
        list(pool.map(KafkaCluster._format, clusters))
    for cluster in clusters:
        cluster._spawn()  # from this thread: PR_SET_PDEATHSIG follows the thread that forks
    for cluster in clusters:
        if not cluster._wait_ready(list(cluster.nodes.values())):
            raise RuntimeError(f"Apache Kafka {cluster.name} did not restart; see {cluster.work}")
    return clusters


def stop_all() -> None:
    for cluster in list(_running):
        cluster.stop()


atexit.register(stop_all)
