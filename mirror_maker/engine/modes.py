"""The modes, as the parts each gives the one stream loop: the only place that knows them.

    record        the source group, records, the shared producer, offsets to the source group
    raw           the source group, raw batches (record path for the rest), the raw producer
    exactly-once  static shards, records, a transactional producer, offsets in the transaction

A mode's ``build(stream)`` makes the stream's clients in the stream's own thread (the consumer's
callbacks run there) and returns its ``Parts``, or None when a stop came first; ``prepare(streams)``
runs once per process before the streams start.
"""

from __future__ import annotations

import logging
import threading
from typing import Dict, List, Optional

import confluent_kafka

from ..callbacks import client_callback
from ..clients.retry import commit_retrying
from ..offsets.committer import OffsetCommitter
from ..ops.log import librdkafka_logger
from .copier import RecordCopier
from .membership import GroupMembership, ShardMembership
from .parts import Parts, Shared
from .positions import REPORT_RESETS, ResetPolicy, StartPositions, committed_in_group, watermarks_of
from .record_source import STATS_INTERVAL_MS, RecordSource
from .stream import POLL_TIMEOUT_S, Stream

log = logging.getLogger("mirror_maker.worker")


def consumer_conf(stream: Stream, shared: Shared, **defaults) -> Dict[str, object]:
    """The stream's consumer: the user's settings, client.id ``<group>-<n>``, our logger and error
    callback, and resets reported to the stream rather than done by librdkafka (``positions``)."""
    conf = {**defaults, **shared.config.consumer_conf(stream.index)}
    conf["logger"] = librdkafka_logger(conf["client.id"])
    # Partition-EOF events cost two thirds of the consume rate; "at its end" comes from the
    # fetch-carried watermarks instead (Stream.update_lag).
    conf.setdefault("enable.partition.eof", False)
    conf.update(REPORT_RESETS)
    if shared.errors is not None:
        conf["error_cb"] = shared.errors
    return conf


def _with_stats(conf: Dict[str, object], on_stats, metrics) -> Dict[str, object]:
    """The consumer reports its statistics to ``on_stats`` (the record source's fetch view) and
    its byte counts to ``metrics``."""
    conf.setdefault("statistics.interval.ms", STATS_INTERVAL_MS)

    @client_callback  # the metrics take a lock
    def both(text: str) -> None:
        metrics.client_statistics_text(text)
        on_stats(text)

    conf["stats_cb"] = both
    return conf


def _read_committed(shared: Shared) -> bool:
    return shared.config.consumer.get("isolation.level", "read_committed") == "read_committed"


def _starts(shared: Shared, consumer, committed, deferrable: bool) -> StartPositions:
    config = shared.config
    return StartPositions(ResetPolicy(config.consumer.get("auto.offset.reset")), committed, watermarks_of(consumer),
                          config.replication.refresh_topics, deferrable)


class SharedSink:
    """Record mode's sink: the producer every stream of the process shares (the runner counts
    and closes it)."""

    tracking = False

    def __init__(self, producer) -> None:
        self._producer = producer

    def flush(self, deadline=None) -> bool:
        return self._producer.flush(deadline, for_commit=True)

    def serve(self) -> None:
        self._producer.serve()

    def acknowledged(self) -> int:
        return 0

    def delivered(self) -> int:
        return 0

    def waiting(self) -> int:
        return 0

    def needs_commit(self) -> bool:
        return False

    def joins_commit(self) -> bool:
        """Another stream's commit waits for the shared queue to empty: join it (``MirrorProducer.flush``)."""
        return self._producer.commit_flush_waiting()

    def rolled_back(self, aborted) -> List[str]:
        return []

    def track(self) -> None:
        pass

    def close(self, deadline) -> None:
        pass


class GroupCommitter(OffsetCommitter):
    """Offsets to the source group (MirrorMaker v1)."""

    makes_visible = False

    def close(self, deadline) -> None:
        pass


