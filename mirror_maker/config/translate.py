"""Java client settings to librdkafka settings, one table row per key.

Users keep the ``consumer.properties``/``producer.properties`` they wrote for the Java client.
Every key is one of: passed through (same name), renamed, converted, taken by the mirror itself
(engine settings such as ``max.poll.records``), ignored with an INFO line, or unsupported with
a WARN. A key the table does not know is passed to librdkafka as it is (so librdkafka-only
tuning such as ``queued.min.messages`` works); ``config.check_librdkafka`` drops it with a WARN
if librdkafka does not know it either. Values of secret keys never reach a log line.
"""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from ..errors import ConfigError
from . import oauthbearer

log = logging.getLogger("mirror_maker.translate")

SECRET_MARKERS = ("password", "secret", "jaas", "token", "key.pem", "certificate.pem")

ASSIGNORS = {
    "range": "range",
    "rangeassignor": "range",
    "roundrobin": "roundrobin",
    "roundrobinassignor": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
    "cooperativestickyassignor": "cooperative-sticky",
    # librdkafka has no eager sticky assignor; cooperative-sticky is the closest.
    "stickyassignor": "cooperative-sticky",
}


def is_secret(key: str) -> bool:
    """Whether a setting's value is a secret (an address such as a token endpoint's is not)."""
    key = key.lower()
    return any(marker in key for marker in SECRET_MARKERS) and not key.endswith(".url")


def shown(key: str, value: str) -> str:
    """How a setting may appear in a log line: secrets are masked."""
    return f"{key}=[hidden]" if is_secret(key) else f"{key}={value}"


@dataclass
class Translation:
    """What a properties file became: librdkafka settings, mirror settings, and notes to log."""

    conf: Dict[str, str] = field(default_factory=dict)
    engine: Dict[str, str] = field(default_factory=dict)
    notes: List[Tuple[int, str]] = field(default_factory=list)

    def note(self, level: int, message: str) -> None:
        self.notes.append((level, message))


Converter = Callable[[str, str, Translation], None]


def _rename(new: str) -> Converter:
    def convert(key: str, value: str, out: Translation) -> None:
        out.conf[new] = value
    return convert


def _engine(key: str, value: str, out: Translation) -> None:
    out.engine[key] = value


def _ignore(reason: str) -> Converter:
    def convert(key: str, value: str, out: Translation) -> None:
        out.note(logging.INFO, f"{key} is ignored: {reason}")
    return convert


def _unsupported(reason: str) -> Converter:
    def convert(key: str, value: str, out: Translation) -> None:
        out.note(logging.WARNING, f"{key} is not supported and is ignored: {reason}")
    return convert


def _assignors(key: str, value: str, out: Translation) -> None:
    names = []
    for item in value.split(","):
        simple = item.strip().rsplit(".", 1)[-1].lower()
        if not simple:
            continue
        if simple not in ASSIGNORS:
            raise ConfigError(f"{key}: unknown assignor '{item.strip()}' "
                              "(use RangeAssignor, RoundRobinAssignor or CooperativeStickyAssignor)")
        if simple == "stickyassignor":
            out.note(logging.INFO, f"{key}: StickyAssignor has no librdkafka equivalent; "
                                   "using cooperative-sticky")
        if ASSIGNORS[simple] not in names:
            names.append(ASSIGNORS[simple])
    if "cooperative-sticky" in names and len(names) > 1:
        # librdkafka refuses to mix eager and cooperative assignors in one member.
        out.note(logging.INFO, f"{key}: librdkafka cannot mix eager and cooperative assignors; "
                               f"using {names[0]}")
        names = [names[0]]
    out.conf["partition.assignment.strategy"] = ",".join(names)


def _offset_reset(key: str, value: str, out: Translation) -> None:
    out.conf[key] = "error" if value.strip().lower() == "none" else value.strip().lower()


