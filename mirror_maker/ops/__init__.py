"""What an operator sees: logs, metrics, the status line, the HTTP endpoint and systemd's notify.

``log`` gives Kafka's log layout and routes librdkafka's lines, ``metrics`` keeps the numbers as
plain counters and exports them at scrape time, ``status`` writes the status line and decides
"caught up", ``endpoint`` serves /metrics, /healthz and /ready, ``notify`` speaks sd_notify.
Imports only ``errors``, ``records`` and ``redaction`` from the rest of the package.
"""
