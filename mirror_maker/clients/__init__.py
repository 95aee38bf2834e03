"""The Kafka clients the engine drives, and what they report.

``producer`` is the producer every mirror thread shares (send-failure semantics, flush),
``admin`` builds admin clients and lists topics, ``target_topics`` creates missing target topics,
``client_errors`` turns librdkafka's client-level errors into what an operator can act on, and
``retry`` decides what is retried. May import ``errors``, ``records``, ``ops`` and ``engine.state``
(the shared stop and failure flag); never the engine's threads.
"""
