"""The Python client's own limits on these brokers: produce-only and consume-only rates,
tuned as test-broker.md section 9 found best. Prints one JSON line: records and seconds.

    python limit.py produce BOOTSTRAP TOPIC COUNT SIZE [--compression lz4]
    python limit.py consume BOOTSTRAP TOPIC COUNT
"""

import argparse
import json
import os
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient


def produce(args) -> float:
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 10,
                         "batch.size": 1000000, "batch.num.messages": 100000,
                         "queue.buffering.max.messages": 2000000, "queue.buffering.max.kbytes": 2097151,
                         "compression.type": args.compression, "message.max.bytes": 10000000})
    value = os.urandom(args.size)
    partitions = 8
    started = time.monotonic()
    for i in range(args.count):
        while True:
            try:
                producer.produce(args.topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(600)
    return time.monotonic() - started


def consume(args) -> float:
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    partitions = len(admin.list_topics(timeout=10).topics[args.topic].partitions)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "limit", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608,
                         "fetch.wait.max.ms": 100, "queued.min.messages": 1000000,
                         "enable.partition.eof": False})
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(partitions)])
    started, done = time.monotonic(), 0
    while done < args.count:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None or msg.error().code() != KafkaError._PARTITION_EOF:
                done += 1
    seconds = time.monotonic() - started
    consumer.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["produce", "consume"])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("count", type=int)
    parser.add_argument("size", type=int, nargs="?", default=0)
    parser.add_argument("--compression", default="none")
    args = parser.parse_args()
    seconds = produce(args) if args.mode == "produce" else consume(args)
    print(json.dumps({"records": args.count, "seconds": seconds}))


if __name__ == "__main__":
    main()
