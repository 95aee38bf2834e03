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
        """Called after the revoked partitions' records were flushed and their offsets committed."""

    def on_partitions_lost(self, partitions: List[TopicPartition]) -> None:
        """Called when partitions were lost (e.g. a missed session timeout); nothing was committed."""
