"""Reading Kafka responses straight from the socket into each frame's own buffer.

kafka-python 3.0.12 reads a socket 4 KB at a time, joins the pieces, copies them into a frame
buffer and copies the frame twice more to decode it: with the socket's copy and the decoder's
copy of the records, six copies of every fetched byte before the raw path sees its batches (a
profile of raw mode on 1 KB uncompressed records: about half of the stream thread's time in
those reads). Here the transport reads each frame's size, then ``recv_into`` the frame's buffer,
and the parser decodes from a view of it: two copies, the socket's and the decoder's.

Sending the other way, a ProduceRequest whose batches are ``Parts`` goes out as the chunks of
``produce_request.encode``, each batch's records as the fetch answer holds them, instead of
kafka-python's encoding into one buffer and its copy.

These replace kafka-python's transports and parser for the connections its network client makes
in this process (only the raw path uses kafka-python), and only for the version pinned in
setup.cfg: their internals are not an API. Any other version keeps its own reading and sending,
unchanged.
"""

from __future__ import annotations

import itertools
import logging
import ssl
import struct
from typing import Dict, List, Optional, Tuple

import kafka
import kafka.errors as errors
from kafka.net import connection, manager, transport
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.parser import KafkaProtocol
from kafka.protocol.sasl import SaslBytesResponse

from . import produce_request
from .connections import describe
from .produce_request import Chunks

log = logging.getLogger("mirror_maker.shallow")

#: The kafka-python version whose transport and parser internals these subclasses follow.
SUPPORTED_VERSION = "3.0.12"
_SIZE = struct.Struct(">i")
_IOV_MAX = 1024  # the most pieces one sendmsg takes (Linux)
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class _FrameReading:
    """A transport's reading side: whole frames, each read into its own buffer.

    ``_sock_recv`` returns the frames completed by what the socket had (a list, possibly empty)
    instead of bytes; :class:`FrameParser` takes that list."""

    _frame: Optional[bytearray] = None
    _view: Optional[memoryview] = None
    _filled = 0

    def _init_frames(self) -> None:
        self._size = bytearray(4)
        self._size_view = memoryview(self._size)

    def _sock_recv(self) -> Tuple[List[bytearray], Optional[Exception]]:
        frames: List[bytearray] = []
        try:
            while True:
                if self._frame is None:
                    read = self._sock.recv_into(self._size_view[self._filled:])
                    if not read:
                        return frames, errors.KafkaConnectionError("socket disconnected")
                    self._filled += read
                    if self._filled < 4:
                        continue
                    size = _SIZE.unpack(self._size)[0]
                    if not 0 <= size <= self._protocol.parser.max_frame_size:
                        return frames, errors.InvalidReceiveError(f"Invalid frame length: {size}")
                    self._frame, self._filled = bytearray(size), 0
                    self._view = memoryview(self._frame)
                if self._filled < len(self._frame):
                    read = self._sock.recv_into(self._view[self._filled:])
                    if not read:
                        return frames, errors.KafkaConnectionError("socket disconnected")
                    self._filled += read
                if self._filled == len(self._frame):
                    self._view.release()
                    frames.append(self._frame)
                    self._frame, self._view, self._filled = None, None, 0
        except _WOULD_BLOCK:
            return frames, None
        except Exception as exc:
            log.debug("raw path: receiving failed", exc_info=True)
            return frames, errors.KafkaConnectionError(exc)

    def write(self, data) -> None:
        if isinstance(data, Chunks):
            self.writelines(data)  # each piece in turn, none joined
        else:
            super().write(data)


class FrameTCPTransport(_FrameReading, transport.KafkaTCPTransport):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._init_frames()

    def _sock_send(self):
        """What is queued, in as few calls as the socket takes: one ``sendmsg`` for up to
        ``_IOV_MAX`` pieces (a produce request is one piece per batch header, records and the
        bytes between them; kafka-python sends each piece with a call of its own)."""
        if self._sock is None:
            return 0, errors.KafkaConnectionError("Connection closed during send")
        total, queue = 0, self._write_buffer
        while queue:
            try:
                sent = self._sock.sendmsg(list(itertools.islice(queue, _IOV_MAX)))
            except _WOULD_BLOCK:
                return total, None
            except Exception as exc:
                log.debug("raw path: sending failed", exc_info=True)
                return total, errors.KafkaConnectionError(exc)
            total += sent
            while queue and len(queue[0]) <= sent:  # drop what went: whole pieces...
                sent -= len(queue.popleft())
            if sent:  # ... then the start of a piece cut short
                queue[0] = memoryview(queue[0])[sent:]
        return total, None


class FrameSSLTransport(_FrameReading, transport.KafkaSSLTransport):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._init_frames()


