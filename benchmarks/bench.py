"""Mirror throughput against the Python client's limits and against peers, on embedded brokers.

A benchmark, not a test: it prints numbers and writes a report. For each workload (record size
x count, 8 partitions, compression none and lz4) it measures, on the same brokers in the same
run: the produce-only and consume-only limits (limit.py), our mirror end to end with
--num.streams 1, 2 and 4 and with --spark (local mode, 2 streams) (from process start until it
exits caught up, every record on the target), and two peers a Python user would pick instead (peers/). For each: records/s, MB/s,
CPU seconds per GB and peak RSS, medians of --runs runs. Then the cost growth (partitions and
topics), a profile of the 100 B mirror, results/<date>.json, results/<date>.md and a PNG plot.

    .venv-bench/bin/python benchmarks/bench.py --runs 3          # what `make bench` runs
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer, libversion
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirror_maker.embedded import EmbeddedBroker, die_with_parent  # noqa: E402

HERE = Path(__file__).resolve().parent
PARTITIONS = 8
WORKLOADS = [(100, 1_000_000), (1000, 200_000), (102400, 2_000)]
GROUP_SETTINGS = "session.timeout.ms=2000\nheartbeat.interval.ms=200\nmax.poll.interval.ms=60000\n"


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result()


def create_topics(bootstrap: str, topics, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for start in range(0, len(topics), 200):
        futures = admin.create_topics([NewTopic(t, num_partitions=partitions) for t in topics[start:start + 200]])
        for future in futures.values():
            future.result()


def seed(bootstrap: str, topics, size: int, count: int, compression: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1000000,
                         "batch.num.messages": 100000, "queue.buffering.max.messages": 1000000,
                         "queue.buffering.max.kbytes": 2097151, "message.max.bytes": 10000000,
                         "compression.type": compression})
    # JSON-like text with a random tail, so that lz4 has something (but not everything) to compress.
    for i in range(count):
        body = f'{{"seq":{i},"user":"u{i % 5000}","tail":"{os.urandom(8).hex()}"}}'.encode()
        value = (body * (size // len(body) + 1))[:size]
        topic = topics[i % len(topics)]
        while True:
            try:
                producer.produce(topic, value, f"k{i % 1000}".encode())
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(600):
        raise SystemExit("seeding did not finish")


def tree_usage(root_pid: int) -> dict:
    """{pid: (resident bytes, CPU seconds)} of a process and all its descendants (/proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    usage, todo = {}, [root_pid]
    tick = os.sysconf("SC_CLK_TCK")
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm") as statm:
                rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            usage[pid] = (rss, (int(fields[11]) + int(fields[12])) / tick)  # utime + stime
        except (OSError, IndexError, ValueError):
            pass
    return usage


def measure(command, log_path: Path, env=None, whole_tree: bool = False) -> dict:
    """Run ``command`` as a child; wall time, CPU and peak RSS of that child (wait4).

    ``whole_tree``: the child starts other processes (Spark's JVM and Python workers), so both
    are taken over the process tree, sampled every 0.5 s: the peak of the summed RSS, and the
    sum of each process's last seen CPU time (at most 0.5 s of each process's end is missed).
    """
    started = time.monotonic()
    peak_tree, cpu_seen = 0, {}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT),
                                   env={**os.environ, **(env or {})}, preexec_fn=die_with_parent())
        if not whole_tree:
            _pid, status, usage = os.wait4(process.pid, 0)
        else:
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    break
                sample = tree_usage(process.pid)
                peak_tree = max(peak_tree, sum(rss for rss, _cpu in sample.values()))
                cpu_seen.update({pid: cpu for pid, (_rss, cpu) in sample.items()})
                time.sleep(0.5)
    cpu = usage.ru_utime + usage.ru_stime
    if whole_tree:
        cpu = max(cpu, sum(cpu_seen.values()))
    return {"exit": os.waitstatus_to_exitcode(status), "seconds": time.monotonic() - started,
            "cpu_seconds": cpu, "peak_rss_mb": peak_tree / 2**20 if whole_tree else usage.ru_maxrss / 1024,
            "log": log_path}


