"""The limits on these brokers, each printed as one JSON line (records and seconds):

* produce: the Python client's produce-only rate (tuned as test-broker.md section 9 found best);
* consume: its consume-only rate;
* copy: the fastest faithful copy this client makes in one thread: consume -> produce of each
  record's key, value, timestamp and headers to the same topic on TARGET, with the mirror's own
  client defaults and nothing else (no handler, metrics or commits): what the mirror's record
  mode is set against to see what its own work costs; with ``--threads N``, N such loops in one
  process into one producer: what the mirror's streams are set against;
* ingest: the target broker's own ingest limit for the source's batches as they are: every batch
  of the topic is fetched into memory first (not timed), then produced to TARGET as whole
  batches (the raw path's idempotent producer), timed until the target acknowledged them all.

    python limit.py produce BOOTSTRAP TOPIC COUNT SIZE [--compression lz4]
    python limit.py consume BOOTSTRAP TOPIC COUNT
    python limit.py copy SOURCE TOPIC COUNT --target TARGET [--compression lz4] [--threads N]
    python limit.py ingest SOURCE TOPIC COUNT --target TARGET

With ``--seconds S`` (and ``--settle X``) a mode runs for X + S seconds, or until COUNT records,
and its steady rate is the records done (produce, copy, ingest: acknowledged by the target) over
the last S seconds, as the benchmark times the mirrors; the line then has ``steady_records_per_s``
and ``steady_window_s`` too. A SIGTERM ends the loop there (and the line is printed): the
benchmark times produce, copy and ingest on the target as it times the mirrors. The ingest limit
then sends the first batches it fetched (at most INGEST_PREFETCH_BYTES) again and again: the
target's ingest, not the source's size, is measured.
"""

import argparse
import json
import os
import signal
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from cpu_split import own_thread_times


#: The most the steady ingest limit fetches before it sends the same batches round.
INGEST_PREFETCH_BYTES = 512 * 1024 * 1024


class _Loop:
    """A mode's timed loop: its seconds, and its thread's seconds running and waiting for a core
    in it (the benchmark's CPU split shows them: whether the machine held the loop back). With a
    window (``--seconds``), ``running(done)`` says whether to go on and notes the records done
    when the settling time ends, so that ``steady`` is the rate over the window alone."""

    window_s = settle_s = None
    #: SIGTERM came (the benchmark's watcher timed the window on the target): the loop ends there.
    stopped = False

    def start(self) -> None:
        self.started, self.times = time.monotonic(), own_thread_times()
        self._mark = None

    def running(self, done: int) -> bool:
        if self.stopped:
            return False
        if self.window_s is None:
            return True
        now = time.monotonic()
        if self._mark is None:
            if now - self.started >= self.settle_s:
                self._mark = (now, done)
            return True
        # From the mark, not the start: a loop that checks between batches marks a little late,
        # and its window is still whole.
        return now - self._mark[0] < self.window_s

    def steady(self, done: int) -> dict:
        if self._mark is None:
            return {}
        now = time.monotonic()
        return {"steady_records_per_s": (done - self._mark[1]) / (now - self._mark[0]),
                "steady_window_s": now - self._mark[0], "records_done": done}

    def stop(self) -> float:
        running, waiting = own_thread_times()
        self.seconds = time.monotonic() - self.started
        self.running_s, self.waiting = running - self.times[0], waiting - self.times[1]
        return self.seconds


LOOP = _Loop()
STEADY: dict = {}


