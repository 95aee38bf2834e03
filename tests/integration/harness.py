"""Helpers for tests against real clusters: client factories, seeding, reading, waiting.

The clusters are Apache Kafka (the default: ``MIRROR_MAKER_TEST_BROKER=kafka``, the newest 4.x;
``kafka-3.9`` for the last line with MirrorMaker v1), Tansu (``tansu``, the demo's embedded
broker), or your own (``MIRROR_MAKER_TEST_SOURCE_BOOTSTRAP`` and ``..._TARGET_BOOTSTRAP``).
Everything waits on conditions with deadlines; nothing sleeps blindly.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror_maker.clients.polling import poll
from mirror_maker.embedded import die_with_parent

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "bin" / "kafka-mirror-maker.py"

_quiet = logging.getLogger("tests.librdkafka")

BROKER_ENV = "MIRROR_MAKER_TEST_BROKER"
BROKERS = ("kafka", "kafka-3.9", "tansu")
SOURCE_ENV = "MIRROR_MAKER_TEST_SOURCE_BOOTSTRAP"
TARGET_ENV = "MIRROR_MAKER_TEST_TARGET_BOOTSTRAP"


def broker_kind() -> str:
    """``kafka``, ``kafka-3.9`` or ``tansu`` (brokers the tests start), or ``byo`` (yours).

    An explicit ``MIRROR_MAKER_TEST_BROKER`` wins; otherwise the two bootstrap variables mean
    your own clusters; otherwise Apache Kafka 4.x.
    """
    chosen = os.environ.get(BROKER_ENV, "").strip()
    if chosen:
        if chosen not in BROKERS:
            raise ValueError(f"{BROKER_ENV}={chosen}: use one of {', '.join(BROKERS)}")
        return chosen
    if os.environ.get(SOURCE_ENV) and os.environ.get(TARGET_ENV):
        return "byo"
    return "kafka"


def byo() -> bool:
    """True when the tests run against the user's own clusters."""
    return broker_kind() == "byo"


def on_tansu() -> bool:
    """True on the embedded Tansu broker, whose known bugs some tests must step around."""
    return broker_kind() == "tansu"


