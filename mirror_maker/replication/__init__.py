"""MirrorMaker 2's topic capabilities for a single process (KIP-382), all off by default so that
MirrorMaker v1's behaviour does not change.

``policies`` names remote topics (identity, MirrorMaker 2's default ``<alias>.<topic>``, or a
Python class) and decides, as MirrorMaker 2 does, which source topics may be mirrored (internal
topics, cycles) (the options themselves: ``config.replication``); ``topic_configs`` filters
and compares topic configurations; ``acls`` converts topic ACLs as MirrorMaker 2 copies them;
``topic_sync`` is the background loop that keeps the target's topics like the source's
(partitions, configs, ACLs) and runs consumer failover's jobs; ``offset_syncs`` and
``checkpoints`` are consumer failover (offset syncs, checkpoints, group offset sync, heartbeats)
in ``formats``, MirrorMaker 2's record formats; ``translate`` reads checkpoints back. May import ``errors``, ``records``, ``plugins``, ``clients``, ``ops``
and ``config``; the engine imports it.
"""
