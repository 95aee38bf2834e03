"""Each Java properties file turned into librdkafka settings, with MirrorMaker's defaults.

Pure apart from logging: translate the Java settings (``translate``), resolve key and trust
stores (``stores``), default what MirrorMaker defaults for no data loss, log every user override
that weakens a guarantee once, as a WARN naming the risk, and let librdkafka itself check every
value before anything connects.
"""

from __future__ import annotations

import logging
from typing import Dict

import confluent_kafka

from .. import redaction
from ..errors import ConfigError
from .java_options import CLIENT_SECTION, LOGIN_CONFIG, client_login
from .providers import resolve
from .translate import Translation, is_secret, shown, translate

log = logging.getLogger("mirror_maker.config")

#: librdkafka's largest message.timeout.ms, the counterpart of Java's Integer.MAX_VALUE.
MAX_DELIVERY_TIMEOUT_MS = 2147483647

#: With sparse connections librdkafka connects to a broker only when it has a request for it,
#: after a reconnect backoff, which delays the first metadata answer and the group join; a mirror
#: talks to the leaders of every partition of its topics, so it needs nearly every broker anyway.
EAGER_CONNECTIONS = {"enable.sparse.connections": "false"}
CONSUMER_DEFAULTS = {
    "enable.auto.commit": "false",
    **EAGER_CONNECTIONS,
    # librdkafka stops fetching a partition whose prefetch queue is full for this long (1 s by
    # default), and a mirror drains its queue in milliseconds: at 1 s the consumer would sit idle.
    "fetch.queue.backoff.ms": "10",
}
PRODUCER_DEFAULTS = {
    "acks": "all",
    **EAGER_CONNECTIONS,
    "enable.idempotence": "true",
    # The idempotent producer keeps order with up to 5 requests in flight (librdkafka's cap).
    "max.in.flight.requests.per.connection": "5",
    # No Python call per acknowledged record: failures still come back one by one.
    "delivery.report.only.error": True,
    "message.timeout.ms": str(MAX_DELIVERY_TIMEOUT_MS),
    # Java's default partitioner for keyed records (murmur2), random for null keys.
    "partitioner": "murmur2_random",
    # Java's buffer.memory default (32 MB) instead of librdkafka's 1 GB: bounds the mirror's
    # memory when the target is slower than the source (the send then waits: back-pressure).
    "queue.buffering.max.kbytes": "32768",
}


def parse_int(value: str, key: str, minimum: int = 0) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{key}: '{value}' is not a whole number") from None
    if number < minimum:
        raise ConfigError(f"{key}: {number} is below the minimum of {minimum}")
    return number


def _log_notes(translation: Translation, source: str) -> None:
    for level, message in translation.notes:
        log.log(level, "%s: %s", source, message)


def _apply_defaults(conf: Dict[str, str], defaults: Dict[str, str]) -> Dict[str, str]:
    merged = dict(defaults)
    merged.update(conf)
    return merged


def _warn_weakened_consumer(conf: Dict[str, str]) -> None:
    if conf.get("enable.auto.commit", "false").lower() != "false":
        log.warning("consumer enable.auto.commit=%s overrides false: offsets may be committed "
                    "before the target has the records - data loss is possible",
                    conf["enable.auto.commit"])


def _warn_weakened_producer(conf: Dict[str, str], user: Dict[str, str]) -> None:
    acks = conf.get("acks", "all").lower()
    if acks not in ("all", "-1"):
        log.warning("producer acks=%s overrides all: a record acknowledged by the leader alone "
                    "can be lost if it fails - data loss is possible", acks)
        if "enable.idempotence" not in user:
            conf["enable.idempotence"] = "false"  # as Java: implicit idempotence needs acks=all
    if conf.get("enable.idempotence", "true").lower() == "false":
        log.warning("producer enable.idempotence=false: retries may write duplicates "
                    "and reorder records")
        if "max.in.flight.requests.per.connection" not in user:
            conf["max.in.flight.requests.per.connection"] = "1"  # MirrorMaker's rule without idempotence
    in_flight = str(conf.get("max.in.flight.requests.per.connection", "5"))
    idempotent = str(conf.get("enable.idempotence", "true")).lower() != "false"
    if in_flight != "1" and not idempotent:
        log.warning("producer max.in.flight.requests.per.connection=%s without idempotence: "
                    "a retried request can land after a later one - message reordering is possible",
                    in_flight)
    timeout = parse_int(conf.get("message.timeout.ms", MAX_DELIVERY_TIMEOUT_MS), "delivery.timeout.ms")
    if timeout != MAX_DELIVERY_TIMEOUT_MS:
        log.warning("producer delivery.timeout.ms=%d: a record not delivered in time is a send "
                    "failure (abort, or dropped with --abort.on.send.failure false)", timeout)
    if conf.get("partitioner", "murmur2_random") != "murmur2_random":
        log.warning("producer partitioner=%s: keyed records may land in other partitions than "
                    "a Java producer would choose", conf["partitioner"])


