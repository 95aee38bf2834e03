"""Kafka protocol connections for the raw data path, from the settings the confluent clients get.

librdkafka has no raw-batch API, so fetches and produces of whole batches go through
kafka-python's protocol client (requests generated from Kafka's own message schemas; TLS and
SASL). Each side's client is built from the same translated librdkafka settings as the confluent
clients (so JKS stores converted to PEM, SASL from ``sasl.jaas.config``, all work the same), and
both sides of a stream share one network selector, driven by the stream's own thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional

from ..errors import ClientFailed, ConfigError

log = logging.getLogger("mirror_maker.shallow")
#: kafka-python logs every connection and metadata update at INFO: only its warnings show, unless
#: the mirror logs at DEBUG.
logging.getLogger("kafka").setLevel(max(logging.WARNING, logging.getLogger().getEffectiveLevel()))
#: ... and an ERROR at every metadata answer without a tracked topic (deleted): ``Cluster.route``
#: says it once instead.
logging.getLogger("kafka.cluster").addFilter(
    lambda record: "not found in cluster metadata" not in record.getMessage())
#: ... and three lines at every attempt to reach a broker that is away (backing off to 10 s):
#: ``Cluster.connect`` says it once in a while, naming the cluster and the last reason, and the
#: confluent clients of the same stream say it for the same clusters while running. Shown when
#: the mirror logs at DEBUG.
_RETRY_LINES = ("Connection failed:", "Connection lost:", "Bootstrap connection to", "not ready; waiting",
                "Bootstrap failed:",  # (ours never has a deadline: it fails only when closed by a stop)
                # ... and a metadata request or a connection a close cut short (ERROR, as if a
                # broker had failed): a moved leader or a missing topic is ours to say (``route``).
                "Metadata refresh: failed", ": Abort (", "No node available for metadata refresh",
                # ... and its event loop's own timing notes (a busy machine, not a fault)
                "It is blocking the event loop")
#: The last reason a bootstrap attempt of this thread failed (each stream's selector runs in it).
_last_failure = threading.local()


def describe(exc: BaseException) -> str:
    """An error as ``Type: message`` (kafka-python's errors already start with their type)."""
    name, text = type(exc).__name__, str(exc)
    return text if text.startswith(name) else f"{name}: {text}"


def _not_a_retry(record: logging.LogRecord) -> bool:
    message = record.getMessage()
    if not any(line in message for line in _RETRY_LINES):
        return True
    reason = next((arg for arg in record.args or () if isinstance(arg, BaseException)), None)
    if reason is not None:
        _last_failure.reason = describe(reason)
    return logging.getLogger().isEnabledFor(logging.DEBUG)


for _name in ("kafka.net.manager", "kafka.net.connection", "kafka.net.transport", "kafka.cluster", "kafka.net.selector"):
    logging.getLogger(_name).addFilter(_not_a_retry)

#: Fetch and Produce versions that still name topics (13 and later use topic ids).
MAX_FETCH_VERSION = 12
MAX_PRODUCE_VERSION = 9
FETCH_MAX_BYTES = 52428800  # librdkafka's fetch.max.bytes default
METADATA_TIMEOUT_MS = 30000
#: How often a wait on a cluster looks at the run state: a stop ends it within this.
WAIT_STEP_MS = 100
#: While a cluster cannot be reached at start-up, when that is logged first, then how often.
UNREACHABLE_FIRST_LOG_S = 3.0
UNREACHABLE_LOG_EVERY_S = 10.0
#: Answers in a row that cannot be decoded before the run fails: a retry reads the same bytes.
UNDECODED_LIMIT = 3
_SASL = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def net_configs(conf: Dict[str, str], client_id: str, fetch_max_bytes: int = FETCH_MAX_BYTES) -> dict:
    """kafka-python's settings for a cluster side, from its librdkafka settings; anything the
    raw path cannot do is a one-line :class:`ConfigError`, found before connecting."""
    protocol = str(conf.get("security.protocol", "plaintext")).upper()
    out = {
        "bootstrap_servers": [host.strip() for host in conf["bootstrap.servers"].split(",") if host.strip()],
        "client_id": client_id,
        "security_protocol": protocol,
        "request_timeout_ms": int(conf.get("request.timeout.ms", conf.get("socket.timeout.ms", 30000))),
        "reconnect_backoff_ms": int(conf.get("reconnect.backoff.ms", 100)),
        # Java's default, not librdkafka's 10 s: kafka-python backs off per broker, and a broker
        # back from a restart or an outage is then reached within a second, not up to ten.
        "reconnect_backoff_max_ms": int(conf.get("reconnect.backoff.max.ms", 1000)),
        "max_in_flight_requests_per_connection": 5,
        # A fetch answer holds up to fetch.max.bytes of batches (and one batch may exceed it).
        "receive_message_max_bytes": max(fetch_max_bytes, 1 << 20) * 2,
    }
    if protocol in ("SSL", "SASL_SSL"):
        if conf.get("ssl.keystore.location"):
            raise ConfigError("--use.raw.bytes: a PKCS12 ssl.keystore is not supported on the raw path; "
                              "use a JKS keystore or PEM files (ssl.certificate.location, ssl.key.location)")
        out.update({
            "ssl_cafile": conf.get("ssl.ca.location"),
            "ssl_certfile": conf.get("ssl.certificate.location"),
            "ssl_keyfile": conf.get("ssl.key.location"),
            "ssl_password": conf.get("ssl.key.password"),
            "ssl_check_hostname": str(conf.get("ssl.endpoint.identification.algorithm", "https")).lower() != "none",
        })
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = str(conf.get("sasl.mechanisms", "GSSAPI")).upper()
        if mechanism not in _SASL:
            raise ConfigError(f"--use.raw.bytes: SASL mechanism {mechanism} is not supported on the raw "
                              f"path ({', '.join(_SASL)} are)")
        out.update({"sasl_mechanism": mechanism, "sasl_plain_username": conf.get("sasl.username"),
                    "sasl_plain_password": conf.get("sasl.password")})
    return out


def guarded(callback, state):
    """A future's callback that cannot fail silently (kafka-python logs and drops a callback's
    exception): anything it raises fails the run with one line. Except the selector closed under
    a callback by a clean stop: the stop has flushed and committed by then, and nothing of the
    raw path runs again, so it is no failure (it made a SIGTERM during a rebalance exit 255)."""
    def call(*args):
        try:
            callback(*args)
        except Exception as exc:
            log.debug("raw path callback failed", exc_info=True)
            if state.stopping and isinstance(exc, RuntimeError) and "NetworkSelector closed" in str(exc):
                return
            state.fail(ClientFailed(f"raw path: {describe(exc)}"))
    return call


class Cluster:
    """One side's protocol client on a shared selector: metadata, leaders, requests.

    Its blocking calls wait on the selector in steps and end at a stop of ``state`` (the run's
    ``RunState``; none: they wait out their timeouts)."""

    def __init__(self, net, conf: Dict[str, str], client_id: str, side: str, state=None) -> None:
        from kafka.net.compat import KafkaNetClient

        from .frames import AnswerNotDecoded, install

        install()
        self._not_decoded = AnswerNotDecoded  # frames imports kafka-python: where a Cluster is made
        self.side = side
        self.bootstrap = conf["bootstrap.servers"]
        self._net = net
        self._state = state
        self.client = KafkaNetClient(net=net, **net_configs(conf, client_id))
        # kafka-python asks brokers to create the topics it tracks when they are missing: a
        # source topic deleted while mirrored would come back, a target topic with the broker's
        # default partitions. The mirror creates target topics itself.
        self.client.cluster.config["allow_auto_create_topics"] = False
        self._bootstrap = None  # its future, until the cluster answered
        self._topics: set = set()
        self._seen: set = set()  # tracked topics the metadata had
        self._missing: set = set()  # of those, the ones it lacks now, already logged
        self._undecoded, self._last_undecoded = 0, None  # answers in a row not decoded, and the last error

    def connect(self, topics: Iterable[str] = (), meanwhile: Optional[Callable[[], None]] = None) -> bool:
        """Bootstrap; the metadata of ``topics`` comes with it. A topic tracked only afterwards
        waits out kafka-python's retry backoff since the bootstrap's request, which would delay
        the first fetch after the assignment.

        A cluster that cannot be reached is tried again (with the reconnect backoff) until it
        answers, as the confluent clients keep trying; False when a stop (or a failure) came
        first. ``meanwhile`` runs at every step of the wait: the stream serves its confluent
        clients' errors there, so a refused login fails the run as in record mode."""
        self._add(topics)
        future = self._bootstrap = self.client._manager.bootstrap_async()  # no deadline: retried until closed
        started, wait_s = time.monotonic(), UNREACHABLE_FIRST_LOG_S
        _last_failure.reason = "no answer"
        while not self._wait(future, wait_s * 1000, meanwhile):
            if self._stopping():
                return False
            log.error("Cannot reach the %s cluster at %s for the raw path: %s (for %.0f s; retrying)",
                      self.side, self.bootstrap, _last_failure.reason, time.monotonic() - started)
            wait_s = UNREACHABLE_LOG_EVERY_S
        if future.failed():
            raise future.exception
        return True

    def track(self, topics: Iterable[str], timeout_ms: int = METADATA_TIMEOUT_MS) -> None:
        """Keep metadata (partition leaders) for these topics, waiting for it when they are new."""
        future = self._add(topics)
        if future is not None:
            self._wait(future, timeout_ms)

    def ask(self, node: int, request, timeout_ms: int):
        """One request and its answer: None when a stop came first; a ``KafkaTimeoutError`` or
        the request's failure when it failed."""
        from kafka.errors import KafkaTimeoutError

        deadline = time.monotonic() + timeout_ms / 1000
        while not self.ready(node):  # ready() starts the connection
            if self._stopping():
                return None
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"node {node} not ready after {timeout_ms} ms")
            self._net.poll(timeout_ms=WAIT_STEP_MS)
        future = self.send(node, request)
        if not self._wait(future, max(0.0, deadline - time.monotonic()) * 1000):
            if self._stopping():
                return None
            raise KafkaTimeoutError(f"no answer from node {node} in {timeout_ms} ms")
        if future.failed():
            raise future.exception
        return future.value

    def _wait(self, future, timeout_ms: float, meanwhile: Optional[Callable[[], None]] = None) -> bool:
        """Drive the selector until ``future`` is done (True), the timeout passed or a stop."""
        deadline = time.monotonic() + timeout_ms / 1000
        while not future.is_done:
            if meanwhile is not None:
                meanwhile()
                if future.is_done:  # answered while ``meanwhile`` polled
                    break
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0 or self._stopping():
                return False
            self._net.poll(timeout_ms=min(WAIT_STEP_MS, left_ms), future=future)
        return True

    def _stopping(self) -> bool:
        return self._state is not None and self._state.stopping

    def _add(self, topics: Iterable[str]):
        """Track these topics too: the future of the metadata request that asks for them, or None
        when none of them is new."""
        topics = set(topics)
        if topics <= self._topics:
            return None
        self._topics |= topics
        return self.client.cluster.set_topics(sorted(self._topics))

    def leader(self, topic: str, partition: int) -> Optional[int]:
        from kafka import TopicPartition

        leader = self.client.cluster.leader_for_partition(TopicPartition(topic, partition))
        return None if leader is None or leader < 0 else leader

    def route(self, topic: str, partition: int) -> Optional[int]:
        """The partition's leader, or None with new metadata asked for (it moved, or is being
        elected, or the topic is new). A topic the metadata had and lacks now (deleted) is logged
        once."""
        leader = self.leader(topic, partition)
        if leader is not None:
            self._seen.add(topic)
            self._missing.discard(topic)
            return leader
        if topic in self._seen and topic not in self._missing and not self.partitions(topic):
            self._missing.add(topic)
            log.warning("Topic %s is not in the %s cluster's metadata (deleted?); its partitions wait for it "
                        "(the raw path never creates it)", topic, self.side)
        self.refresh()
        return None

    def partitions(self, topic: str) -> List[int]:
        return sorted(self.client.cluster.partitions_for_topic(topic) or ())

    def refresh(self) -> None:
        """Ask for new metadata (a leader moved); it arrives while the selector is polled.
        kafka-python refreshes in one coroutine that ends for good when a refresh it awaits fails
        outside its retry (``ClusterMetadata._refresh_loop``): the leaders would then never move
        again and a partition whose leader moved would wait for ever. Such a loop is restarted."""
        self.revive()
        self.client.cluster.request_update()  # (re)starts the loop when none runs

    def revive(self) -> None:
        """Restart the metadata refresh if it ended (see ``refresh``); cheap, for every wait on
        a broker that is not ready: a leader on a broker that stays away is moved only by it."""
        cluster = self.client.cluster
        loop = cluster._refresh_loop_future
        if loop is not None and loop.is_done and not cluster.closed:
            log.warning("The %s cluster's metadata refresh for the raw path stopped (%s); restarting it",
                        self.side, loop.exception if loop.failed() else "ended")
            cluster._refresh_loop_future = None
            cluster.start_refresh_loop()

    def ready(self, node: int) -> bool:
        """Connected and able to take a request now; otherwise a connection is under way (with
        kafka-python's reconnect backoff), and the caller tries again on a later round."""
        return self.client.ready(node)

    def send(self, node: int, request):
        """Send a request; the returned future resolves while the selector is polled."""
        future = self.client.send(node, request)
        future.add_both(self._answered)
        return future

    def _answered(self, result) -> None:
        """Count the answers in a row that could not be decoded (a closed connection fails every
        request in flight on it with one error: counted once) and fail the run at the limit."""
        if not isinstance(result, self._not_decoded):
            if not isinstance(result, BaseException):
                self._undecoded, self._last_undecoded = 0, None
            return
        if result is self._last_undecoded:
            return
        self._undecoded, self._last_undecoded = self._undecoded + 1, result
        if self._undecoded >= UNDECODED_LIMIT and self._state is not None:
            self._state.fail(ClientFailed(f"raw path: {self._undecoded} answers in a row from the {self.side} "
                                          f"cluster could not be decoded; the last: {result}"))

    def close(self) -> None:
        # Only this client's connections: the selector is shared and closed by its owner.
        self.client._manager.close()
        if self._bootstrap is not None and not self._bootstrap.is_done:
            # A stop during the retries: let the bootstrap end on the close while the selector
            # runs (left pending, it is torn down with the interpreter, and says so on stderr).
            self._net.poll(timeout_ms=WAIT_STEP_MS, future=self._bootstrap)
