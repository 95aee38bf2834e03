"""``verify``: proof that a target holds what its source holds, for the day a team moves.

Reads every partition a mirror copies on both clusters up to the ends they had when the check
began and compares them record by record (key, value, headers, timestamp): in order where the
mirror keeps partitions, as a multiset per key where the producer's partitioner chose them, by
the latest record of each key where either side is compacted. ``fingerprint`` reduces a record to
8 bytes, ``reading`` reads a topic's partitions to their bounds, ``compare`` finds and names the
differences, ``report`` prints them, ``check`` plans one flow's comparison from the mirror's own
configuration. Nothing here writes to either cluster.
"""
