"""The raw path's clients at start-up against a cluster that is away (a port nobody listens on):
they keep trying and say so, and a stop ends every wait at once, as a failure of nothing."""

import gc
import logging
import threading
import time
import warnings
from types import SimpleNamespace

import pytest
from kafka.net.selector import NetworkSelector

from mirror_maker.embedded import free_port
from mirror_maker.engine.state import RunState
from mirror_maker.errors import ClientFailed
from mirror_maker.ops.metrics import MirrorMetrics
from mirror_maker.shallow import connections
from mirror_maker.shallow.connections import Cluster
from mirror_maker.shallow.producer import RawProducer

from ..integration.harness import wait_until

#: kafka-python 3.0.12 may touch a refused connection's socket closed under it as the selector
#: closes (an exception its finalizer ignores).
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture
def away():
    state, net = RunState(), NetworkSelector()
    state.on_stop(net.wakeup)
    address = f"127.0.0.1:{free_port()}"
    cluster = Cluster(net, {"bootstrap.servers": address, "reconnect.backoff.max.ms": "200"}, "t", "target", state)
    case = SimpleNamespace(state=state, net=net, address=address, cluster=cluster)
    yield case
    cluster.close()
    net.close()
    case.__dict__.clear()
    del cluster, net
    # kafka-python leaves each refused connection's socket in a reference cycle, for the garbage
    # collector to close (with a ResourceWarning): collected here, not at the end of the session.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def ended_by_a_stop(state, call, under_way):
    """Run ``call`` in a thread until ``under_way()`` holds, then request a stop: what the call
    returned (it must return once stopped, not wait out a timeout of its own)."""
    result = []
    worker = threading.Thread(target=lambda: result.append(call()))
    worker.start()
    wait_until(under_way, 10, "the call under way")
    state.request_stop()
    worker.join(10)
    assert not worker.is_alive(), "the stop did not end it"
    return result[0]


def test_connect_keeps_trying_says_why_naming_the_cluster_and_a_stop_ends_it(away, caplog, monkeypatch):
    monkeypatch.setattr(connections, "UNREACHABLE_FIRST_LOG_S", 0.3)
    monkeypatch.setattr(connections, "UNREACHABLE_LOG_EVERY_S", 0.3)

    def ours():
        return [r.getMessage() for r in caplog.records if r.name == "mirror_maker.shallow"]
    with caplog.at_level(logging.INFO):
        assert ended_by_a_stop(away.state, lambda: away.cluster.connect(["t"]), lambda: len(ours()) >= 2) is False
    assert all(f"Cannot reach the target cluster at {away.address} for the raw path: KafkaConnectionError"
               in line and "ECONNREFUSED" in line for line in ours()), ours()  # again and again
    assert not [r for r in caplog.records if r.name.startswith("kafka.net")], "kafka-python's retries are DEBUG"


def test_a_closed_cluster_ends_its_bootstrap(away):
    """Left pending, the bootstrap's coroutine is torn down with the interpreter and prints a
    traceback ("Exception ignored") to stderr after a clean stop."""
    away.state.request_stop()
    assert away.cluster.connect() is False
    away.cluster.close()
    assert away.cluster._bootstrap.is_done


def test_a_request_to_a_node_that_is_away_ends_at_a_stop(away):
    from kafka.protocol.producer import InitProducerIdRequest

    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                    producer_epoch=-1, max_version=4)
    node = away.cluster.client.least_loaded_node(bootstrap_fallback=True)
    assert ended_by_a_stop(away.state, lambda: away.cluster.ask(node, request, 30000),
                           lambda: away.cluster.client.connection_delay(node) > 0) is None  # refused, backing off


class RefusingTarget:
    """A target whose InitProducerId answers never come (not connected yet, say)."""

    bootstrap = "refusing:9092"
    client = SimpleNamespace(least_loaded_node=lambda bootstrap_fallback=False: 1)

    def __init__(self, state) -> None:
        self.state, self.asked = state, 0

    def ask(self, node, request, timeout_ms):
        self.asked += 1
        raise ConnectionError("refused")


