"""Process exit statuses, as Kafka 3.9's ``kafka-mirror-maker.sh`` (a JVM) returns them."""

OK = 0
#: Usage and configuration errors, found before connecting (Kafka exits 1 for all of them).
USAGE = 1
#: A mirror thread died or a send failed with ``--abort.on.send.failure true`` (Kafka's ``exit(-1)``).
FATAL = 255
#: A clean stop on SIGINT, as the JVM reports it (128 + 2).
SIGINT = 130
#: A clean stop on SIGTERM, as the JVM reports it (128 + 15).
SIGTERM = 143
