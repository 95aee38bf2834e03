"""A rebalance listener that appends every event to a file (one line each).

    kafka-mirror-maker ... --consumer.rebalance.listener recording_listener.RecordingListener \
                           --rebalance.listener.args /var/log/mirror-rebalances.log

One instance is shared by all mirror threads, so the file is written under a lock.
"""

import threading

from mirror_maker import RebalanceListener


class RecordingListener(RebalanceListener):
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _write(self, event, partitions):
        names = " ".join(f"{tp.topic}-{tp.partition}" for tp in partitions)
        with self._lock, open(self.path, "a") as out:
            out.write(f"{event} {names}\n")

    def on_partitions_assigned(self, partitions):
        self._write("assigned", partitions)

    def on_partitions_revoked(self, partitions):
        self._write("revoked", partitions)

    def on_partitions_lost(self, partitions):
        self._write("lost", partitions)