def test_a_stop_during_the_producer_id_retries_is_no_failure():
    state = RunState()
    target = RefusingTarget(state)
    raw = RawProducer([target], None, state, True, MirrorMetrics())
    assert ended_by_a_stop(state, raw.init_producer_id, lambda: target.asked >= 2) is False
    assert not state.failed and raw.producer_id == -1


def test_no_producer_id_by_the_deadline_is_a_failure_naming_the_target():
    state = RunState()
    raw = RawProducer([RefusingTarget(state)], None, state, True, MirrorMetrics())
    with pytest.raises(ClientFailed, match="refusing:9092.*no producer id: refused"):
        raw.init_producer_id(time.monotonic() + 0.3)


def test_a_metadata_refresh_loop_that_ended_is_restarted(away, caplog):
    """Without it a moved leader would never be seen again: every batch of its partitions waits."""
    from kafka.errors import KafkaConnectionError
    from kafka.future import Future

    metadata = away.cluster.client.cluster
    metadata._refresh_loop_future = Future().failure(KafkaConnectionError("refresh failed"))
    with caplog.at_level(logging.WARNING, logger="mirror_maker.shallow"):
        away.cluster.refresh()
    assert metadata._refresh_loop_future is not None and not metadata._refresh_loop_future.failed()
    assert "The target cluster's metadata refresh for the raw path stopped (KafkaConnectionError: refresh " \
           "failed); restarting it" in caplog.text
    caplog.clear()
    away.cluster.refresh()  # a live loop is left alone
    assert "restarting" not in caplog.text
    # A wait on a broker that is not ready revives it too, without asking for metadata.
    metadata._refresh_loop_future = Future().failure(KafkaConnectionError("refresh failed"))
    with caplog.at_level(logging.WARNING, logger="mirror_maker.shallow"):
        away.cluster.revive()
    assert not metadata._refresh_loop_future.failed() and "restarting it" in caplog.text


def test_the_broker_answers_a_produce_before_the_client_gives_up_and_a_returned_broker_is_reached_soon(away):
    """A connection closed on a timeout fails every partition's requests on it; a broker back
    after an outage waits for the next reconnect attempt (Java's 1 s at most, not librdkafka's 10)."""
    from mirror_maker.shallow import producer

    conf = {"bootstrap.servers": away.address, "request.timeout.ms": "20000"}
    lanes = producer.connections(away.net, conf, "t", away.state)
    try:
        assert producer.produce_timeout_ms(conf) == 20000
        for lane in lanes:
            assert lane.client._manager.config["request_timeout_ms"] == 20000 + producer.ANSWER_MARGIN_MS
        assert connections.net_configs(conf, "t")["reconnect_backoff_max_ms"] == 1000
        assert connections.net_configs({**conf, "reconnect.backoff.max.ms": "5000"}, "t")[
            "reconnect_backoff_max_ms"] == 5000
    finally:
        for lane in lanes:
            lane.close()


def test_answers_that_cannot_be_decoded_fail_the_run_at_the_limit(away):
    """A retry reads the same bytes: the third undecodable answer in a row fails the run with one
    line; the requests a closed connection fails with one error count once, and an answer read
    in between starts the count again (a connection lost does not)."""
    from mirror_maker.shallow.frames import AnswerNotDecoded

    cluster, state = away.cluster, away.state
    first = AnswerNotDecoded("node=1[h:9092]: the answer to API 1 v12: ReferenceError: gone")
    # One connection's requests, then another answer not decoded, then one decoded.
    for result in (first, first, first, AnswerNotDecoded("again"), object()):
        cluster._answered(result)
    for result in (AnswerNotDecoded("one"), ConnectionError("lost"), AnswerNotDecoded("two")):
        cluster._answered(result)
    assert state.failure is None
    cluster._answered(AnswerNotDecoded("node=2[h:9092]: the answer to API 0 v9: three"))
    assert isinstance(state.failure, ClientFailed)
    assert str(state.failure) == ("raw path: 3 answers in a row from the target cluster could not be decoded; "
                                  "the last: AnswerNotDecoded: node=2[h:9092]: the answer to API 0 v9: three")