def _buffer_memory(key: str, value: str, out: Translation) -> None:
    try:
        kbytes = max(1, int(value) // 1024)
    except ValueError:
        raise ConfigError(f"{key}: '{value}' is not a number of bytes") from None
    out.conf["queue.buffering.max.kbytes"] = str(min(kbytes, 2147483647))


#: librdkafka's most for topic.metadata.refresh.interval.ms.
METADATA_REFRESH_MAX_MS = 3600000


def _metadata_refresh(key: str, value: str, out: Translation) -> None:
    """Java's proactive refresh (new partitions, topics, brokers) is librdkafka's
    topic.metadata.refresh.interval.ms; librdkafka's metadata.max.age.ms is only its cache's age
    (three times the refresh by default)."""
    try:
        ms = int(value)
    except ValueError:
        raise ConfigError(f"{key}: '{value}' is not a number of milliseconds") from None
    if ms > METADATA_REFRESH_MAX_MS:
        out.note(logging.INFO, f"{key}={ms} is librdkafka's topic.metadata.refresh.interval.ms, whose most is "
                               f"{METADATA_REFRESH_MAX_MS}: that is used")
    out.conf["topic.metadata.refresh.interval.ms"] = str(min(ms, METADATA_REFRESH_MAX_MS))


def _python_boolean(key: str, value: str, out: Translation) -> None:
    """A setting confluent-kafka's Python layer reads itself, as a bool (a string crashes it)."""
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{key}: '{value}' is not true or false")
    out.conf[key] = text == "true"


def _identification(key: str, value: str, out: Translation) -> None:
    value = value.strip().lower()
    out.conf["ssl.endpoint.identification.algorithm"] = value if value else "none"


_JAAS_MODULES = {
    "plainloginmodule": "plain",
    "scramloginmodule": "scram",
    "krb5loginmodule": "kerberos",
    "oauthbearerloginmodule": "oauthbearer",
}


def parse_jaas(value: str) -> Tuple[str, Dict[str, str]]:
    """Split ``com.x.LoginModule required key="v" ...;`` into the module's kind and its options."""
    try:
        tokens = shlex.split(value.strip().rstrip(";").strip(), posix=True)
    except ValueError:
        raise ConfigError("sasl.jaas.config: cannot parse the JAAS entry (unbalanced quotes?)") from None
    if len(tokens) < 2 or tokens[1].lower() not in ("required", "requisite", "sufficient", "optional"):
        raise ConfigError("sasl.jaas.config: expected '<LoginModule class> required key=\"value\" ...;'")
    module = tokens[0].rsplit(".", 1)[-1].lower()
    if module not in _JAAS_MODULES:
        raise ConfigError(f"sasl.jaas.config: login module {tokens[0]} is not supported "
                          "(PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule and Krb5LoginModule are)")
    options = {}
    for token in tokens[2:]:
        name, sep, val = token.partition("=")
        if not sep:
            raise ConfigError(f"sasl.jaas.config: option '{name}' has no value")
        options[name] = val
    return _JAAS_MODULES[module], options


def _jaas(key: str, value: str, out: Translation) -> None:
    kind, options = parse_jaas(value)
    if kind == "oauthbearer":
        raise ConfigError("sasl.jaas.config: the OAuthBearerLoginModule needs sasl.mechanism=OAUTHBEARER")
    if kind in ("plain", "scram"):
        for option in ("username", "password"):
            if option not in options:
                raise ConfigError(f"sasl.jaas.config: the login module needs {option}=\"...\"")
            out.conf[f"sasl.{option}"] = options[option]
        return
    if options.get("useKeyTab", "false").lower() == "true" or "keyTab" in options:
        if "keyTab" in options:
            out.conf["sasl.kerberos.keytab"] = options["keyTab"]
    if "principal" in options:
        out.conf["sasl.kerberos.principal"] = options["principal"]


def _truststore_location(key: str, value: str, out: Translation) -> None:
    out.engine["ssl.truststore.location"] = value


def _keystore(key: str, value: str, out: Translation) -> None:
    out.engine[key] = value


COMMON: Dict[str, Optional[Converter]] = {
    "bootstrap.servers": None,
    "client.id": None,
    "client.rack": None,
    "client.dns.lookup": None,
    "metadata.max.age.ms": _metadata_refresh,
    "reconnect.backoff.ms": None,
    "reconnect.backoff.max.ms": None,
    "retry.backoff.ms": None,
    "retry.backoff.max.ms": None,
    "connections.max.idle.ms": None,
    "socket.connection.setup.timeout.ms": None,
    "receive.buffer.bytes": _rename("socket.receive.buffer.bytes"),
    "send.buffer.bytes": _rename("socket.send.buffer.bytes"),
    "security.protocol": None,
    "sasl.mechanism": _rename("sasl.mechanisms"),
    "sasl.jaas.config": _jaas,
    "sasl.kerberos.service.name": None,
    "sasl.kerberos.kinit.cmd": None,
    "sasl.login.callback.handler.class": _unsupported("Java callback handlers cannot run here"),
    "sasl.client.callback.handler.class": _unsupported("Java callback handlers cannot run here"),
    "ssl.truststore.location": _truststore_location,
    "ssl.truststore.password": _keystore,
    "ssl.truststore.type": _keystore,
    "ssl.keystore.location": _keystore,
    "ssl.keystore.password": _keystore,
    "ssl.keystore.type": _keystore,
    "ssl.key.password": None,
    "ssl.endpoint.identification.algorithm": _identification,
    "ssl.cipher.suites": None,
    "ssl.protocol": _ignore("librdkafka negotiates the TLS version"),
    "ssl.enabled.protocols": _ignore("librdkafka negotiates the TLS version"),
    "ssl.keymanager.algorithm": _ignore("a JVM setting"),
    "ssl.trustmanager.algorithm": _ignore("a JVM setting"),
    "ssl.secure.random.implementation": _ignore("a JVM setting"),
    "interceptor.classes": _unsupported("Java interceptors cannot run in a Python client"),
    "metric.reporters": _unsupported("Java metric reporters cannot run here; see the metrics endpoint"),
    "metrics.num.samples": _ignore("a Java metrics setting"),
    "metrics.sample.window.ms": _ignore("a Java metrics setting"),
    "metrics.recording.level": _ignore("a Java metrics setting"),
    "auto.include.jmx.reporter": _ignore("a Java metrics setting"),
    "request.timeout.ms": None,
}

CONSUMER: Dict[str, Optional[Converter]] = {
    **COMMON,
    "group.id": None,
    "group.instance.id": None,
    "auto.offset.reset": _offset_reset,
    "enable.auto.commit": None,
    "auto.commit.interval.ms": None,
    "partition.assignment.strategy": _assignors,
    "max.poll.records": _engine,
    "max.poll.interval.ms": None,
    "session.timeout.ms": None,
    "heartbeat.interval.ms": None,
    "fetch.min.bytes": None,
    "fetch.max.bytes": None,
    "max.partition.fetch.bytes": None,
    "fetch.max.wait.ms": _rename("fetch.wait.max.ms"),
    "exclude.internal.topics": _engine,
    "isolation.level": None,
    "check.crcs": None,
    "allow.auto.create.topics": None,
    "key.deserializer": _ignore("MirrorMaker always copies key and value bytes"),
    "value.deserializer": _ignore("MirrorMaker always copies key and value bytes"),
    "default.api.timeout.ms": _ignore("commit and metadata calls use the mirror's own bounded timeouts"),
    "request.timeout.ms": _ignore("the librdkafka consumer has no request timeout; see socket.timeout.ms"),
    "group.protocol": None,
}

PRODUCER: Dict[str, Optional[Converter]] = {
    **COMMON,
    "acks": None,
    "retries": None,
    "batch.size": None,
    "linger.ms": None,
    "buffer.memory": _buffer_memory,
    "max.block.ms": _engine,
    "delivery.timeout.ms": _rename("message.timeout.ms"),
    "compression.type": None,
    "compression.level": None,
    "max.request.size": _rename("message.max.bytes"),
    "max.in.flight.requests.per.connection": None,
    "enable.idempotence": None,
    "transactional.id": _ignore("the mirror's producer is transactional only with --exactly.once, which "
                                "sets one per stream"),
    "transaction.timeout.ms": None,
    "partitioner.class": _unsupported("the mirror uses the Java-compatible murmur2_random partitioner"),
    "partitioner.ignore.keys": _unsupported("the mirror uses the Java-compatible murmur2_random partitioner"),
    "key.serializer": _ignore("MirrorMaker always copies key and value bytes"),
    "value.serializer": _ignore("MirrorMaker always copies key and value bytes"),
    "producer.type": _engine,
    "delivery.report.only.error": _python_boolean,
}


def _oauthbearer(props: Dict[str, str], out: Translation) -> set:
    """The OAUTHBEARER settings, which go together (``oauthbearer``); returns the keys used."""
    options = {}
    if props.get("sasl.jaas.config"):
        kind, options = parse_jaas(props["sasl.jaas.config"])
        if kind != "oauthbearer":
            raise ConfigError("sasl.jaas.config: sasl.mechanism=OAUTHBEARER needs the "
                              "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule")
    conf, used = oauthbearer.translate(props, options, out.note)
    out.conf.update(conf)
    return used


def translate(props: Dict[str, str], role: str) -> Translation:
    """Translate one properties file (``role`` is 'consumer' or 'producer')."""
    table = CONSUMER if role == "consumer" else PRODUCER
    out = Translation()
    done = _oauthbearer(props, out) if oauthbearer.is_oauthbearer(props) else set()
    for key, value in props.items():
        if key in done:
            continue
        if key in table:
            converter = table[key]
            if converter is None:
                out.conf[key] = value
            else:
                converter(key, value, out)
        elif re.fullmatch(r"[a-z0-9_.\-]+", key):
            out.conf[key] = value
        else:
            out.note(logging.WARNING, f"{key} is not a client setting and is ignored")
    return out