class RecordMode:
    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    def prepare(self, streams: List[Stream]) -> None:
        pass

    def build(self, stream: Stream) -> Parts:
        shared, config = self._shared, self._shared.config
        source = None
        consumer = confluent_kafka.Consumer(_with_stats(consumer_conf(stream, shared),
                                                        lambda text: source and source.on_stats(text), shared.metrics))
        membership = GroupMembership(stream, consumer, shared.subscription, config.incremental_rebalance,
                                     config.batch_size, "group.instance.id" in config.consumer)
        copier = RecordCopier(shared.handler, shared.producer, shared.target_topics.remote, shared.state,
                              shared.metrics, config.sync_send, on_error=stream.consume_error)
        source = RecordSource(stream, consumer, copier, membership, config.batch_size, POLL_TIMEOUT_S,
                              read_committed=_read_committed(shared))
        return Parts(membership, source, SharedSink(shared.producer), GroupCommitter(consumer),
                     _starts(shared, consumer, committed_in_group(consumer, commit_retrying), deferrable=True))


class RawMode:
    """Whole batches (``--use.raw.bytes``; kafka-python's protocol client, imported only then)."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    def prepare(self, streams: List[Stream]) -> None:
        pass

    def build(self, stream: Stream) -> Optional[Parts]:
        from kafka.net.selector import NetworkSelector

        from ..shallow.connections import FETCH_MAX_BYTES, Cluster
        from ..shallow.fetcher import RawFetcher
        from ..shallow.producer import RawProducer, connections, produce_timeout_ms
        from ..shallow.raw_source import RawSink, RawSource

        shared, config, state = self._shared, self._shared.config, self._shared.state
        # The consumer fetches only for the record path, a range at a time: a long poll at a
        # partition's end (librdkafka's 500 ms) held up the next range's fetch on that broker.
        consumer = confluent_kafka.Consumer(consumer_conf(stream, shared, **{"fetch.wait.max.ms": "10"}))
        membership = GroupMembership(stream, consumer, shared.subscription, config.incremental_rebalance,
                                     config.batch_size, "group.instance.id" in config.consumer)
        membership.follow()  # the group join goes on in the background while the raw path connects
        net = NetworkSelector()
        state.on_stop(net.wakeup)  # an idle round waits in poll() up to FETCH_WAIT_MS
        source_cluster = Cluster(net, config.consumer, f"{config.group_id}-{stream.index}-raw", "source", state)
        targets = connections(net, config.producer, f"producer-raw-{stream.index}", state)

        def close_connections() -> None:
            for cluster in (source_cluster, *targets):
                cluster.close()
            net.close()

        try:
            isolation = 1 if _read_committed(shared) else 0
            fetcher = RawFetcher(source_cluster, state, isolation,
                                 int(config.consumer.get("fetch.max.bytes", FETCH_MAX_BYTES)), errors=shared.errors,
                                 batch_backlogs=not config.sync_send)
            raw = RawProducer(targets, net, state, config.abort_on_send_failure, shared.metrics,
                              shared.producer.errors, produce_timeout_ms(config.producer))
            # The topics the group will assign from, and their target topics where they exist. A
            # stop before both clusters answered and gave a producer id leaves the raw path unbuilt.
            if not source_cluster.connect(membership.topics, shared.producer.serve):
                raise _Stopped
            remotes = [remote for topic in membership.topics for remote in stream.targets_of(topic)]
            for target in targets:
                if not target.connect(remotes, shared.producer.serve):
                    raise _Stopped
            if not raw.init_producer_id(state.deadline):
                raise _Stopped
        except BaseException as exc:
            close_connections()
            consumer.close()
            if isinstance(exc, _Stopped):
                return None
            raise
        copier = RecordCopier(shared.handler, shared.producer, shared.target_topics.remote, state, shared.metrics,
                              config.sync_send, on_error=stream.consume_error)
        source = RawSource(stream, consumer, membership, copier, fetcher, raw, net, state, shared.metrics,
                           shared.handler, shared.target_topics.remote, stream.targets_of,
                           shared.target_topics.max_message_bytes, config.sync_send)
        return Parts(membership, source, RawSink(raw, shared.producer), GroupCommitter(consumer),
                     _starts(shared, consumer, committed_in_group(consumer, commit_retrying), deferrable=True),
                     extras=[close_connections])


class _Stopped(Exception):
    """A stop came while a stream was being set up."""


class ExactlyOnceMode:
    """Transactions on the target (``--exactly.once``, see ``exactly_once``)."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._ready = None

    def prepare(self, streams: List[Stream]) -> None:
        """The streams read once every one of them has fenced its predecessor and the shards of
        an earlier, larger --num.streams are fenced: that fencing runs beside the streams' own
        starts (it asks the target's coordinators first), not before them."""
        from .exactly_once import StreamsReady, fence_larger_layouts

        config = self._shared.config
        self._ready = ready = StreamsReady(len(streams) + 1)

        def fence() -> None:
            """A safeguard the mirror can go on without: a failure is one WARN line. It may wait
            on a target that is away: a stop does not wait for it (the streams stop waiting)."""
            try:
                fence_larger_layouts(config.producer, config.exactly_once_group, config.num_streams)
            except Exception as exc:
                log.debug("fencing the shards of an earlier layout failed", exc_info=True)
                log.warning("Fencing the shards of an earlier, larger --num.streams failed: %s: %s",
                            type(exc).__name__, exc)
            finally:
                ready.arrive()
        threading.Thread(target=fence, name="mirror-maker-layout-fence", daemon=True).start()

    def build(self, stream: Stream) -> Optional[Parts]:
        from ..offsets.transactional import TargetOffsets, TransactionalCommitter
        from .exactly_once import (TargetStarts, TransactionalSink, start_producer, transaction_states,
                                   transactional_conf)

        shared, config, state = self._shared, self._shared.config, self._shared.state
        group = config.exactly_once_group
        producer = None
        try:
            producer = start_producer(config, stream.index, state, shared.metrics, shared.producer.errors)
            stream.log.info("Exactly-once shard %d of %d: transactional.id %s", stream.index, config.num_streams,
                            transactional_conf(config, stream.index)["transactional.id"])
        finally:
            self._ready.arrive()
        # A partition's last writer may be a sibling stream's id: it is fenced once all are up.
        if not self._ready.wait(state):
            producer.close(state.deadline)
            return None
        source = None
        consumer = confluent_kafka.Consumer(_with_stats(consumer_conf(stream, shared),
                                                        lambda text: source and source.on_stats(text), shared.metrics))
        target = TargetOffsets(config.producer, group, f"{group}-offsets-{stream.index}", stream.target_of)
        own_id = transactional_conf(config, stream.index)["transactional.id"]
        copier = RecordCopier(shared.handler, producer, shared.target_topics.remote, state, shared.metrics,
                              on_error=stream.consume_error)

        def use(new) -> None:  # a new producer in place of one that became unusable
            copier.producer = new
            committer.use(new._producer)
            committer.begin()

        sink = TransactionalSink(producer, shared.metrics, stream.log, state,
                                 lambda: start_producer(config, stream.index, state, shared.metrics,
                                                        shared.producer.errors), use, config.abort_on_send_failure)
        committer = TransactionalCommitter(producer._producer, target, consumer, own_id, sink,
                                           transaction_states(config.producer), wait=state.wait)
        committer.begin()
        membership = ShardMembership(stream, consumer, shared.subscription, config.num_streams)
        source = RecordSource(stream, consumer, copier, membership, config.batch_size, POLL_TIMEOUT_S,
                              tracker=lambda: sink.tracker, read_committed=_read_committed(shared))
        starts = TargetStarts(stream, target, transactional_conf(config, stream.index), consumer, group,
                              config.num_streams, own_id)
        return Parts(membership, source, sink, committer, _starts(shared, consumer, starts, deferrable=False))


def mode_for(shared: Shared):
    config = shared.config
    if config.use_raw_bytes:
        return RawMode(shared)
    if config.exactly_once:
        return ExactlyOnceMode(shared)
    return RecordMode(shared)
