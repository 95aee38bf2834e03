"""Peak memory of the mirror while it copies a large backlog (a benchmark, not a test).

For each record size, seeds a backlog of --gigabytes into an 8-partition topic on an embedded
source broker, runs bin/kafka-mirror-maker.py --exit.when.caught.up against an embedded target,
and records the mirror process's peak RSS (its VmHWM, read while it runs: see bench.peak_rss), its
CPU time and its speed.
Prints a table and writes benchmarks/results/memory-<date>.json.

    .venv/bin/python benchmarks/memory.py --gigabytes 1 --sizes 100,102400
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer, libversion
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import peak_rss  # noqa: E402
from mirror_maker.embedded import EmbeddedBroker, die_with_parent  # noqa: E402

PARTITIONS = 8


def seed(bootstrap: str, topic: str, size: int, total_bytes: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep it alive until the future resolves
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1000000,
                         "batch.num.messages": 100000, "queue.buffering.max.messages": 1000000,
                         "queue.buffering.max.kbytes": 2097151, "message.max.bytes": 10000000})
    count = max(1, total_bytes // size)
    value = os.urandom(size)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, str(i % 1000).encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(600):
        raise SystemExit("seeding did not finish")
    return count


def run_mirror(work: Path, source: str, target: str, topic: str, streams: int) -> dict:
    consumer = work / f"{topic}-consumer.properties"
    consumer.write_text(f"bootstrap.servers={source}\ngroup.id={topic}-mirror\nauto.offset.reset=earliest\n"
                        "session.timeout.ms=2000\nheartbeat.interval.ms=200\nmax.poll.interval.ms=60000\n")
    producer = work / f"{topic}-producer.properties"
    producer.write_text(f"bootstrap.servers={target}\nmax.request.size=10000000\n")
    command = [sys.executable, str(ROOT / "bin" / "kafka-mirror-maker.py"), "--consumer.config", str(consumer),
               "--producer.config", str(producer), "--include", topic, "--num.streams", str(streams),
               "--exit.when.caught.up", "--log.level", "WARN"]
    started = time.monotonic()
    with open(work / f"{topic}-mirror.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   preexec_fn=die_with_parent())
        peak = 0
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, peak_rss(process.pid))
            time.sleep(0.05)
    seconds = time.monotonic() - started
    return {"exit": os.waitstatus_to_exitcode(status), "seconds": round(seconds, 2),
            "peak_rss_mb": round(peak / 2**20, 1),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--sizes", default="100,102400", help="record value sizes in bytes")
    parser.add_argument("--streams", type=int, default=1)
    args = parser.parse_args()
    total = int(args.gigabytes * 1e9)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for size in (int(s) for s in args.sizes.split(",")):
            with EmbeddedBroker("source", work) as source, EmbeddedBroker("target", work) as target:
                topic = f"backlog-{size}"
                count = seed(source.bootstrap, topic, size, total)
                result = run_mirror(work, source.bootstrap, target.bootstrap, topic, args.streams)
                result.update(record_bytes=size, records=count, gigabytes=round(count * size / 1e9, 3),
                              streams=args.streams,
                              records_per_s=round(count / result["seconds"]))
                results.append(result)
                print(f"{size:>7} B x {count:>9} records: exit {result['exit']}, peak RSS "
                      f"{result['peak_rss_mb']} MB, {result['seconds']} s, {result['records_per_s']} rec/s, "
                      f"CPU {result['cpu_seconds']} s", flush=True)
    report = {"date": datetime.date.today().isoformat(), "python": platform.python_version(),
              "librdkafka": libversion()[0], "cores": os.cpu_count(), "results": results}
    out = ROOT / "benchmarks" / "results" / f"memory-{report['date']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