def produce(args) -> float:
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 10,
                         "batch.size": 1000000, "batch.num.messages": 100000,
                         "queue.buffering.max.messages": 2000000, "queue.buffering.max.kbytes": 2097151,
                         "compression.type": args.compression, "message.max.bytes": 10000000})
    value = os.urandom(args.size)
    partitions = 8
    LOOP.start()
    produced = 0
    for i in range(args.count):
        while True:
            try:
                producer.produce(args.topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        produced += 1
        if produced % 1000 == 0 and not LOOP.running(produced - len(producer)):
            STEADY.update(LOOP.steady(produced - len(producer)))
            return LOOP.stop()
    producer.flush(600)
    return LOOP.stop()


def consume(args) -> float:
    partitions = _partition_count(args.bootstrap, args.topic)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "limit", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608,
                         "fetch.wait.max.ms": 100, "queued.min.messages": 1000000,
                         "enable.partition.eof": False})
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(partitions)])
    done = 0
    LOOP.start()
    while done < args.count and LOOP.running(done):
        # No more than what is left: librdkafka's consume(n, timeout) waits until it has n or
        # the timeout passed (asking 10000 of 2,000 records took 1 s of a 1.1 s run).
        for msg in consumer.consume(min(10000, args.count - done), 1.0):
            if msg.error() is None or msg.error().code() != KafkaError._PARTITION_EOF:
                done += 1
    STEADY.update(LOOP.steady(done))
    seconds = LOOP.stop()
    consumer.close()
    return seconds