def group_settings() -> Dict[str, str]:
    """Group timeouts that notice a killed member in seconds. Brokers the tests start allow a
    2 s session; yours probably keep Kafka's minimum (group.min.session.timeout.ms=6000)."""
    session = 6000 if byo() else 2000
    return {"session.timeout.ms": str(session), "heartbeat.interval.ms": str(session // 10),
            "max.poll.interval.ms": "10000"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


#: A group's coordinator moving or loading its partition: not retriable by librdkafka's flag,
#: but gone once another node has loaded it.
COORDINATOR_MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                      KafkaError.COORDINATOR_NOT_AVAILABLE)


def wait_until(condition: Callable[[], object], timeout_s: float, what: str, step_s: float = 0.1,
               evidence: Optional[Callable[[], str]] = None):
    """Poll ``condition`` until it returns a truthy value; at the deadline fail naming ``what``,
    with what ``evidence()`` shows (a log's end, what was there instead)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            shown = ""
            if evidence is not None:
                try:
                    shown = f"; evidence:\n{evidence()}"
                except Exception as exc:  # the evidence must not hide the timeout
                    shown = f"; the evidence could not be read: {exc!r}"
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}{shown}")
        time.sleep(step_s)


class Rec(NamedTuple):
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple
    timestamp: Optional[int]


def make_records(count: int, prefix: str = "r", size: int = 0, start: int = 0) -> List[Rec]:
    base_ts = int(time.time() * 1000) - 3_600_000
    records = []
    for i in range(start, start + count):
        value = f"{prefix}-{i}".encode()
        if size > len(value):
            value = value + b"x" * (size - len(value))
        records.append(Rec(f"k{i % 97}".encode(), value,
                           (("seq", str(i).encode()), ("src", b"test")), base_ts + i))
    return records


@dataclass
class Cluster:
    """A cluster under test. ``broker`` is the KafkaCluster or EmbeddedBroker the tests started
    (None for your own clusters, or for a view of a cluster through a proxy or a TLS listener)."""

    name: str
    bootstrap: str
    broker: object = None
    client_conf: Optional[dict] = None  # e.g. TLS settings, for every client the tests make
    #: The session's TLS material (the Kafka clusters' SSL listeners use it).
    tls: object = None

    def view(self, name: str, bootstrap: str, client_conf: Optional[dict] = None) -> "Cluster":
        """The same cluster reached another way (a proxy, another listener)."""
        return Cluster(name, bootstrap, client_conf=client_conf)

    def proxy(self, log_dir: Path, name: str = "proxy"):
        """A started proxy in front of this cluster (``cut()``/``restore()`` make an outage), and
        the view of the cluster through it: ``tansu proxy`` on Tansu, a TCP proxy on the
        listener of Apache Kafka that advertises the proxy's port."""
        from mirror_maker.embedded import EmbeddedBroker, EmbeddedProxy

        if isinstance(self.broker, EmbeddedBroker):
            proxy = EmbeddedProxy(self.bootstrap, log_dir, name).start()
        else:
            from ..brokers.tcp_proxy import TcpProxy

            proxy = TcpProxy(self.broker.proxy_port, self.broker.address("PROXIED"), log_dir, name).start()
        return proxy, self.view(f"{self.name}-via-{name}", proxy.bootstrap)

    def admin(self) -> AdminClient:
        if not hasattr(self, "_admin"):
            self._admin = AdminClient({**(self.client_conf or {}), "bootstrap.servers": self.bootstrap,
                                       "logger": _quiet})
        return self._admin

    def producer(self, **overrides) -> Producer:
        conf = {**(self.client_conf or {}), "bootstrap.servers": self.bootstrap, "linger.ms": 5,
                "logger": _quiet}
        conf.update(overrides)
        return Producer(conf)

    def consumer(self, group: Optional[str] = None, **overrides) -> Consumer:
        conf = {**(self.client_conf or {}), "bootstrap.servers": self.bootstrap,
                "group.id": group or unique("reader"),
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "enable.partition.eof": True, "logger": _quiet, **group_settings()}
        conf.update(overrides)
        return Consumer(conf)

    def create_topic(self, prefix: str = "topic", partitions: int = 1, name: str = None,
                     config: Optional[Dict[str, str]] = None) -> str:
        name = name or unique(prefix)
        futures = self.admin().create_topics([NewTopic(name, num_partitions=partitions, config=config or {})],
                                             operation_timeout=30, request_timeout=30)
        futures[name].result()
        wait_until(lambda: self.partitions(name) == partitions, 15, f"topic {name} in metadata")
        return name

    def partitions(self, topic: str) -> int:
        # All topics, not list_topics(topic): a metadata request for one topic from an
        # AdminClient (a producer inside librdkafka) may auto-create it.
        meta = self.admin().list_topics(timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        return len(meta.partitions)

    def topic_exists(self, topic: str) -> bool:
        return topic in self.admin().list_topics(timeout=10).topics

    def delete_topics(self, *topics: str) -> None:
        """Delete the topics and wait until metadata no longer lists them."""
        present = [t for t in topics if self.topic_exists(t)]
        if present:
            for future in self.admin().delete_topics(present, operation_timeout=30).values():
                future.result()
        wait_until(lambda: not any(self.topic_exists(t) for t in topics), 30, f"{topics} deleted")

    def delete_group(self, group: str, timeout_s: float = 30.0) -> None:
        """Forget a consumer group and its committed offsets (it must have no members), retrying
        while its coordinator moves or loads (on a busy machine, right after a cluster's start)."""
        def deleted() -> bool:
            try:
                self.admin().delete_consumer_groups([group], request_timeout=10)[group].result()
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() == KafkaError.GROUP_ID_NOT_FOUND:  # a group that never committed
                    return True
                if error.retriable() or error.code() in COORDINATOR_MOVING:
                    return False
                raise
            return True
        wait_until(deleted, timeout_s, f"the deletion of group {group}", step_s=0.5)

    def seed(self, topic: str, records: Iterable[Rec], partition: Optional[int] = None,
             **producer_overrides) -> int:
        """Produce every record (acks=all, idempotent: a retry never reorders them) and fail unless
        each one was acknowledged."""
        producer = self.producer(acks="all", **{"enable.idempotence": True, **producer_overrides})
        errors = []
        count = 0

        def delivered(err, msg):
            if err is not None:
                errors.append(err)

        for rec in records:
            kwargs = {"headers": list(rec.headers), "on_delivery": delivered}
            if rec.timestamp is not None:
                kwargs["timestamp"] = rec.timestamp
            if partition is not None:
                kwargs["partition"] = partition
            while True:
                try:
                    producer.produce(topic, rec.value, rec.key, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
            count += 1
            producer.poll(0)
        remaining = producer.flush(60)
        assert remaining == 0 and not errors, f"seeding failed: {remaining} left, {errors[:3]}"
        return count

    def read_all(self, topic: str, expected: Optional[int] = None,
                 timeout_s: float = 60.0, **overrides) -> List:
        """Every record of ``topic`` (all partitions, from the start) as (partition, offset, Rec).

        Reads until each partition reported its end and, if ``expected`` is given, at least
        that many records arrived; fails at the deadline.
        """
        n = wait_until(lambda: self.partitions(topic), timeout_s, f"topic {topic} to exist")
        consumer = self.consumer(group=unique("read-all"), **overrides)
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(n)])
        out, at_end = [], set()
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                for msg in poll(consumer, 10000, 0.5):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            at_end.add(msg.partition())
                        continue
                    at_end.discard(msg.partition())
                    ts_type, ts = msg.timestamp()
                    out.append((msg.partition(), msg.offset(),
                                Rec(msg.key(), msg.value(), tuple(msg.headers() or ()), ts)))
                if len(at_end) == n and (expected is None or len(out) >= expected):
                    return out
        finally:
            consumer.close()
        raise AssertionError(f"read {len(out)} records of {topic}, expected {expected}")

    def read_values(self, topic: str, expected: Iterable[bytes], timeout_s: float = 120.0,
                    evidence: Optional[Callable[[], str]] = None) -> List:
        """Read ``topic`` from the start until every expected value is there (duplicates allowed).

        Counting rows is not enough after an outage: duplicates can make up the number before
        the last records arrive. A failure tells a hole from a slow mirror: how far each
        partition was read against its end, and ``evidence()`` (the mirror's log)."""
        missing = set(expected)
        n = wait_until(lambda: self.partitions(topic), timeout_s, f"topic {topic} to exist")
        consumer = self.consumer(group=unique("read-values"))
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(n)])
        rows = []
        deadline = time.monotonic() + timeout_s
        try:
            while missing and time.monotonic() < deadline:
                for msg in poll(consumer, 10000, 0.5):
                    if msg.error() is None:
                        missing.discard(msg.value())
                        rows.append((msg.partition(), msg.offset(),
                                     Rec(msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])))
        finally:
            consumer.close()
        if missing:
            read_to = {}
            for partition, offset, _rec in rows:
                read_to[partition] = max(read_to.get(partition, -1), offset + 1)
            shown = f"; evidence:\n{evidence()}" if evidence is not None else ""
            raise AssertionError(f"{len(missing)} values never reached {topic}, e.g. {sorted(missing)[:5]}; "
                                 f"read to {dict(sorted(read_to.items()))} of {self.end_offsets(topic)}{shown}")
        return rows

    def end_offsets(self, topic: str, isolation: str = "read_committed") -> Dict[int, int]:
        """Each partition's end now: the last stable offset (read_committed), or the high watermark
        (read_uncommitted: the offset the next record will get, past open transactions)."""
        consumer = self.consumer(**{"isolation.level": isolation})
        try:
            return {p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10)[1]
                    for p in range(self.partitions(topic))}
        finally:
            consumer.close()

    def count(self, topic: str) -> int:
        """How many records ``topic`` holds now (reads them; ListOffsets is unreliable on Tansu)."""
        return len(self.read_all(topic, timeout_s=30))

    def holds(self, topic: str, records: int, timeout_s: float = 10.0) -> bool:
        """Whether ``topic`` holds at least ``records`` records, read from the start within
        ``timeout_s`` (``count`` waits until every partition is at its end at once, which a topic
        written to all the time may never be)."""
        partitions = self.partitions(topic)
        if not partitions:
            return False
        consumer = self.consumer(group=unique("holds"))
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        seen, deadline = 0, time.monotonic() + timeout_s
        try:
            while seen < records and time.monotonic() < deadline:
                seen += sum(1 for msg in poll(consumer, 10000, 0.5) if msg.error() is None)
            return seen >= records
        finally:
            consumer.close()

    def committed(self, group: str, topic: str, partitions: Optional[int] = None) -> Dict[int, int]:
        """The group's committed offsets (retried while the coordinator moves or loads); give
        ``partitions`` for a topic this cluster does not hold (exactly-once keeps the source
        topic's offsets in a group on the target).

        Read as read_uncommitted: librdkafka then asks without require_stable, so offsets a
        transaction has sent but not committed are left out instead of waited for. A mirror
        killed between its offsets and its commit leaves them pending until its successor fences
        it or the transaction times out (60 s): a read_committed fetch timed out on them."""
        consumer = self.consumer(group=group, **{"isolation.level": "read_uncommitted"})
        try:
            n = partitions or self.partitions(topic)
            for attempt in range(20):
                try:
                    tps = consumer.committed([KafkaTopicPartition(topic, p) for p in range(n)], timeout=10)
                    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
                except KafkaException as exc:
                    if not exc.args[0].retriable() and exc.args[0].code() not in COORDINATOR_MOVING:
                        raise
                    time.sleep(0.25)
            raise AssertionError(f"the committed offsets of {group} could not be read")
        finally:
            consumer.close()


