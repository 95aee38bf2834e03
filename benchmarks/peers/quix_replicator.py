"""quix-streams' Kafka replicator source (quixstreams.sources.core.kafka.KafkaReplicatorSource),
copying TOPIC from SOURCE to the same topic name on TARGET; stops after ``count`` records.

    python quix_replicator.py SOURCE TARGET TOPIC COUNT [--compression lz4]
"""

import argparse
import multiprocessing
import tempfile
import threading
import time

from quixstreams import Application
from quixstreams.sources.core.kafka import KafkaReplicatorSource


class CountingReplicator(KafkaReplicatorSource):
    """Signals the application to stop once ``count`` records were produced and flushed."""

    def __init__(self, *args, count: int, done, **kwargs):
        super().__init__(*args, **kwargs)
        self._count, self._done, self._seen = count, done, 0

    def produce(self, *args, **kwargs):
        super().produce(*args, **kwargs)
        self._seen += 1
        if self._seen == self._count:
            self.flush()
            self._done.set()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("topic")
    parser.add_argument("count", type=int)
    parser.add_argument("--compression", default="none")
    args = parser.parse_args()
    app = Application(broker_address=args.target, consumer_group=f"quix-{time.time()}",
                      state_dir=tempfile.mkdtemp(prefix="quix-state-"),
                      auto_create_topics=False, producer_extra_config={
                          "compression.type": args.compression, "linger.ms": 5},
                      consumer_extra_config={"session.timeout.ms": 2000, "heartbeat.interval.ms": 200})
    done = multiprocessing.get_context("spawn").Event()  # quix runs each source in its own process
    source = CountingReplicator(name=f"replicator-{time.time()}", app_config=app.config, topic=args.topic,
                                broker_address=args.source, auto_offset_reset="earliest",
                                value_deserializer="bytes", key_deserializer="bytes",
                                count=args.count, done=done, consumer_extra_config={
                                    "session.timeout.ms": 2000, "heartbeat.interval.ms": 200})
    app.add_source(source, topic=app.topic(args.topic, value_serializer="bytes", key_serializer="bytes"))
    threading.Thread(target=lambda: (done.wait(), app.stop()), daemon=True).start()
    app.run()


if __name__ == "__main__":
    main()