def copy(args) -> float:
    """The copy loop; with ``--threads N``, N such loops in one process, each with its own consumer
    and a share of the partitions, into one producer (as the mirror's streams are): what threads
    of this client gain or lose against one, whatever the mirror does."""
    _import_the_mirror()
    from mirror_maker.config.client_conf import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS

    partitions = range(_partition_count(args.bootstrap, args.topic))
    producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": args.target, "compression.type": args.compression,
                         "message.max.bytes": 10000000})
    shares = [[TopicPartition(args.topic, p, 0) for p in partitions[i::args.threads]] for i in range(args.threads)]
    consumers = [Consumer({**CONSUMER_DEFAULTS, "bootstrap.servers": args.bootstrap, "group.id": "limit-copy",
                           "enable.partition.eof": False}) for _ in shares]
    copied = [0] * args.threads
    thread_times = [(0.0, 0.0)] * args.threads
    ended = threading.Event()

    def loop(i: int) -> None:
        consumer, produce = consumers[i], producer.produce
        consumer.assign(shares[i])
        began = own_thread_times()
        while not ended.is_set() and sum(copied) < args.count:
            if i == 0 and not LOOP.running(sum(copied) - len(producer)):
                STEADY.update(LOOP.steady(sum(copied) - len(producer)))
                ended.set()
                break
            done = 0  # a local per record, as the one-thread loop always counted: the yardstick's cost
            for msg in consumer.consume(max(1, min(500, args.count - sum(copied))), 1.0):
                if msg.error() is not None:
                    continue
                timestamp = msg.timestamp()[1]
                while True:
                    try:
                        produce(args.topic, msg.value(), msg.key(), -1, None, None, timestamp if timestamp > 0 else 0,
                                msg.headers())
                        break
                    except BufferError:
                        producer.poll(0.05)
                done += 1
            copied[i] += done
            producer.poll(0)
        now = own_thread_times()
        thread_times[i] = (now[0] - began[0], now[1] - began[1])

    LOOP.start()
    if args.threads == 1:
        loop(0)  # in the main thread, as the copy loop always ran
    else:
        threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(args.threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():  # a join with a timeout lets the SIGTERM handler run
                thread.join(0.1)
    if not ended.is_set():  # the whole count copied: wait for the target as the mirror would
        if producer.flush(600):
            raise SystemExit("copy: the target did not acknowledge everything")
    seconds = LOOP.stop()
    if args.threads > 1:  # the busiest thread, as the benchmark's CPU split shows a mirror's
        LOOP.running_s, LOOP.waiting = max(thread_times)
    return seconds


def _partition_count(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return len(admin.list_topics(timeout=10).topics[topic].partitions)


def _import_the_mirror() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def ingest(args) -> float:
    _import_the_mirror()
    from kafka.net.selector import NetworkSelector
    from kafka.protocol.consumer import FetchRequest

    from mirror_maker.engine.state import RunState
    from mirror_maker.ops.metrics import MirrorMetrics
    from mirror_maker.records import TopicPartition as TP
    from mirror_maker.shallow.batches import split
    from mirror_maker.shallow.connections import Cluster
    from mirror_maker.shallow.producer import RawProducer, connections

    net, state = NetworkSelector(), RunState()
    source = Cluster(net, {"bootstrap.servers": args.bootstrap}, "limit-ingest-source", "source")
    targets = connections(net, {"bootstrap.servers": args.target}, "limit-ingest-target")
    for cluster in (source, *targets):
        cluster.connect()
    source.track([args.topic])
    batches, partitions = [], source.partitions(args.topic)
    budget = None if LOOP.window_s is None else INGEST_PREFETCH_BYTES // len(partitions)
    for partition in partitions:
        position, taken = 0, 0
        while budget is None or taken < budget:
            request = FetchRequest(max_wait_ms=200, min_bytes=1, max_bytes=52428800, isolation_level=0,
                                   topics=[FetchRequest.FetchTopic(topic=args.topic, partitions=[
                                       FetchRequest.FetchTopic.FetchPartition(partition=partition, fetch_offset=position,
                                                                              partition_max_bytes=52428800)])],
                                   max_version=12)
            answer = source.client.send_and_receive(source.leader(args.topic, partition), request)
            data = b"".join(p.records or b"" for t in answer.responses for p in t.partitions)  # Tansu: none at the end
            found = [b.checked() for b in split(data) if b.last_offset >= position]
            if not found:
                break
            batches += [(partition, b) for b in found]
            taken += sum(b.size for b in found)
            position = found[-1].next_offset
    producer = RawProducer(targets, net, state, True, MirrorMetrics())
    producer.init_producer_id()
    for target in targets:
        target.track([args.topic])
    LOOP.start()
    if LOOP.window_s is not None:  # the same batches round again, as many waiting as raw mode lets wait
        by_partition = [[b for p, b in batches if p == partition] for partition in partitions]
        batches = [(partition, column[i]) for i in range(max(map(len, by_partition)))
                   for partition, column in zip(partitions, by_partition) if i < len(column)]
        sent = 0
        while LOOP.running(producer.acked_records):
            while producer.queued_batches < 1000:
                partition, batch = batches[sent % len(batches)]
                producer.send(args.topic, partition, batch, TP(args.topic, partition))
                sent += 1
            producer.pump()
            net.poll(timeout_ms=10)
        STEADY.update(LOOP.steady(producer.acked_records))
        return LOOP.stop()
    for partition, batch in batches:
        producer.send(args.topic, partition, batch, TP(args.topic, partition))
    if not producer.flush(None) or producer.acked_records != args.count:
        raise SystemExit(f"ingest failed: {state.failure}, {producer.acked_records} acknowledged")
    return LOOP.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["produce", "consume", "copy", "ingest"])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("count", type=int)
    parser.add_argument("size", type=int, nargs="?", default=0)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--target", default=None, help="copy, ingest: the broker to produce to")
    parser.add_argument("--threads", type=int, default=1, help="copy: loops in threads, a consumer each")
    parser.add_argument("--seconds", type=float, default=None, help="the steady window (after --settle)")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before the steady window")
    args = parser.parse_args()
    LOOP.window_s, LOOP.settle_s = args.seconds, args.settle
    signal.signal(signal.SIGTERM, lambda *_: setattr(LOOP, "stopped", True))
    seconds = {"produce": produce, "consume": consume, "copy": copy, "ingest": ingest}[args.mode](args)
    print(json.dumps({"records": args.count, "seconds": seconds, "running_s": LOOP.running_s,
                      "waiting_s": LOOP.waiting, **STEADY}))


if __name__ == "__main__":
    main()