def mirror_command(work: Path, source: str, target: str, include: str, streams: int,
                   compression: str, tag: str, *extra: str, log_level: str = "WARN"):
    consumer = work / f"{tag}-consumer.properties"
    consumer.write_text(f"bootstrap.servers={source}\ngroup.id={tag}-{time.time_ns()}\n"
                        f"auto.offset.reset=earliest\n{GROUP_SETTINGS}")
    producer = work / f"{tag}-producer.properties"
    producer.write_text(f"bootstrap.servers={target}\ncompression.type={compression}\n"
                        "max.request.size=10000000\n")
    return [sys.executable, str(ROOT / "bin" / "kafka-mirror-maker.py"), "--consumer.config", str(consumer),
            "--producer.config", str(producer), "--include", include, "--num.streams", str(streams),
            "--exit.when.caught.up", "--log.level", log_level, "--status.interval.ms", "0", *extra]


def spark_startup_s(log: Path) -> float:
    """Seconds from the mirror's first log line to the first Spark worker running (the cold start
    of the JVM, the SparkContext and pyspark's worker daemon)."""
    stamps = re.findall(r"^\[([\d-]+ [\d:]+,\d+)\] INFO (Starting mirror maker|Spark worker \d+ started)",
                        log.read_text(errors="replace"), re.M)
    if len(stamps) < 2:
        return float("nan")
    parse = lambda text: datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")  # noqa: E731
    return (parse(stamps[1][0]) - parse(stamps[0][0])).total_seconds()


def caught_up_count(log: Path) -> int:
    match = re.search(r"Caught up: (\d+) records", log.read_text(errors="replace"))
    return int(match.group(1)) if match else -1


def summarize(samples, records: int, size: int) -> dict:
    seconds = statistics.median(s["seconds"] for s in samples)
    cpu = statistics.median(s["cpu_seconds"] for s in samples)
    gigabytes = records * size / 1e9
    summary = {"records_per_s": round(records / seconds), "mb_per_s": round(records * size / seconds / 1e6, 1),
               "seconds": round(seconds, 2), "cpu_s_per_gb": round(cpu / gigabytes, 1),
               "peak_rss_mb": round(statistics.median(s["peak_rss_mb"] for s in samples), 1),
               "runs": len(samples), "ok": all(s.get("ok", s["exit"] == 0) for s in samples)}
    if all("startup_s" in s for s in samples):
        startup = statistics.median(s["startup_s"] for s in samples)
        summary["startup_s"] = round(startup, 2)
        summary["records_per_s_after_start"] = round(records / max(seconds - startup, 1e-9))
    return summary


