"""The plain consume/produce loop a Python user writes from confluent-kafka's examples
(examples/consumer.py + examples/producer.py): poll one message, produce it, poll(0), and on
BufferError poll and retry; commit every second after a flush. Exits after ``count`` records.

    python confluent_loop.py SOURCE TARGET TOPIC COUNT [--compression lz4]
"""

import argparse
import time

from confluent_kafka import Consumer, Producer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("topic")
    parser.add_argument("count", type=int)
    parser.add_argument("--compression", default="none")
    args = parser.parse_args()
    consumer = Consumer({"bootstrap.servers": args.source, "group.id": f"loop-{time.time()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 2000, "heartbeat.interval.ms": 200,
                         "max.poll.interval.ms": 60000})
    producer = Producer({"bootstrap.servers": args.target, "acks": "all",
                         "compression.type": args.compression, "linger.ms": 5})
    consumer.subscribe([args.topic])
    done, last_commit = 0, time.monotonic()
    while done < args.count:
        msg = consumer.poll(1.0)
        if msg is None or msg.error():
            continue
        while True:
            try:
                producer.produce(args.topic, msg.value(), msg.key(), headers=msg.headers())
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        done += 1
        if time.monotonic() - last_commit > 1.0:
            producer.flush()
            consumer.commit(asynchronous=False)
            last_commit = time.monotonic()
    producer.flush()
    consumer.commit(asynchronous=False)
    consumer.close()


if __name__ == "__main__":
    main()
