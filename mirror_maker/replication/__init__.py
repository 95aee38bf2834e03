"""MirrorMaker 2's capabilities for a single process (KIP-382), all off by default so that
MirrorMaker v1's behaviour does not change.

``policies`` names remote topics (identity, MirrorMaker 2's default ``<alias>.<topic>``, or a
Python class) and decides, as MirrorMaker 2 does, which source topics may be mirrored (internal
topics, cycles); the options themselves are ``config.replication``. ``topic_configs`` filters
and compares topic configurations; ``acls`` converts topic ACLs as MirrorMaker 2 copies them;
``topic_sync`` is the background loop that keeps the target's topics like the source's
(partitions, configs, ACLs) and runs consumer failover's jobs. Consumer failover: ``offset_syncs``
writes offset syncs, ``checkpoints`` writes checkpoints and heartbeats and syncs group offsets,
``formats`` holds MirrorMaker 2's record formats, and ``translate`` reads checkpoints back.

May import ``errors``, ``records``, ``plugins``, ``clients``, ``ops`` and ``config``; the engine
imports it.
"""
