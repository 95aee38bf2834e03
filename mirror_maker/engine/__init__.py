"""The mirror itself: N mirror threads sharing one producer, and the run around them.

``runner`` builds and runs one process's mirror (signals, bounded shutdown), ``worker`` is one mirror
thread (consume, hand to the handler, produce, commit when due, the internal rebalance listener),
``state`` is the stop flag and the first fatal failure every part shares, and ``subscription`` keeps
the list of matching source topics. May import ``config``, ``clients``, ``offsets``, ``ops`` and
the API-level modules; the Spark driver and the command line build on it.
"""
