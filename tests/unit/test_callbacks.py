"""Every callback handed to a confluent client lets an error confluent-kafka left pending out before
it touches a lock (``mirror_maker.callbacks``)."""

import threading

import pytest

from mirror_maker import callbacks
from mirror_maker.callbacks import client_callback
from mirror_maker.clients.client_errors import ClientErrors
from mirror_maker.clients.producer import MirrorProducer
from mirror_maker.engine.exactly_once import TransactionalProducer
from mirror_maker.engine.state import RunState
from mirror_maker.ops.log import librdkafka_logger


class PendingFatal(SystemError):
    """What CPython raises for an error left pending by a C call."""


def test_a_pending_error_leaves_the_callback_before_its_body_runs_so_no_lock_is_left_held(monkeypatch):
    lock = threading.Lock()
    ran = []

    @client_callback
    def on_delivery(err, msg):
        with lock:
            ran.append(err)

    def pending():
        raise PendingFatal("returned a result with an exception set")
    monkeypatch.setattr(callbacks, "surface_pending_error", pending)
    with pytest.raises(PendingFatal):
        on_delivery("err", None)
    assert not ran and not lock.locked()
    monkeypatch.undo()
    on_delivery("err", None)  # nothing pending: the body runs
    assert ran == ["err"]


def test_nothing_pending_is_nothing_raised():
    callbacks.surface_pending_error()


@pytest.mark.parametrize("make", [
    lambda: MirrorProducer({"bootstrap.servers": "localhost:1"}, RunState()),
    lambda: TransactionalProducer({"bootstrap.servers": "localhost:1", "transactional.id": "t"}, RunState()),
], ids=["producer", "transactional producer"])
def test_the_producers_callbacks_are_client_callbacks(monkeypatch, make):
    given = {}

    class Recording:
        def __init__(self, conf):
            given.update(conf)

        produce = None

    monkeypatch.setattr("confluent_kafka.Producer", Recording)
    make()
    for key in ("on_delivery", "error_cb", "stats_cb"):
        assert _surfaces_first(given[key]), key
    assert _surfaces_first(given["logger"].log)


def _surfaces_first(callback) -> bool:
    """The callback (a function, a bound method or a callable object) is a ``client_callback``."""
    function = getattr(callback, "__func__", None) or getattr(type(callback), "__call__", callback)
    if isinstance(callback, ClientErrors):
        function = type(callback).__call__
    return getattr(function, "__wrapped__", None) is not None


def test_the_librdkafka_logger_logs_through_the_named_logger(caplog):
    caplog.set_level("INFO")
    librdkafka_logger("client-x").log(20, "%s [%s] %s", "FAC", "rdkafka#1", "a line")
    assert any(r.name == "mirror_maker.librdkafka.client-x" for r in caplog.records)
