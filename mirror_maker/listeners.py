"""The user-facing rebalance listener interface (Kafka's ``ConsumerRebalanceListener``).

The mirror's own listener runs first (flush and commit on revoke, target topics on assign);
then the user's, if ``--consumer.rebalance.listener`` names one. One instance is shared by all
mirror threads, as in Kafka, so implementations must be thread-safe.
"""

from __future__ import annotations

from typing import List

from .records import TopicPartition


class RebalanceListener:
    """Base class with no-op callbacks; implement only those you need."""

    def on_partitions_assigned(self, partitions: List[TopicPartition]) -> None:
        """Called after the partitions were assigned to one mirror thread's consumer."""

    def on_partitions_revoked(self, partitions: List[TopicPartition]) -> None:
        """Called after the mirror tried to flush the revoked partitions' records and commit their
        offsets. The commit happened only if the target acknowledged every record in time (a
        share of max.poll.interval.ms, or the stop's deadline) and the mirror has not failed;
        otherwise nothing was committed and the partitions' next owner mirrors those records
        again (at-least-once). A WARN line says so when it happens."""

    def on_partitions_lost(self, partitions: List[TopicPartition]) -> None:
        """Called when partitions were lost (e.g. a missed session timeout); nothing was committed."""