class _HeaderReader:
    """What kafka-python's header decoders read from: small copies of the frame's first bytes."""

    __slots__ = ("_view", "pos")

    def __init__(self, view: memoryview) -> None:
        self._view, self.pos = view, 0

    def read(self, count: Optional[int] = None) -> bytes:
        end = len(self._view) if count is None else min(self.pos + count, len(self._view))
        start, self.pos = self.pos, end
        return bytes(self._view[start:end])


class FrameParser(KafkaProtocol):
    """Decodes the whole frames of the transports above from a view of each (the frame is not
    copied; the decoder copies the fields it returns, such as a fetch answer's records)."""

    @property
    def max_frame_size(self) -> int:
        return self._max_frame_size

    def send_request(self, request, correlation_id=None):
        if not produce_request.carries_parts(request):
            return super().send_request(request, correlation_id)
        if request.API_VERSION != produce_request.API_VERSION:  # an older broker: kafka-python's encoding
            produce_request.join_parts(request)
            return super().send_request(request, correlation_id)
        if correlation_id is None:
            correlation_id = self._next_correlation_id()
        request.with_header(correlation_id=correlation_id, client_id=self._client_id)
        self.bytes_to_send.append(produce_request.encode(request, correlation_id, self._client_id))
        if request.expect_response():
            self.in_flight_requests.append(request.header)
        return correlation_id

    def send_bytes(self):
        if not any(isinstance(data, Chunks) for data in self.bytes_to_send):
            return super().send_bytes()
        out = Chunks()
        for data in self.bytes_to_send:
            if isinstance(data, Chunks):
                out.extend(data)
            else:
                out.append(data)
        self.bytes_to_send = []
        return out

    def receive_bytes(self, frames):
        if isinstance(frames, (bytes, bytearray, memoryview)):
            return super().receive_bytes(frames)  # another transport's bytes
        return [self._decode(frame) for frame in frames]

    def _decode(self, frame: bytearray):
        api = "?"
        try:
            if not self.in_flight_requests:
                raise errors.CorrelationIdError("No in-flight-request found for server response")
            header = self.in_flight_requests.popleft()
            view = memoryview(frame)
            if isinstance(header, SaslBytesResponse):  # SASL before SaslAuthenticate: bytes as they are
                return header.correlation_id, header.decode(_HeaderReader(view))
            api = f"{header.request_api_key} v{header.request_api_version}"
            response_type = response_class(header.request_api_key)[header.request_api_version]
            reader = _HeaderReader(view)
            received = response_type.parse_header(reader).correlation_id
            if received != header.correlation_id:
                raise errors.CorrelationIdError(
                    f"Correlation IDs do not match: sent {header.correlation_id}, recv {received}")
            return header.correlation_id, response_type.decode(view[reader.pos:])
        except Exception as exc:
            # kafka-python's transport closes the connection on a KafkaProtocolError only: any
            # other error ended its reading task and left the connection open, unanswered, until
            # the requests timed out; and kafka-python's own line for a closed connection is
            # shown only at DEBUG (``connections._RETRY_LINES``).
            log.error("raw path: %s: cannot decode the answer to API %s (%d bytes): %s",
                      self._ident, api, len(frame), describe(exc))
            raise AnswerNotDecoded(f"{self._ident}: the answer to API {api}: {describe(exc)}") from exc


class AnswerNotDecoded(errors.KafkaProtocolError):
    """A broker's answer this client cannot read: its connection is closed, and a cluster whose
    answers keep failing so fails the run (``Cluster``), as no retry reads them."""


def _response_classes() -> Dict[int, type]:
    """kafka-python's response classes by API key, held here.

    Its own registry holds weak proxies, and one was found dead in a raw mirror that then failed
    every answer from its start (``ReferenceError`` in ``get_response_class``); these classes are
    never collected while this module holds them. ``import kafka`` defined them all."""
    classes: Dict[int, type] = {}
    pending = list(ApiMessage.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and not cls.is_request():
            classes.setdefault(cls.API_KEY, cls)
    return classes


_RESPONSES = _response_classes()


def response_class(api_key: int):
    try:
        return _RESPONSES[api_key]
    except KeyError:
        raise LookupError(f"kafka-python has no response type for API {api_key}") from None


def installed() -> bool:
    """Whether the pinned kafka-python's connections read and send this way (``install``)."""
    return connection.KafkaProtocol is FrameParser


def install() -> bool:
    """Read frames this way on every connection kafka-python's network client makes from now
    on; True if it is in use (the pinned kafka-python)."""
    if kafka.__version__ != SUPPORTED_VERSION:
        log.debug("kafka-python %s: its own socket reading is used (the frame reading follows %s)",
                  kafka.__version__, SUPPORTED_VERSION)
        return False
    manager.KafkaTCPTransport, manager.KafkaSSLTransport = FrameTCPTransport, FrameSSLTransport
    connection.KafkaProtocol = FrameParser
    return True