def _resolve_ssl(translation: Translation, source: str, tag: str) -> None:
    """Map Java key/trust stores (JKS, PKCS12, PEM) to librdkafka's settings.

    JKS and PKCS12 truststores and JKS keystores are converted to private PEM files
    (``stores``); PKCS12 keystores are read by librdkafka itself.
    """
    engine, conf = translation.engine, translation.conf
    trust = engine.pop("ssl.truststore.location", None)
    trust_type = engine.pop("ssl.truststore.type", "JKS").strip().upper()
    trust_password = engine.pop("ssl.truststore.password", None)
    key = engine.pop("ssl.keystore.location", None)
    key_type = engine.pop("ssl.keystore.type", "JKS").strip().upper()
    key_password = engine.pop("ssl.keystore.password", None)
    if not (trust or key):
        return
    from . import stores  # cryptography and pyjks: only for a file that names a store

    try:
        if trust:
            conf["ssl.ca.location"] = (trust if trust_type == "PEM" else
                                       stores.truststore_to_pem(trust, trust_type, trust_password, tag))
        if key:
            if key_type == "PKCS12":
                conf["ssl.keystore.location"] = key
                if key_password is not None:
                    conf["ssl.keystore.password"] = key_password
            elif key_type == "PEM":
                conf["ssl.certificate.location"] = key
                conf["ssl.key.location"] = key
            elif key_type == "JKS":
                cert, private_key, secret = stores.jks_keystore_to_pem(
                    key, key_password, conf.get("ssl.key.password"), tag)
                conf.update({"ssl.certificate.location": cert, "ssl.key.location": private_key})
                if secret:
                    conf["ssl.key.password"] = secret
            else:
                raise ConfigError(f"ssl.keystore.type={key_type} is not supported (JKS, PKCS12 or PEM)")
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def check_librdkafka(conf: Dict[str, str], source: str, role: str) -> Dict[str, str]:
    """Ask librdkafka itself about every setting, without connecting anywhere.

    Unknown names are dropped with a WARN (an unknown key never crashes the tool); an invalid
    value, or settings that do not go together, are a one-line :class:`ConfigError`.
    """
    quiet = logging.getLogger("mirror_maker.librdkafka.check")
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    checked = {}
    for key, value in conf.items():
        try:
            confluent_kafka.Producer({key: value, "logger": quiet})
        except confluent_kafka.KafkaException as exc:
            message = exc.args[0].str()
            if message.startswith("No such configuration property"):
                log.warning("%s: %s is not a known client setting and is ignored", source, key)
                continue
            if message.startswith("Invalid value"):
                raise ConfigError(f"{source}: {shown(key, value)}: {message}") from None
        checked[key] = value
    # All settings together (no bootstrap servers: nothing connects), for cross-field rules.
    together = {k: v for k, v in checked.items() if k != "bootstrap.servers"}
    together["logger"] = quiet
    client = confluent_kafka.Consumer if role == "consumer" else confluent_kafka.Producer
    try:
        instance = client(together)
    except confluent_kafka.KafkaException as exc:
        raise ConfigError(f"{source}: {exc.args[0].str()}") from None
    if role == "consumer":
        instance.close()
    return checked


