"""``poll``: Java's poll() semantics on a consumer whose batch consume waits for a full batch.

The stand-in consumer behaves as librdkafka's ``consume(n, timeout)`` does: it returns once it
holds ``n`` messages or once the timeout has passed, on a virtual clock, so the tests see how long
a caller would have waited without sleeping.
"""

from mirror_maker.clients.polling import poll


class BatchConsumer:
    """Messages arrive at given (virtual) times; consume(n, timeout) waits for n or the timeout."""

    def __init__(self, arrivals):
        self.arrivals = sorted(arrivals, key=lambda arrival: arrival[0])  # (time, message), stable
        self.now = 0.0
        self.calls = []

    def _ready(self):
        return [m for t, m in self.arrivals if t <= self.now]

    def consume(self, num_messages, timeout):
        self.calls.append((num_messages, timeout))
        deadline = self.now + timeout
        while len(self._ready()) < num_messages:
            later = [t for t, _m in self.arrivals if self.now < t <= deadline]
            if not later:
                self.now = deadline
                break
            self.now = min(later)
        taken = self._ready()[:num_messages]
        self.arrivals = [(t, m) for t, m in self.arrivals if m not in taken]
        return taken


def test_what_is_already_fetched_comes_back_at_once():
    consumer = BatchConsumer([(0.0, "a"), (0.0, "b"), (0.0, "c")])
    assert poll(consumer, 500, 0.2) == ["a", "b", "c"]
    assert consumer.now == 0.0  # consume(500, 0.2) would have held them for 0.2 s
    assert consumer.calls == [(500, 0)]


def test_a_full_backlog_is_one_call_of_max_records():
    consumer = BatchConsumer([(0.0, i) for i in range(1200)])
    assert poll(consumer, 500, 0.2) == list(range(500))
    assert consumer.calls == [(500, 0)]


def test_an_empty_queue_waits_only_for_the_first_arrival_and_takes_what_came_with_it():
    consumer = BatchConsumer([(0.05, "a"), (0.05, "b"), (0.15, "late")])
    assert poll(consumer, 500, 0.2) == ["a", "b"]
    assert consumer.now == 0.05
    assert poll(consumer, 500, 0.2) == ["late"]
    assert consumer.now == 0.15


def test_nothing_within_the_timeout_is_an_empty_list_after_it():
    consumer = BatchConsumer([(1.0, "a")])
    assert poll(consumer, 500, 0.2) == []
    assert consumer.now == 0.2


def test_a_zero_timeout_never_waits():
    consumer = BatchConsumer([(0.1, "a")])
    assert poll(consumer, 500, 0) == []
    assert consumer.calls == [(500, 0)] and consumer.now == 0.0


def test_one_record_at_a_time_is_one_call():
    consumer = BatchConsumer([(0.05, "a"), (0.05, "b")])
    assert poll(consumer, 1, 0.2) == ["a"]
    assert consumer.calls == [(1, 0), (1, 0.2)]
