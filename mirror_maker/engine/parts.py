"""The parts a mode gives the stream loop, and what the loop asks of each.

A mode is not a loop: record mode, exactly-once and raw mode differ only in these parts, built in
the stream's own thread by the mode (``modes.py``). The loop (``stream.py``) calls nothing else.

Membership: which partitions the stream owns.
    ``follow() -> bool`` keeps them current (subscribe to the matching topics; or take the shard's
    partitions), calling the stream's ``partitions_assigned/revoked/lost``; False while there is
    nothing to own. ``restart(positions)`` makes the consumer fetch partitions again from new
    positions (after librdkafka stopped one at a reset). ``close()`` leaves and closes the consumer.

Source: how the owned partitions are read and handed to the sink.
    ``read() -> int`` one round (records read); hands runs to ``stream.record`` and reports errors
    to ``stream.consume_error``. ``assigned(starts, tps)``/``forget(tps)`` take partitions over
    and drop them; ``rewind(positions)`` and ``restart(tp, position)`` read again from there;
    ``ends(tps, positions) -> {tp: (position or None, end or None)}`` for the lag;
    ``keeps_partitions``: target partition = source partition (target topics must have them).

Sink: where records go, and what a commit flushes.
    ``flush(deadline) -> bool``, ``serve()``, ``acknowledged()``, ``delivered()`` (in an open
    transaction too), ``waiting()`` (own producers only), ``needs_commit()`` (a refusal must roll
    the transaction back now, or it is full), ``joins_commit()`` (another stream's commit waits for
    a producer this one shares: commit what is pending now, so that its queue drains),
    ``rolled_back() -> refusals`` and ``track()`` (exactly-once after a refusal), ``tracking``,
    ``close(deadline)``.

Committer: where offsets go, and where a partition's start is read.
    ``commit(offsets, deadline) -> committed`` (may raise ``TransactionAborted``),
    ``makes_visible`` (a commit is what makes the records visible: a transaction),
    ``close(deadline)``. The stream's ``StartPositions`` (``starts``) reads the same store.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, List

from .positions import StartPositions

log = logging.getLogger("mirror_maker.worker")


@dataclass
class Parts:
    membership: object
    source: object
    sink: object
    committer: object
    starts: StartPositions
    #: Anything else the mode built for the stream, closed last (e.g. raw mode's connections).
    extras: List[Callable[[], None]] = None

    def close(self, deadline) -> None:
        """Close every part, whatever one of them does: the membership first (it leaves the group,
        after serving the last revoke), then the source, the committer (which aborts an open
        transaction) and the sink."""
        for close in (self.membership.close, self.source.close, lambda: self.committer.close(deadline),
                      lambda: self.sink.close(deadline), *(self.extras or ())):
            try:
                close()
            except Exception as exc:
                log.debug("closing a part: %s", exc, exc_info=True)


@dataclass(frozen=True)
class Shared:
    """What every stream of a process shares (the runner builds it)."""

    config: object
    producer: object  # the shared record producer (MirrorProducer)
    handler: object
    listener: object
    state: object
    subscription: object
    target_topics: object
    metrics: object
    errors: object = None  # how the source's client errors are worded
