"""The raw path's socket reading: whole frames from a real socket, whatever pieces they arrive
in, decoded the same as kafka-python's own parser decodes them."""

import socket
from types import SimpleNamespace

import kafka
import kafka.errors as errors
import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.parser import KafkaProtocol

from mirror_maker.shallow import frames


class Reading(frames._FrameReading):
    """The transport's reading side on one end of a socket pair."""

    def __init__(self, sock, max_frame_size=1 << 20) -> None:
        self._init_frames()
        self._sock = sock
        self._protocol = SimpleNamespace(parser=SimpleNamespace(max_frame_size=max_frame_size))


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


def framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def test_frames_come_whole_whatever_pieces_the_socket_gives(pair):
    ours, theirs = pair
    reading = Reading(ours)
    first, second, empty = b"a" * 70000, bytes(range(256)) * 3, b""
    wire = framed(first) + framed(second) + framed(empty)
    got = []
    # Cut inside the first size field (twice), inside a body, between frames and inside the last size.
    for piece in (wire[:2], wire[2:3], wire[3:5000], wire[5000:70004], wire[70004:70006], wire[70006:-3], wire[-3:]):
        theirs.sendall(piece)
        frames_read, error = reading._sock_recv()
        assert error is None
        got += frames_read
    assert got == [first, second, empty]
    assert reading._sock_recv() == ([], None)  # nothing more: the socket would block


def test_a_closed_socket_is_a_connection_error(pair):
    ours, theirs = pair
    reading = Reading(ours)
    theirs.sendall(framed(b"xyz") + b"\x00\x00")
    theirs.close()
    frames_read, error = reading._sock_recv()
    assert frames_read == [b"xyz"]
    assert isinstance(error, errors.KafkaConnectionError)


@pytest.mark.parametrize("size", [-1, 1025])
def test_a_frame_size_out_of_bounds_is_refused_before_anything_is_allocated(pair, size):
    ours, theirs = pair
    theirs.sendall(size.to_bytes(4, "big", signed=True))
    frames_read, error = Reading(ours, max_frame_size=1024)._sock_recv()
    assert frames_read == [] and isinstance(error, errors.InvalidReceiveError)


def fetch_answer(correlation_id: int) -> bytes:
    partition = FetchResponse.FetchableTopicResponse.PartitionData(
        partition_index=3, error_code=0, high_watermark=42, last_stable_offset=42, log_start_offset=0,
        aborted_transactions=None, preferred_read_replica=-1, records=b"\x01" * 5000)
    answer = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, version=12,
                           responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])])
    answer.with_header(correlation_id=correlation_id)
    return answer.encode(framed=True, header=True)


def a_fetch(parser) -> int:
    request = FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=1, topics=[],
                           max_version=12)
    request.API_VERSION = 12
    return parser.send_request(request)


def test_the_parser_decodes_a_frame_as_kafka_pythons_own_parser_does():
    ours, stock = frames.FrameParser(client_id="t"), KafkaProtocol(client_id="t")
    correlation_id = a_fetch(ours)
    assert a_fetch(stock) == correlation_id
    wire = fetch_answer(correlation_id)
    [(our_id, our_answer)] = ours.receive_bytes([bytearray(wire[4:])])
    [(stock_id, stock_answer)] = stock.receive_bytes(wire)
    assert our_id == stock_id == correlation_id
    assert our_answer == stock_answer
    part = our_answer.responses[0].partitions[0]
    assert (part.partition_index, part.high_watermark, part.records) == (3, 42, b"\x01" * 5000)


def test_an_answer_to_another_request_is_refused():
    parser = frames.FrameParser(client_id="t")
    correlation_id = a_fetch(parser)
    with pytest.raises(frames.AnswerNotDecoded, match="Correlation IDs do not match"):
        parser.receive_bytes([bytearray(fetch_answer(correlation_id + 1)[4:])])


def test_a_sasl_v0_token_comes_back_as_its_bytes():
    """SASL on a broker before SaslAuthenticate (Kafka 0.11): the tokens go unframed by any API."""
    from kafka.protocol.sasl import SaslBytesRequest

    parser = frames.FrameParser(client_id="t")
    parser.send_request(SaslBytesRequest(b"\x00user\x00secret"))
    [(_correlation_id, answer)] = parser.receive_bytes([bytearray(b"server-final")])
    assert answer.auth_bytes == b"server-final"


def dead_proxy():
    """A weak proxy whose class is gone, as one of kafka-python's registry entries was."""
    import gc
    import weakref

    class Gone:
        pass

    proxy = weakref.proxy(Gone)
    del Gone
    gc.collect()
    return proxy


def test_a_dead_entry_in_kafka_pythons_response_registry_does_not_stop_the_decoding(monkeypatch):
    from kafka.protocol.api_header import ResponseClassRegistry

    monkeypatch.setitem(ResponseClassRegistry._response_class_registry, FetchResponse.API_KEY, dead_proxy())
    parser = frames.FrameParser(client_id="t")
    correlation_id = a_fetch(parser)
    [(got_id, answer)] = parser.receive_bytes([bytearray(fetch_answer(correlation_id)[4:])])
    assert got_id == correlation_id and answer.responses[0].partitions[0].high_watermark == 42


