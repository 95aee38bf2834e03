"""Real Apache Kafka for the tests and the benchmark: one KRaft node (broker and controller) per
cluster, from Maven jars (``maven_jars``), on free loopback ports. Not a dependency of the tool.

A node is formatted afresh at every start (its own cluster id and data folder), counts as ready
only when it answers a metadata request with that cluster id, logs to a folder, and dies with
the process that started it (``PR_SET_PDEATHSIG``), so no JVM outlives a killed test run.

Besides its plaintext listener a node can have:

* ``SASL_PLAINTEXT`` with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for the given users (SCRAM
  credentials written by the storage tool at format time), and the StandardAuthorizer: the
  plaintext listener's principal (ANONYMOUS) and the listed super users may do anything,
  everyone else needs ACLs;
* ``SSL`` with JKS key and trust stores (client certificates required; a client certificate's
  principal is ``User:CN=<name>``);
* ``PROXIED``: a plaintext listener that advertises another port, where a test puts a TCP proxy
  it can cut (an outage) and restore;
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional
from urllib.parse import urlsplit

from mirror_maker.embedded import die_with_parent, free_port

from .maven_jars import classpath, java

log = logging.getLogger(__name__)

#: The newest 4.x Maven Central serves (the default broker), and the newest 3.9.x (the last line
#: with MirrorMaker v1). connect-mirror 4.4.0 is not on Maven Central: MirrorMaker 2 is 4.3.1.
KAFKA_4 = "4.4.0"
KAFKA_3_9 = "3.9.2"
MIRROR_MAKER_2 = "connect-mirror-4.3.1"

#: The audience (``aud``) the OIDC listener expects in a token.
OIDC_AUDIENCE = "kafka"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
HEAP = "-Xmx512m"
_running: List["KafkaCluster"] = []


def pom_name(version: str) -> str:
    return f"kafka-{version}"


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


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def _jaas_plain(users: Dict[str, str]) -> str:
    admin = next(iter(users.items()))
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{admin[0]}" password="{admin[1]}" {entries};')


class KafkaCluster:
    """One KRaft node; ``bootstrap`` is its plaintext ``host:port``."""

    def __init__(self, name: str, work_dir: os.PathLike, version: str = KAFKA_4,
                 security: Optional[Security] = None, proxied: bool = False,
                 overrides: Optional[Dict[str, object]] = None) -> None:
        self.name = name
        self.version = version
        self.work = Path(work_dir) / f"kafka-{name}"
        self.security = security
        self.proxied = proxied
        self.overrides = dict(overrides or {})
        self.ports: Dict[str, int] = {}
        self.cluster_id = ""
        self.process: Optional[subprocess.Popen] = None

    # -- addresses ---------------------------------------------------------------------

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

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
        return self.ports["PROXY"]

    @property
    def log_path(self) -> Path:
        return self.work / "server.log"

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> "KafkaCluster":
        return start_together([self])[0]

    def _prepare(self) -> None:
        self._choose_ports()
        self._format()

    def _ready_or_killed(self) -> bool:
        if self._wait_ready():
            log.info("Apache Kafka %s (%s) ready at %s", self.version, self.name, self.bootstrap)
            return True
        self._kill()
        log.warning("Apache Kafka %s did not start; see %s", self.name, self.log_path)
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # a controlled shutdown
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._kill()
        self.process = None
        if self in _running:
            _running.remove(self)

    def restart(self) -> "KafkaCluster":
        """An empty cluster again (storage formatted afresh), on the same ports."""
        self.stop()
        self._format()
        self._spawn()
        if not self._wait_ready():
            raise RuntimeError(f"Apache Kafka {self.name} did not restart; see {self.log_path}")
        return self

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

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
        self.ports = {name: free_port() for name in names}

    def server_properties(self) -> Dict[str, object]:
        listeners = [n for n in self.ports if n != "PROXY"]
        advertised = [f"{n}://{self.address(n)}" for n in listeners if n != "CONTROLLER"]
        if self.proxied:
            advertised = [a for a in advertised if not a.startswith("PROXIED:")]
            advertised.append(f"PROXIED://127.0.0.1:{self.ports['PROXY']}")
        protocol = {"SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "OAUTH": "SASL_PLAINTEXT",
                    "OIDC": "SASL_PLAINTEXT"}
        props: Dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{self.address('CONTROLLER')}",
            "listeners": ",".join(f"{n}://{self.address(n)}" for n in listeners),
            "advertised.listeners": ",".join(advertised),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(f"{n}:{protocol.get(n, 'PLAINTEXT')}" for n in listeners),
            "log.dirs": str(self.work / "data"),
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 10,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
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
        }
        if not self.version.startswith("3."):
            props["share.coordinator.state.topic.replication.factor"] = 1
            props["share.coordinator.state.topic.min.isr"] = 1
        if self.security is not None:
            props.update(self._security_properties())
        props.update(self.overrides)
        return props

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
        return props

    def _write(self, name: str, lines: List[str]) -> Path:
        path = self.work / name
        path.write_text("\n".join(lines) + "\n")
        return path

    def _format(self) -> None:
        shutil.rmtree(self.work / "data", ignore_errors=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.cluster_id = _cluster_id()
        props = self._write("server.properties", [f"{k}={v}" for k, v in self.server_properties().items()])
        command = [java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath(pom_name(self.version)),
                   *self._logging_flags(), "kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",
                   "-c", str(props), "--ignore-formatted"]
        if self.security is not None:
            for name, password in self.security.users.items():
                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                    command += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"formatting Apache Kafka {self.name} failed:\n{result.stdout}{result.stderr}")

    def _logging_flags(self) -> List[str]:
        """File logging at INFO (no binding, no log at all): log4j2 on 4.x, reload4j on 3.9."""
        if self.version.startswith("3."):
            config = self._write("log4j.properties", [
                "log4j.rootLogger=INFO, file",
                "log4j.appender.file=org.apache.log4j.FileAppender",
                f"log4j.appender.file.File={self.log_path}",
                "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
                "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n",
            ])
            return [f"-Dlog4j.configuration=file:{config}", f"-Dkafka.logs.dir={self.work}"]
        config = self._write("log4j2.properties", [
            "status = error",
            "appender.file.type = File",
            "appender.file.name = file",
            f"appender.file.fileName = {self.log_path}",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = file",
        ])
        return [f"-Dlog4j2.configurationFile={config}", f"-Dkafka.logs.dir={self.work}"]

    def _spawn(self) -> None:
        # Kafka 4 fetches a JWKS only from URLs this system property allows.
        allowed = ([f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.security.jwks_url}"]
                   if self.security is not None and self.security.jwks_url else [])
        command = [java(), HEAP, "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", *allowed,
                   "-cp", classpath(pom_name(self.version)), *self._logging_flags(),
                   "kafka.Kafka", str(self.work / "server.properties")]
        with open(self.work / "stdout.log", "ab") as out:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, preexec_fn=die_with_parent(),
                                            start_new_session=True)
        if self not in _running:
            _running.append(self)

    def _wait_ready(self) -> bool:
        from confluent_kafka.admin import AdminClient

        quiet = logging.getLogger("tests.kafka.probe")
        quiet.propagate = False
        quiet.addHandler(logging.NullHandler())
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": quiet})
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                cluster = admin.describe_cluster(request_timeout=2).result()
            except Exception:
                time.sleep(0.1)
                continue
            return cluster.cluster_id == self.cluster_id  # else: someone else's broker on our port
        return False


def start_together(clusters: List[KafkaCluster], attempts: int = 3) -> List[KafkaCluster]:
    """Start several nodes side by side (each start is mostly a JVM warming up).

    Formatting runs in threads; the nodes are spawned from the calling thread, because
    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked a child ends.
    """
    from concurrent.futures import ThreadPoolExecutor

    waiting = list(clusters)
    for _attempt in range(attempts):
        with ThreadPoolExecutor(len(waiting)) as pool:
            list(pool.map(KafkaCluster._prepare, waiting))
        for cluster in waiting:
            cluster._spawn()
        waiting = [cluster for cluster in waiting if not cluster._ready_or_killed()]
        if not waiting:
            return clusters
    names = ", ".join(f"{c.name} (see {c.log_path} and {c.work / 'stdout.log'})" for c in waiting)
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
        if not cluster._wait_ready():
            raise RuntimeError(f"Apache Kafka {cluster.name} did not restart; see {cluster.log_path}")
    return clusters


def stop_all() -> None:
    for cluster in list(_running):
        cluster.stop()


atexit.register(stop_all)