class Bench:
    def __init__(self, args, work: Path) -> None:
        self.args, self.work = args, work
        self.results = {"workloads": [], "growth": []}
        self.peers_python = args.peers_python

    def workload(self, size: int, count: int, compression: str) -> None:
        name = f"{size} B x {count:,} ({compression})"
        print(f"\n== {name}", flush=True)
        row = {"record_bytes": size, "records": count, "compression": compression, "results": {}}
        with EmbeddedBroker("source", self.work) as source, EmbeddedBroker("target", self.work) as target:
            topic = f"w{size}{compression}"
            create_topic(source.bootstrap, topic)
            seed(source.bootstrap, [topic], size, count, compression)
            row["results"]["limit: produce only"] = self._limit("produce", target, size, count, compression)
            row["results"]["limit: consume only"] = self._limit("consume", source, size, count, compression, topic)
            for streams in self.args.streams:
                row["results"][f"mirror, --num.streams {streams}"] = self._repeat(
                    lambda i: self._mirror(source, target, topic, streams, compression, count, f"m{streams}-{i}"),
                    count, size)
            for streams in self.args.spark_streams:
                row["results"][f"mirror --spark, --num.streams {streams}"] = self._repeat(
                    lambda i: self._mirror(source, target, topic, streams, compression, count,
                                           f"s{streams}-{i}", spark=True), count, size)
            if self.peers_python:
                for peer in ("confluent_loop", "quix_replicator"):
                    row["results"][f"peer: {peer.replace('_', ' ')}"] = self._repeat(
                        lambda i: self._peer(peer, source, target, topic, compression, count, f"{peer}-{i}"),
                        count, size)
        for label, result in row["results"].items():
            print(f"  {label:<28} {result['records_per_s']:>9,} rec/s {result['mb_per_s']:>7} MB/s "
                  f"{result['cpu_s_per_gb']:>6} CPU s/GB {result['peak_rss_mb']:>7} MB RSS"
                  f"{'' if result['ok'] else '  (FAILED)'}", flush=True)
        self.results["workloads"].append(row)

    def _repeat(self, run_once, count: int, size: int) -> dict:
        return summarize([run_once(i) for i in range(self.args.runs)], count, size)

    def _limit(self, mode, broker, size, count, compression, topic=None) -> dict:
        def once(i):
            name = topic or f"limit-{size}-{compression}-{i}-{time.time_ns()}"
            if mode == "produce":
                create_topic(broker.bootstrap, name)
            command = [sys.executable, str(HERE / "limit.py"), mode, broker.bootstrap, name, str(count),
                       str(size), "--compression", compression]
            sample = measure(command, self.work / f"limit-{mode}-{i}.log")
            inner = json.loads(sample["log"].read_text().strip().splitlines()[-1])
            sample["seconds"] = inner["seconds"]  # the client's own loop, without interpreter start
            return sample
        return self._repeat(once, count, size)

    def _fresh_target(self, target, topic):
        target.restart()  # memory storage: an empty broker, so runs do not pile up data
        create_topic(target.bootstrap, topic)

    def _mirror(self, source, target, topic, streams, compression, count, tag, spark=False) -> dict:
        self._fresh_target(target, topic)
        extra = ("--spark",) if spark else ()
        sample = measure(mirror_command(self.work, source.bootstrap, target.bootstrap, topic, streams,
                                        compression, tag, *extra, log_level="INFO" if spark else "WARN"),
                         self.work / f"{tag}.log", whole_tree=spark)
        sample["ok"] = sample["exit"] == 0 and caught_up_count(sample["log"]) == count
        if spark:
            sample["startup_s"] = spark_startup_s(sample["log"])
        if not sample["ok"]:
            print(f"    {tag}: exit {sample['exit']}, see its log:\n"
                  + "".join(sample["log"].read_text(errors="replace").splitlines(True)[-5:]), flush=True)
        return sample

    def _peer(self, peer, source, target, topic, compression, count, tag) -> dict:
        self._fresh_target(target, topic)
        command = [self.peers_python, str(HERE / "peers" / f"{peer}.py"), source.bootstrap,
                   target.bootstrap, topic, str(count), "--compression", compression]
        sample = measure(command, self.work / f"{tag}.log")
        sample["ok"] = sample["exit"] == 0
        return sample

    def growth(self) -> None:
        print("\n== cost growth (1 KB records, one run each)", flush=True)
        size = 1000
        cases = [("partitions", n, 1, n, 40_000) for n in (8, 64, 512)]
        cases += [("topics", n, n, 1, 40_000) for n in (1, 100, 1000)]
        for axis, value, topics, partitions, count in cases:
            with EmbeddedBroker("source", self.work) as source, EmbeddedBroker("target", self.work) as target:
                names = [f"g{axis[0]}{value}-{i}" for i in range(topics)]
                create_topics(source.bootstrap, names, partitions)
                create_topics(target.bootstrap, names, partitions)
                seed(source.bootstrap, names, size, count, "none")
                sample = measure(mirror_command(self.work, source.bootstrap, target.bootstrap,
                                                f"g{axis[0]}{value}-.*", 1, "none", f"g{axis}{value}"),
                                 self.work / f"growth-{axis}-{value}.log")
                ok = sample["exit"] == 0 and caught_up_count(sample["log"]) == count
                result = summarize([{**sample, "ok": ok}], count, size)
                result.update(axis=axis, value=value, topics=topics, partitions_per_topic=partitions)
                self.results["growth"].append(result)
                print(f"  {axis:<10} {value:>5}: {result['records_per_s']:>8,} rec/s, {result['seconds']:>6} s, "
                      f"{result['peak_rss_mb']:>6} MB RSS{'' if ok else '  (FAILED)'}", flush=True)

    def profile(self) -> None:
        """Where the time goes for 100 B records: py-spy's self time per function."""
        py_spy = Path(sys.executable).parent / "py-spy"
        if not py_spy.exists():
            return
        print("\n== profile (100 B x 300,000, --num.streams 1)", flush=True)
        with EmbeddedBroker("source", self.work) as source, EmbeddedBroker("target", self.work) as target:
            create_topic(source.bootstrap, "prof")
            seed(source.bootstrap, ["prof"], 100, 300_000, "none")
            raw = self.work / "profile.txt"
            command = [str(py_spy), "record", "--format", "raw", "-o", str(raw), "--rate", "250",
                       "--nonblocking", "--"] + mirror_command(self.work, source.bootstrap, target.bootstrap,
                                                               "prof", 1, "none", "prof")
            measure(command, self.work / "profile.log")
        self_time, total = Counter(), 0
        for line in raw.read_text().splitlines():
            stack, _, samples = line.rpartition(" ")
            frame = stack.split(";")[-1]
            self_time[re.sub(r" \(/.*?/(mirror_maker|site-packages)/", r" (\1/", frame)] += int(samples)
            total += int(samples)
        self.results["profile"] = [{"function": f, "percent": round(100 * n / total, 1)}
                                   for f, n in self_time.most_common(12)]
        for entry in self.results["profile"]:
            print(f"  {entry['percent']:5.1f}%  {entry['function']}")