def register_secrets(*settings: Dict[str, str]) -> None:
    """Every secret value of these settings, registered to be hidden from every line written
    (also in a Spark task's process, which gets the settings but never reads the files)."""
    redaction.register(*(value for conf in settings for key, value in conf.items() if is_secret(key)))


def _with_jaas_file(props: Dict[str, str], source: str) -> Dict[str, str]:
    """A SASL client without ``sasl.jaas.config`` logs in with the ``KafkaClient`` section of the
    JAAS file ``KAFKA_OPTS`` names, as the Java client does."""
    protocol = props.get("security.protocol", "").strip().upper()
    if props.get("sasl.jaas.config") or not protocol.startswith("SASL_"):
        return props
    login = client_login()
    if login is None:
        return props
    entry, path = login
    log.info("%s: no sasl.jaas.config: logging in with the %s section of %s (%s in KAFKA_OPTS)",
             source, CLIENT_SECTION, path, LOGIN_CONFIG)
    return {**props, "sasl.jaas.config": entry}


def _build_client_conf(props: Dict[str, str], source: str, role: str):
    """Resolve config providers and the JAAS file, translate, resolve stores, apply the
    defaults, check: the steps both files share. Every secret met is registered for redaction."""
    props = _with_jaas_file(resolve(props, source), source)
    register_secrets(props)
    translation = translate(props, role)
    register_secrets(translation.conf, translation.engine)
    _log_notes(translation, source)
    _resolve_ssl(translation, source, role)
    conf = _apply_defaults(translation.conf, CONSUMER_DEFAULTS if role == "consumer" else PRODUCER_DEFAULTS)
    if role == "consumer" and not conf.get("group.id"):
        raise ConfigError(f"{source}: group.id is missing (the mirror threads share one consumer group)")
    if not conf.get("bootstrap.servers"):
        raise ConfigError(f"{source}: bootstrap.servers is missing")
    return conf, translation


def build_consumer_conf(props: Dict[str, str], source: str):
    conf, translation = _build_client_conf(props, source, "consumer")
    if "client.id" in props:
        log.info("%s: client.id is replaced by <group.id>-<thread> for each mirror thread", source)
        conf.pop("client.id")
    _warn_weakened_consumer(conf)
    return check_librdkafka(conf, source, "consumer"), translation.engine


def build_admin_overrides(props: Dict[str, str], source: str) -> Dict[str, str]:
    """An admin client's own settings (mm2.properties' ``<alias>.admin.*``) as librdkafka's: laid
    over the cluster's connection and security settings in every admin client of that cluster,
    as MirrorMaker 2's ``sourceAdminConfig``/``targetAdminConfig`` do. What only a producer or a
    consumer takes has no meaning there and is dropped by the admin client."""
    if not props:
        return {}
    props = resolve(props, source)
    register_secrets(props)
    translation = translate(props, "producer")
    register_secrets(translation.conf, translation.engine)
    _log_notes(translation, source)
    _resolve_ssl(translation, source, "admin")
    return check_librdkafka(translation.conf, source, "producer")


def build_producer_conf(props: Dict[str, str], source: str):
    conf, translation = _build_client_conf(props, source, "producer")
    _warn_weakened_producer(conf, translation.conf)
    return check_librdkafka(conf, source, "producer"), translation.engine


def settle_transactions(config):
    """What --exactly.once needs of the two files: an idempotent producer with acks=all
    (transactions require it; the mirror sets a transactional.id per stream), and a read_committed
    consumer (a transactional source's aborted records must not be mirrored)."""
    if not config.exactly_once:
        return config
    producer, consumer = config.producer, config.consumer
    if str(producer.get("acks", "all")).lower() not in ("all", "-1"):
        raise ConfigError(f"--exactly.once needs producer acks=all, not {producer['acks']}")
    if str(producer.get("enable.idempotence", "true")).lower() == "false":
        raise ConfigError("--exactly.once needs an idempotent producer: remove enable.idempotence=false")
    if consumer.get("isolation.level", "read_committed") != "read_committed":
        log.warning("consumer isolation.level=%s overrides read_committed: with --exactly.once a "
                    "transactional source's aborted records would be mirrored", consumer["isolation.level"])
    return config