@pytest.mark.parametrize("broken", ["dead class", "truncated"])
def test_an_answer_that_cannot_be_decoded_is_a_protocol_error_logged_once(monkeypatch, caplog, broken):
    """kafka-python's transport closes the connection on a KafkaProtocolError only; any other
    error stopped its reading and left the connection open, unanswered, until its requests timed out."""
    parser = frames.FrameParser(client_id="t")
    correlation_id = a_fetch(parser)
    frame = bytearray(fetch_answer(correlation_id)[4:])
    if broken == "dead class":
        monkeypatch.setitem(frames._RESPONSES, FetchResponse.API_KEY, dead_proxy())
    else:
        frame = frame[:100]
    with pytest.raises(errors.KafkaProtocolError, match="API 1 v12"):
        parser.receive_bytes([frame])
    assert [record.levelname for record in caplog.records] == ["ERROR"]
    assert "cannot decode the answer to API 1 v12" in caplog.text


def test_the_pinned_kafka_python_gets_the_frame_reading():
    """setup.cfg pins kafka-python; a new pin must be checked against these subclasses (the
    internals they follow are not an API) before SUPPORTED_VERSION follows it."""
    from kafka.net import connection, manager

    assert kafka.__version__ == frames.SUPPORTED_VERSION
    assert frames.install()
    assert manager.KafkaTCPTransport is frames.FrameTCPTransport
    assert manager.KafkaSSLTransport is frames.FrameSSLTransport
    assert connection.KafkaProtocol is frames.FrameParser


def a_produce(records, transactional_id=None, acks=-1, version=9):
    """A produce request over two topics; ``records(i)`` gives partition i's batch."""
    from kafka.protocol.producer import ProduceRequest

    topic, partition = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
    request = ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=30000, max_version=9,
                             topic_data=[topic(name="orders-ü", partition_data=[partition(index=0, records=records(0)),
                                                                                 partition(index=7, records=records(1))]),
                                         topic(name="t" * 130, partition_data=[partition(index=2, records=records(2))])])
    request.API_VERSION = version
    return request


SIZES = [0, 100, 20000]  # one-, two- and three-byte lengths on the wire


@pytest.mark.parametrize("transactional_id, acks", [(None, -1), ("tx-1", 1)])
@pytest.mark.parametrize("client_id", ["producer-raw-0", None])
def test_a_produce_request_in_pieces_is_the_bytes_kafka_python_encodes(transactional_id, acks, client_id):
    from mirror_maker.shallow.produce_request import Parts, encode

    batches = [Parts((bytes([i]) * 61, bytes([i + 1]) * size)) for i, size in enumerate(SIZES)]
    ours = a_produce(batches.__getitem__, transactional_id, acks)
    ours.with_header(correlation_id=77, client_id=client_id)
    chunks = encode(ours, 77, client_id)
    stock = a_produce(lambda i: batches[i].joined(), transactional_id, acks)
    stock.with_header(correlation_id=77, client_id=client_id)
    assert b"".join(chunks) == bytes(stock.encode(framed=True, header=True))
    assert all(any(chunk is batch[1] for chunk in chunks) for batch in batches)  # the records, not copies


def test_the_parser_sends_pieces_and_decodes_the_answer_to_them():
    from kafka.protocol.producer import ProduceResponse

    from mirror_maker.shallow.produce_request import Chunks, Parts

    parser = frames.FrameParser(client_id="t")
    request = a_produce(lambda i: Parts((b"h" * 61, b"r" * SIZES[i])))
    correlation_id = parser.send_request(request)
    first = parser.send_bytes()
    assert isinstance(first, Chunks) and parser.send_bytes() == b""
    stock = a_produce(lambda i: b"h" * 61 + b"r" * SIZES[i])
    stock.with_header(correlation_id=correlation_id, client_id="t")
    assert b"".join(first) == bytes(stock.encode(framed=True, header=True))
    answer = ProduceResponse(responses=[], throttle_time_ms=0)
    answer.API_VERSION = 9
    answer.with_header(correlation_id=correlation_id)
    [(received, decoded)] = parser.receive_bytes([bytearray(answer.encode(framed=True, header=True)[4:])])
    assert received == correlation_id and decoded.responses == []


def test_a_broker_on_an_older_produce_version_gets_kafka_pythons_encoding_of_the_joined_batches():
    from mirror_maker.shallow.produce_request import Parts

    parser = frames.FrameParser(client_id="t")
    request = a_produce(lambda i: Parts((b"h" * 61, b"r" * SIZES[i])), version=7)
    correlation_id = parser.send_request(request)
    sent = parser.send_bytes()
    stock = a_produce(lambda i: b"h" * 61 + b"r" * SIZES[i], version=7)
    stock.with_header(correlation_id=correlation_id, client_id="t")
    assert bytes(sent) == bytes(stock.encode(framed=True, header=True))


def test_pieces_are_sent_whole_and_in_order_through_short_writes(pair):
    """Several sendmsg calls, each cut short where the socket's buffer is full: every byte goes
    once, in order (an empty piece included)."""
    import collections
    import threading

    ours, theirs = pair
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    pieces = [bytes([i % 251]) * size for i, size in enumerate([61, 0, 70000, 3, 250000, 1] * 40)]
    sender = frames.FrameTCPTransport.__new__(frames.FrameTCPTransport)
    sender._sock, sender._write_buffer = ours, collections.deque(pieces)
    received, expected = bytearray(), sum(len(piece) for piece in pieces)

    def read():
        while len(received) < expected:
            received.extend(theirs.recv(65536))
    reader = threading.Thread(target=read)
    reader.start()
    total = 0
    while sender._write_buffer:
        sent, error = sender._sock_send()
        assert error is None
        total += sent
    reader.join(30)
    assert total == len(received) and bytes(received) == b"".join(pieces)
