"""Peak memory of the mirror while it copies a large backlog (a benchmark, not a test).

For each record size, seeds a backlog of --gigabytes into an 8-partition topic on the source
(Apache Kafka by default, or the embedded Tansu broker), then for each mode (record mode, and
raw mode: --use.raw.bytes) runs bin/kafka-mirror-maker.py --exit.when.caught.up into an empty
target topic, and records the mirror process's peak RSS (its VmHWM, read while it runs: see
bench.peak_rss), its CPU time and its speed.
Prints a table and writes benchmarks/results/memory-latest.json, where each result replaces the
latest one of the same configuration (broker, mode, record size, backlog).

    .venv-bench/bin/python benchmarks/memory.py --gigabytes 1 --sizes 100,102400
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import peak_rss  # noqa: E402
from brokers import KINDS, PARTITIONS  # noqa: E402
from mirror_maker.embedded import die_with_parent  # noqa: E402

#: What each mode adds to the mirror's command line.
MODES = {"records": [], "raw": ["--use.raw.bytes"]}


def seed(bootstrap: str, topic: str, size: int, total_bytes: int) -> int:
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


def run_mirror(work: Path, source: str, target: str, topic: str, streams: int, mode: str) -> dict:
    tag = f"{topic}-{mode}"
    consumer = work / f"{tag}-consumer.properties"
    consumer.write_text(f"bootstrap.servers={source}\ngroup.id={tag}-mirror\nauto.offset.reset=earliest\n"
                        "session.timeout.ms=6000\nheartbeat.interval.ms=500\nmax.poll.interval.ms=60000\n")
    producer = work / f"{tag}-producer.properties"
    producer.write_text(f"bootstrap.servers={target}\nmax.request.size=10000000\n")
    command = [sys.executable, str(ROOT / "bin" / "kafka-mirror-maker.py"), "--consumer.config", str(consumer),
               "--producer.config", str(producer), "--include", topic, "--num.streams", str(streams),
               "--exit.when.caught.up", "--log.level", "WARN", *MODES[mode]]
    started = time.monotonic()
    with open(work / f"{tag}-mirror.log", "wb") as log:
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
    parser.add_argument("--modes", default="records,raw", help=f"of {', '.join(MODES)}")
    parser.add_argument("--broker", choices=sorted(KINDS), default="kafka")
    args = parser.parse_args()
    modes = args.modes.split(",")
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}")
    total = int(args.gigabytes * 1e9)
    results = []
    with tempfile.TemporaryDirectory() as tmp, KINDS[args.broker](Path(tmp)) as brokers:
        work = Path(tmp)
        for size in (int(s) for s in args.sizes.split(",")):
            topic = f"backlog-{size}"
            brokers.create_topic(brokers.source.bootstrap, topic)
            count = seed(brokers.source.bootstrap, topic, size, total)
            for mode in modes:
                brokers.fresh_target(topic)
                result = run_mirror(work, brokers.source.bootstrap, brokers.target.bootstrap, topic,
                                    args.streams, mode)
                result.update(mode=mode, record_bytes=size, records=count, gigabytes=round(count * size / 1e9, 3),
                              streams=args.streams, records_per_s=round(count / result["seconds"]))
                results.append(result)
                print(f"{mode:>7} {size:>7} B x {count:>9} records: exit {result['exit']}, peak RSS "
                      f"{result['peak_rss_mb']} MB, {result['seconds']} s, {result['records_per_s']} rec/s, "
                      f"CPU {result['cpu_seconds']} s", flush=True)
    today = datetime.date.today().isoformat()
    out = ROOT / "benchmarks" / "results" / "memory-latest.json"
    kept = json.loads(out.read_text())["results"] if out.exists() else []
    key = lambda r: (r.get("broker"), r["mode"], r["record_bytes"], r["gigabytes"])  # noqa: E731
    for result in results:
        result.update(date=today, broker=args.broker)
    fresh = {key(r) for r in results}
    report = {"python": platform.python_version(), "librdkafka": libversion()[0], "cores": os.cpu_count(),
              "results": [r for r in kept if key(r) not in fresh] + results}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