def write_properties(path: Path, settings: Dict[str, object], comment: str = "") -> Path:
    lines = [f"# {comment}"] if comment else []
    lines += [f"{key}={value}" for key, value in settings.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class MirrorFiles:
    consumer: Path
    producer: Path
    group: str


def mirror_files(tmp_path: Path, source: Cluster, target: Cluster, group: Optional[str] = None,
                 consumer: Optional[dict] = None, producer: Optional[dict] = None) -> MirrorFiles:
    group = group or unique("mirror")
    consumer_settings = {"bootstrap.servers": source.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "metadata.max.age.ms": 2000,
                         **group_settings(), **(consumer or {})}
    producer_settings = {"bootstrap.servers": target.bootstrap, **(producer or {})}
    return MirrorFiles(
        write_properties(tmp_path / f"{group}-consumer.properties", consumer_settings),
        write_properties(tmp_path / f"{group}-producer.properties", producer_settings),
        group,
    )


class MirrorProcess:
    """``bin/kafka-mirror-maker.py`` as a user runs it, in a subprocess with its log captured;
    or, given ``command``, another mirror (Kafka's own) run the same way."""

    def __init__(self, args: List[str], log_path: Path, env: Optional[dict] = None,
                 cwd: Optional[Path] = None, command: Optional[List[str]] = None) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.process = subprocess.Popen(
            command or [sys.executable, str(BIN), *args], stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=str(cwd or log_path.parent),
            preexec_fn=die_with_parent(signal.SIGKILL),  # never outlive a killed test run
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the log, with whether the process still runs: a failed wait's evidence."""
        state = "running" if self.process.poll() is None else f"exited with {self.process.returncode}"
        return f"({self.log_path.name}, {state}) ...{self.log()[-chars:]}"

    def wait_for_log(self, text: str, timeout_s: float = 30.0) -> None:
        wait_until(lambda: text in self.log() or self.process.poll() is not None, timeout_s,
                   f"'{text}' in the mirror log", evidence=self.log_tail)
        assert text in self.log(), f"mirror exited ({self.process.returncode}) before '{text}':\n{self.log()}"

    def wait(self, timeout_s: float = 60.0) -> int:
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            stacks = self._dump_stacks()
            log = self.log()
            self.process.kill()  # a hung mirror must not hold CPU and ports for later tests
            self.process.wait()
            # The stacks first: a long failure report is cut in its middle.
            raise AssertionError(f"the mirror did not exit within {timeout_s:.0f} s (killed); every thread's "
                                 f"stack:\n{stacks}\nthe end of its log:\n{log[-20000:]}") from None
        finally:
            self._log.close()

    def _dump_stacks(self) -> str:
        """Every thread's stack, written into the log (SIGUSR1: ``ops.stop_watchdog``); ours only."""
        if self.process.poll() is not None or self.process.args[1:2] != [str(BIN)]:
            return "(not ours, or already ended)"
        before = len(self.log())
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        seen = ""
        while time.monotonic() < deadline:  # until the dump is there and has stopped growing
            time.sleep(0.2)
            now = self.log()[before:]
            if "most recent call first" in now and now == seen:
                break
            seen = now
        return seen[:20000]

    def stop(self, signum: int = signal.SIGTERM, timeout_s: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.wait(timeout_s)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._log.close()


class BackgroundProducer:
    """Writes "<prefix>-<n>" values at about ``rate`` per second (acks=all) until stopped.

    Like Kafka's VerifiableProducer in the MirrorMaker system test: ``acked`` holds every value
    the source acknowledged, which is what must reach the target. With ``keys``, record n has key
    ``k<n mod keys>`` and a ``seq`` header n, so that the order per key can be checked on the target
    (``first_deliveries_out_of_order``); such a producer is idempotent, so that its retries never
    reorder a key.
    """

    def __init__(self, cluster: Cluster, topic: str, rate: int = 500, prefix: str = "v", keys: int = 0,
                 linger_ms: int = 0) -> None:
        import threading

        self._producer = cluster.producer(acks="all", **{"linger.ms": linger_ms, "enable.idempotence": keys > 0})
        self._topic, self._rate, self._prefix, self._keys = topic, rate, prefix, keys
        self.acked: List[bytes] = []
        #: Each acked value's (partition, offset) on the source.
        self.positions: Dict[bytes, Tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="background-producer", daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value())
            self.positions[msg.value()] = (msg.partition(), msg.offset())

    def _run(self) -> None:
        n, started = 0, time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self._rate)
            while n < due:
                keyed = {"key": f"k{n % self._keys}".encode(), "headers": [("seq", str(n).encode())]} \
                    if self._keys else {}
                try:
                    self._producer.produce(self._topic, f"{self._prefix}-{n}".encode(),
                                           on_delivery=self._delivered, **keyed)
                except BufferError:  # the source is away long enough to fill the queue: wait
                    break
                n += 1
            self._producer.poll(0.01)
        self._producer.flush(30)

    def start(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def stop(self) -> List[bytes]:
        self._stop.set()
        self._thread.join(60)
        return list(self.acked)


def assert_order_per_key(rows) -> None:
    """Every key's records are on the target in their source order (the ``seq`` header that
    ``make_records`` writes), read in target offset order. Records of one key share a source
    partition, so this is the order per partition that MirrorMaker promises."""
    by_key: Dict[bytes, List[int]] = {}
    for _partition, _offset, rec in sorted(rows, key=lambda row: (row[0], row[1])):
        seq = dict(rec.headers).get("seq")
        by_key.setdefault(rec.key, []).append(int(seq))
    out_of_order = {key: seqs for key, seqs in by_key.items() if seqs != sorted(seqs)}
    assert not out_of_order, f"{len(out_of_order)} keys out of order, e.g. {list(out_of_order.items())[:1]}"


def first_deliveries_out_of_order(rows) -> Dict[bytes, List[int]]:
    """Keys whose records first reached the target out of their source order (the ``seq`` header),
    read in target offset order, with those first deliveries' sequence numbers.

    At-least-once mirroring may write a range again after a failure: a copy of a record already
    there is a duplicate, not a reordering. What must never happen is a record arriving for the
    first time before an earlier record of its key does."""
    firsts: Dict[bytes, List[int]] = {}
    seen = set()
    for _partition, _offset, rec in sorted(rows, key=lambda row: (row[0], row[1])):
        seq = int(dict(rec.headers)["seq"])
        if (rec.key, seq) not in seen:
            seen.add((rec.key, seq))
            firsts.setdefault(rec.key, []).append(seq)
    return {key: seqs for key, seqs in firsts.items() if seqs != sorted(seqs)}


def hold(seconds: float, check: Callable[[], None], step_s: float = 1.0) -> None:
    """Keep a condition a test made (an outage) for ``seconds``, calling ``check`` every step."""
    deadline = time.monotonic() + seconds
    while True:
        check()
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(step_s, left))


def values(rows) -> List[bytes]:
    return [rec.value for _p, _o, rec in rows]


def mirror_args(files: MirrorFiles, include: str, *extra: str) -> List[str]:
    return ["--consumer.config", str(files.consumer), "--producer.config", str(files.producer),
            "--include", include, *extra]


def wait_settled(*mirrors: "MirrorProcess", timeout_s: float = 60.0) -> None:
    """Wait until the group is stable for these mirrors: each one's last rebalance event is an
    assignment, and no new event appeared between two looks half a second apart.

    Stopping a member in the middle of a rebalance can stall Tansu's group coordinator for
    minutes; tests that change membership wait for this first, on every broker.
    """
    def events(mirror):
        return [line for line in mirror.log().splitlines() if "] Assigned " in line or "] Revoked " in line]

    previous = {}

    def stable() -> bool:
        current = {id(m): len(events(m)) for m in mirrors}
        settled = all(events(m) and "] Assigned " in events(m)[-1] for m in mirrors)
        ok = settled and current == previous
        previous.clear()
        previous.update(current)
        return ok

    wait_until(stable, timeout_s, "the consumer group to settle", step_s=0.5)


# -- the modes every guarantee is proven in ----------------------------------------------------

class Mode:
    def __init__(self, name: str, args: List[str]) -> None:
        self.name, self.args = name, args

    @property
    def exactly_once(self) -> bool:
        return self.name == "exactly-once"

    def committed(self, source, target, group: str, topic: str, remote: str = None) -> Dict[int, int]:
        """Where the mode keeps the group's offsets: the target in exactly-once (under the target
        topic, ``remote`` where a replication policy renames it), else the source."""
        if self.exactly_once:
            return target.committed(group, remote or topic)
        return source.committed(group, topic)

    def __repr__(self) -> str:
        return self.name


RECORDS, RAW, EXACTLY_ONCE = Mode("records", []), Mode("raw", ["--use.raw.bytes"]), Mode("exactly-once", ["--exactly.once"])
#: Tansu's read_committed serves aborted records: exactly-once is proven on Apache Kafka only.
MODES = [RECORDS, RAW, pytest.param(EXACTLY_ONCE, marks=pytest.mark.needs_kafka_feature(
    "read_committed that hides aborted transactions"))]
MODE_IDS = ["records", "raw", "exactly-once"]


def raw_queue_problem(log: str) -> Optional[str]:
    """What is wrong with raw mode's batches waiting for the target while it is away, as its wait
    lines count them (batches and bytes): none said, or more than the fetcher's bound (fetching
    pauses rather than queueing the outage)."""
    from mirror_maker.shallow.fetcher import BUFFER_BATCHES, BUFFER_BYTES

    waiting = [(int(batches), int(size)) for batches, size in
               re.findall(r"waiting for the target to acknowledge (\d+) batches \((\d+) bytes\)", log)]
    if not waiting:
        return "a raw mirror waiting for its target did not say how many batches wait"
    most = (max(b for b, _ in waiting), max(n for _, n in waiting))
    if most[0] > BUFFER_BATCHES or most[1] > BUFFER_BYTES:
        return f"{most[0]} batches of {most[1]} bytes queued for the target (bound {BUFFER_BATCHES}, {BUFFER_BYTES})"
    return None
