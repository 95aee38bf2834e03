"""Shallow mirroring (``--use.raw.bytes``, KIP-712): whole record batches from the source to the
same partitions of the target, without decompressing or re-encoding a record.

``batches`` reads and rewrites v2 batch headers, ``connections`` builds Kafka protocol clients
(kafka-python) from the translated client settings, ``fetcher`` fetches batches, ``producer``
sends them idempotently and in order, and ``worker`` is the raw mirror thread, which keeps record
mode's group membership and commit rules. May import ``engine``, ``clients``, ``ops``,
``records``, ``handlers`` and ``errors``; only the engine imports it, and only with
``--use.raw.bytes`` (kafka-python is not loaded otherwise).
"""