def machine() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    return {"date": datetime.date.today().isoformat(), "commit": commit, "cores": os.cpu_count(),
            "python": platform.python_version(), "librdkafka": libversion()[0],
            "machine": platform.machine(), "kernel": platform.release()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    parser.add_argument("--spark-streams", type=lambda s: [int(x) for x in s.split(",") if x], default=[2],
                        help="--num.streams of the --spark rows (empty: none)")
    parser.add_argument("--compressions", default="none,lz4")
    parser.add_argument("--peers-python", default=None,
                        help="a Python with quixstreams installed (the benchmark's own venv); peers skipped without")
    parser.add_argument("--skip-growth", action="store_true")
    parser.add_argument("--skip-profile", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a tenth of the records, one run (a smoke test)")
    args = parser.parse_args()
    workloads = [(size, count // 10 if args.quick else count) for size, count in WORKLOADS]
    if args.quick:
        args.runs = 1
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mirror-bench-") as tmp:
        bench = Bench(args, Path(tmp))
        for size, count in workloads:
            for compression in args.compressions.split(","):
                bench.workload(size, count, compression)
        if not args.skip_growth:
            bench.growth()
        if not args.skip_profile:
            bench.profile()
    report = {"machine": machine(), "runs": args.runs, "minutes": round((time.monotonic() - started) / 60, 1),
              **bench.results}
    from report import write_report  # noqa: E402  (matplotlib only when a report is written)

    paths = write_report(report, HERE / "results")
    print(f"\nwritten: {', '.join(str(p.relative_to(ROOT)) for p in paths)} in {report['minutes']} min")


if __name__ == "__main__":
    main()
