"""Mirror throughput against the Python client's limits and against peers, on Apache Kafka and on
Tansu, in one run.

A benchmark, not a test: it prints numbers and writes a report. For each broker kind (Apache
Kafka 4.x from Maven jars first, the ground truth; then Tansu, the demo's embedded broker) and
each workload (record size x count, 8 partitions, compression none and lz4) it measures, on the
same brokers in the same run: the produce-only and consume-only limits of the Python client
(limit.py), our mirror with --num.streams 1, 2 and 4 and with --spark, and peers: on Kafka,
Kafka's own MirrorMaker v1 (3.9, run as kafka-mirror-maker.sh runs it) and MirrorMaker 2
(dedicated mode, tasks = streams); on both, the plain confluent-kafka loop; on Tansu,
quix-streams' replicator. For each: records/s, MB/s, CPU seconds per GB (JVMs included) and
peak RSS, medians of --runs runs, run in rounds (one run of every row, the limits too, in an order of
its own each round, the rows a goal divides by each other back to back, then the next); on Kafka,
MirrorMaker 2's dedicated mode (DEDICATED: one mm2.properties with two flows, ours against
Kafka's), and if asked, raw mode's goal row again with more records (--raw-goal, RAW_GOAL: ingest
limit, record mode, raw mode) and raw mode against record mode on sources whose batches its
record path takes (--record-path, RECORD_PATH_SOURCES: a LogAppendTime and a compacted topic);
then the cost growth, a profile, results/latest.json, .md, .png and a row of
results/history.md. The report states each goal of the
throughput issues against the run (goals.py) and where the machine's CPU went in the main runs
(cpu_split.py: the tool's threads, both brokers, and whether its busiest thread waited for a core).

How a run is timed. On Apache Kafka every row is timed in steady state: a watcher reads the
target's end offsets (read_committed: the last stable offsets, so a transactional tool counts
only committed records) every 10 ms from the process start; the window starts --settle seconds
after the first record on the target and lasts --window seconds, over a backlog (STEADY_BACKLOG)
that the fastest tool does not finish sooner; then SIGTERM. The row's rate is the records that
arrived over the window (medians of --runs, with their spread); start-up (process start to first
record), end to end (what the run mirrored over its whole time) and the stop are reported beside
it. The limits time their own loops over the same window. Exactly-once rows commit every second.
On Tansu, whose ListOffsets is wrong, the mirror exits by itself (--exit.when.caught.up) and the
peers after their count: from process start to exit; the mirror's own INFO lines give its group
join and its rate from then until it caught up. With the brokers pinned to core 0 and the tool to
core 1 (taskset), the streams run again: how they scale where the mirror has a core of its own.

    .venv-bench/bin/python benchmarks/bench.py --runs 3          # what `make bench` runs
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition,
                             libversion)
from confluent_kafka.admin import AdminClient, OffsetSpec

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from brokers import KINDS, PARTITIONS, Brokers  # noqa: E402
from cpu_split import CpuSplit, thread_shares  # noqa: E402
from failover import failover  # noqa: E402
from goals import COPY, INGEST, ONE_STREAM, RAW, SPARK_TWO, TWO_STREAMS, copy_label  # noqa: E402
from mirror_maker.embedded import die_with_parent  # noqa: E402

WORKLOADS = [(100, 1_000_000), (1000, 200_000), (102400, 2_000)]
#: On Apache Kafka a run is timed over a window once records flow (--settle, then --window
#: seconds): the backlog is what raw mode, the fastest, mirrors in a little more than that (its
#: rate once flowing, with a margin), so that every row's window is whole. Deleted after its rows.
#: The lz4 ones are sized from the ingest limit's fastest run (benchmarks/results/history.md, 421f66c),
#: 1 KB none from the consume limit's (747,432 records/s at 58c4ddd: 14,000,000 lasted it 16.9 s),
#: 100 B none from the ingest limit's (3,990,582 at bb7b16e: 45,000,000 lasted it 9.2 s).
STEADY_BACKLOG = {(100, "none"): 100_000_000, (100, "lz4"): 150_000_000, (1000, "none"): 18_000_000,
                  (1000, "lz4"): 75_000_000, (102400, "none"): 150_000, (102400, "lz4"): 400_000}
#: Tansu keeps its log in memory: its backlogs are what its memory holds, and its runs are timed
#: by the mirror's own lines from the group join (docs/performance.md says what that means).
TANSU_BACKLOG = {100: 5_000_000, 1000: 1_000_000, 102400: 10_000}
SEED_VALUES = 10_000
#: The profile's records: several seconds of record mode once flowing, so that its start is a small part.
PROFILE_RECORDS = 3_000_000
#: The default sizes: the goals' (100 B and 1 KB); 100 KB with --sizes.
DEFAULT_SIZES = (100, 1000)
GROUP_SETTINGS = "session.timeout.ms=2000\nheartbeat.interval.ms=200\nmax.poll.interval.ms=60000\n"
WATCH_STEP_S = 0.01
#: How often a run's threads are read for the CPU split (a thread keeps its last reading).
CPU_SAMPLE_S = 0.2
#: What record mode's defaults were before the throughput work: a row with them shows what the
#: new defaults gained, in the same run, on the same code.
PREVIOUS_DEFAULTS = {"consumer": "fetch.queue.backoff.ms=1000\n",
                     "producer": "max.in.flight.requests.per.connection=1\ndelivery.report.only.error=false\n"}
#: The limits measured before each workload's rows (benchmarks/limit.py's modes).
LIMIT_LABELS = {"produce": "limit: produce only", "consume": "limit: consume only",
                "ingest": "limit: target ingest (raw batches)", "copy": "limit: copy loop (one thread)"}
#: The limits that write to the target: timed there by the watcher, as the mirrors are. Their own
#: window is then longer by the settling time and this spare, so that the watcher's ends first.
WATCHED_LIMITS = ("produce", "copy", "ingest")
WATCHED_LIMIT_SPARE_S = 5.0
#: Rows that goals divide by each other, each chain run back to back in every round: one stream
#: by the copy loop, two streams by one, Spark by two streams; raw mode by the ingest limit.
GOAL_CHAINS = ((COPY, ONE_STREAM, TWO_STREAMS, SPARK_TWO), (INGEST, RAW))
#: Raw mode's goal row (issue: 100 B lz4) again with enough records for its rate to be timed
#: over seconds: of the regular workload, raw mode mirrors a million such records in 0.25 s once
#: they flow, which a watcher's step and a run's start and end move by 10% either way.
RAW_GOAL = (100, 5_000_000, "lz4")
#: Sources whose batches raw mode cannot forward as they are, so that its record path takes them:
#: every batch of a LogAppendTime topic (the target would stamp its own time), and a compacted
#: topic's batches with offset holes (Kafka refuses them in a produce request). Record mode and
#: raw mode over the same records.
#: MirrorMaker 2's dedicated mode on Kafka: one mm2.properties with two flows, source->target and
#: target->source (half the records each way), run by connect-mirror-maker and by Kafka's
#: MirrorMaker 2 with MirrorMaker 2's defaults (the default policy, offset syncs, checkpoints,
#: heartbeats, syncs), tasks.max 1.
DEDICATED = (1000, 200_000, "lz4")
DEDICATED_STEADY = 10_000_000
#: FAILOVER (failover.py): 100 B records over the source topic's partitions (20,000 each).
FAILOVER_RECORDS = 20_000 * PARTITIONS
RECORD_PATH = (100, 1_000_000, "lz4")
RECORD_PATH_SOURCES = {
    "LogAppendTime": {"message.timestamp.type": "LogAppendTime"},
    # Seeded with half as many keys as records, drawn at random: the cleaner keeps records of
    # most batches, so batches with holes run all along the log (Kafka 4's smallest segment).
    "compacted": {"cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.01",
                  "min.compaction.lag.ms": "0"},
}
#: A run that has not mirrored everything by then has failed.
RUN_TIMEOUT_S = 600
#: A tool still running this long after its SIGTERM is killed.
STOP_TIMEOUT_S = 60


def seed(bootstrap: str, topics, size: int, count: int, compression: str, keys: Optional[int] = None) -> None:
    """``keys``: that many keys, drawn at random (a compacted topic then keeps some records of most
    batches); else 1,000 in turn."""
    draw = random.Random(7)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1000000,
                         "batch.num.messages": 100000, "queue.buffering.max.messages": 1000000,
                         "queue.buffering.max.kbytes": 2097151, "message.max.bytes": 10000000,
                         "compression.type": compression})
    # JSON-like text with a random tail, so that lz4 has something (but not everything) to compress:
    # SEED_VALUES of them in turn (a batch holds different ones), so that tens of millions of
    # records are seeded at the client's produce rate.
    values = []
    for i in range(min(count, SEED_VALUES)):
        body = f'{{"seq":{i},"user":"u{i % 5000}","tail":"{os.urandom(8).hex()}"}}'.encode()
        values.append((body * (size // len(body) + 1))[:size])
    names = [f"k{i}".encode() for i in range(keys or 1000)]
    produce = producer.produce
    for i in range(count):
        key = names[draw.randrange(keys)] if keys else names[i % 1000]
        while True:
            try:
                produce(topics[i % len(topics)], values[i % len(values)], key)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(600):
        raise SystemExit("seeding did not finish")


def settled_count(bootstrap: str, topic: str, seeded: int, timeout_s: float = 300.0) -> int:
    """The records a compacted ``topic`` holds once its log cleaner is done: read every 2 s until
    the count, below the ``seeded`` one, holds still."""
    def count() -> int:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{time.time_ns()}",
                             "enable.partition.eof": True})
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        seen, at_end = 0, set()
        while len(at_end) < PARTITIONS:
            for msg in consumer.consume(10000, 1.0):
                if msg.error() is None:
                    seen += 1
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
        consumer.close()
        return seen

    deadline = time.monotonic() + timeout_s
    previous = count()
    while time.monotonic() < deadline:
        time.sleep(2)
        now = count()
        if now == previous < seeded:
            return now
        previous = now
    raise SystemExit(f"{topic}: the log cleaner did not settle in {timeout_s:.0f} s")


def tree_cpu(root_pid: int) -> Tuple[float, float]:
    """CPU seconds of a process and all its descendants so far (a Spark run's JVM and workers),
    and of the JVMs among them: what Spark itself costs, apart from the streams' Python work."""
    usage = tree_usage(root_pid)
    return (sum(cpu for _rss, cpu in usage.values()),
            sum(cpu for pid, (_rss, cpu) in usage.items() if _command(pid) == "java"))


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return ""


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


def peak_rss(pid: int) -> int:
    """The peak resident bytes so far (VmHWM) of the process or of the largest of its
    descendants (a peer may run its work in a child), 0 once it is gone.

    Not wait4's ru_maxrss: a child forked from this process starts its high-water mark at this
    process's RSS (Linux carries it over the exec), so after seeding a backlog here every child
    reported the same 197-206 MB whatever it used."""
    peak = 0
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) * 1024
                    break
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            for child in children.read().split():
                peak = max(peak, peak_rss(int(child)))
    except (OSError, ValueError):
        pass
    return peak


def measure(command, log_path: Path, env=None, whole_tree: bool = False,
            watch: Optional[Callable[[], Optional[int]]] = None, expected: int = 0,
            cpu: Optional[CpuSplit] = None, window: Optional[Tuple[float, float]] = None) -> dict:
    """Run ``command`` as a child: CPU from wait4, its peak RSS from its VmHWM read at every step
    (or, ``whole_tree``, both sampled over the process tree every 0.5 s), and the time it took.

    With ``watch`` (the records on the target now), the run is timed until ``expected`` records
    are there; the child then gets SIGTERM, and the first record's arrival and the stop are timed
    too. With a ``window`` (settle, length) as well, it ends ``settle + length`` seconds after the
    first record (or at ``expected``, the backlog mirrored, if sooner): its steady rate is the
    records that arrived over the window, after the settling seconds. Without it, the child is timed until it exits by itself. ``cpu``: where the machine's CPU
    went while records flowed (from the first record on the target to the last), or without a
    watcher over the child's whole life.
    """
    if cpu is not None:
        cpu.start()
    started = time.monotonic()
    peak_tree, peak_own, cpu_seen, sample_at, threads_at = 0, 0, {}, 0.0, 0.0
    first = done = stop_sent = None
    first_count = 0
    window_cpu: List[Tuple[float, float]] = []  # tree_cpu at the window's start and end
    marks: List[Tuple[float, int]] = []  # (seconds since start, records on the target) once flowing
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT),
                                   env={**os.environ, **(env or {})}, preexec_fn=die_with_parent())
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            now = time.monotonic()
            peak_own = max(peak_own, peak_rss(process.pid))
            if cpu is not None and now >= threads_at:
                threads_at = now + CPU_SAMPLE_S
                cpu.sample(process.pid)
            if whole_tree and now >= sample_at:
                sample_at = now + 0.5
                sample = tree_usage(process.pid)
                peak_tree = max(peak_tree, sum(rss for rss, _cpu in sample.values()))
                cpu_seen.update({p: used for p, (_rss, used) in sample.items()})
            if watch is not None and stop_sent is None:
                on_target = watch() or 0
                if first is None and on_target > 0:
                    first, first_count = now - started, on_target
                    if cpu is not None:
                        cpu.restart(process.pid)
                if first is not None:
                    marks.append((now - started, on_target))
                    if window is not None and not window_cpu and now - started >= first + window[0]:
                        window_cpu.append(tree_cpu(process.pid))
                window_over = window is not None and first is not None and now - started >= first + sum(window)
                if window_over:
                    if window_cpu:
                        window_cpu.append(tree_cpu(process.pid))
                    done = now - started
                    if cpu is not None:
                        cpu.stop(process.pid)
                    stop_sent = time.monotonic()
                    os.kill(process.pid, signal.SIGTERM)
                elif on_target >= expected or now - started > RUN_TIMEOUT_S:
                    done = now - started if on_target >= expected else None
                    if cpu is not None and done is not None:
                        cpu.stop(process.pid)
                    stop_sent = time.monotonic()
                    os.kill(process.pid, signal.SIGTERM)  # not send_signal: it would reap the child
            elif stop_sent is not None and now - stop_sent > STOP_TIMEOUT_S:
                process.kill()  # a tool that does not stop on SIGTERM (seen: MirrorMaker 2 after a failed start)
            elif watch is None and now - started > RUN_TIMEOUT_S:
                process.kill()
            time.sleep(WATCH_STEP_S if watch is not None else 0.05)  # the stop is timed to a step too
        if watch is not None and stop_sent is None and (watch() or 0) >= expected:
            done = time.monotonic() - started  # a tool that stops by itself after its count
    ended = time.monotonic()
    cpu_seconds = usage.ru_utime + usage.ru_stime
    if whole_tree:
        cpu_seconds = max(cpu_seconds, sum(cpu_seen.values()))
    if cpu is not None and watch is None:
        cpu.stop(process.pid, exited_cpu=cpu_seconds)
    result = {"exit": os.waitstatus_to_exitcode(status), "cpu_seconds": cpu_seconds,
              "peak_rss_mb": (peak_tree if whole_tree else peak_own or usage.ru_maxrss * 1024) / 2**20, "log": log_path}
    split = cpu.result() if cpu is not None else None
    if split is not None:
        result["cpu_split"] = split
    if watch is not None:
        result.update(seconds=done if done is not None else float("nan"), first_record_s=first,
                      stop_s=ended - stop_sent if stop_sent else None, mirrored=done is not None)
        if window is not None and marks:
            result.update(steady_rate(marks, first + window[0]), records_done=marks[-1][1])
            if len(window_cpu) == 2 and result.get("steady_window_s"):
                result["steady_cpu_seconds"] = window_cpu[1][0] - window_cpu[0][0]
                result["steady_jvm_cpu_seconds"] = window_cpu[1][1] - window_cpu[0][1]
        elif done is not None and first is not None and done > first:
            # The rate once records flow (start-up excluded), as the limits' own loops are timed.
            result["records_per_s_after_first"] = (expected - first_count) / (done - first)
    else:
        result.update(seconds=ended - started)
    return result


def steady_rate(marks: List[Tuple[float, int]], from_s: float) -> dict:
    """The records that arrived from ``from_s`` to the last mark, over that time (the watcher's
    marks: seconds since the start, records on the target)."""
    start = next((mark for mark in marks if mark[0] >= from_s), marks[-1])
    end = marks[-1]
    if end[0] <= start[0]:
        return {}
    return {"steady_records_per_s": (end[1] - start[1]) / (end[0] - start[0]), "steady_window_s": end[0] - start[0]}


def properties(work: Path, tag: str, source: str, target: str, compression: str,
               consumer: str = "", producer: str = ""):
    """The consumer and producer files every mirror of a run shares (Kafka's tools too)."""
    consumer_file = work / f"{tag}-consumer.properties"
    consumer_file.write_text(f"bootstrap.servers={source}\ngroup.id={tag}-{time.time_ns()}\n"
                             f"auto.offset.reset=earliest\n{GROUP_SETTINGS}{consumer}")
    producer_file = work / f"{tag}-producer.properties"
    producer_file.write_text(f"bootstrap.servers={target}\ncompression.type={compression}\n"
                             f"max.request.size=10000000\n{producer}")
    return consumer_file, producer_file


def round_order(rows: List[tuple], i: int) -> List[tuple]:
    """Round ``i``'s order of ``rows`` (label, run): shuffled (seeded, so a rerun repeats it), so
    that no row always follows the same one (the previous row's load, its deleted target files) or
    always runs first; but the rows a goal divides by each other (GOAL_CHAINS) back to back, forward
    in even rounds and backward in odd ones, so that a round's ratio compares runs a minute apart
    rather than most of a round apart (the machine drifts more in that time than a goal's margin)."""
    by_label = dict(rows)
    units, chained = [], set()
    for chain in GOAL_CHAINS:
        members = [label for label in chain if label in by_label]
        if len(members) > 1:
            units.append(members if i % 2 == 0 else members[::-1])
            chained.update(members)
    units += [[label] for label, _run in rows if label not in chained]
    random.Random(i).shuffle(units)
    return [(label, by_label[label]) for unit in units for label in unit]


def spark_startup_s(log: Path) -> float:
    """Seconds from the mirror's first log line to the first Spark worker running (the cold start
    of the JVM, the SparkContext and pyspark's worker daemon)."""
    stamps = re.findall(r"^\[([\d-]+ [\d:]+,\d+)\] INFO (Starting mirror maker|Spark worker \d+ started)",
                        log.read_text(errors="replace"), re.M)
    if len(stamps) < 2:
        return float("nan")
    parse = lambda text: datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")  # noqa: E731
    return (parse(stamps[1][0]) - parse(stamps[0][0])).total_seconds()


def joined_and_caught_up(log: Path, records: int) -> dict:
    """Where there is no watcher (Tansu), from the mirror's own INFO lines: seconds from its first
    line to its first assignment (the group join), and the records over the time from then until
    it saw every partition at its end."""
    text = log.read_text(errors="replace")
    stamps = []
    for line in (r"INFO Starting mirror maker", r"INFO \[[^\]]+\] Assigned ", r"INFO Every assigned partition is at"):
        found = re.search(rf"^\[([\d-]+ [\d:]+,\d+)\] {line}", text, re.M)
        if found is None:
            return {}
        stamps.append(datetime.datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f"))
    start, assigned, end = stamps
    if end <= assigned:
        return {}
    return {"joined_s": (assigned - start).total_seconds(),
            "records_per_s_after_join": records / (end - assigned).total_seconds()}


def caught_up_count(log: Path) -> int:
    match = re.search(r"Caught up: (\d+) records", log.read_text(errors="replace"))
    return int(match.group(1)) if match else -1


def split_with_brokers(brokers: Brokers) -> CpuSplit:
    """A run's CPU split with both brokers' processes accounted for."""
    return CpuSplit({"source_broker": _broker_pid(brokers.source), "target_broker": _broker_pid(brokers.target)})


def _broker_pid(broker) -> int:
    """The broker's process: Tansu's own, or a one-node Kafka cluster's JVM."""
    nodes = getattr(broker, "nodes", None)
    return broker.process.pid if nodes is None else next(iter(nodes.values())).process.pid


def summarize(samples, records: int, size: int) -> dict:
    """The median run of a row. Steady runs (a window once records flow): records/s is the steady
    rate, with its spread over the runs and the shortest window; end to end is what the run
    mirrored over its whole time, start-up included; CPU s/GB over what it mirrored."""
    good = [s for s in samples if s["ok"]] or samples
    if all(s.get("steady_records_per_s") for s in good):
        return _summarize_steady(samples, good, size)
    seconds = statistics.median(s["seconds"] for s in good)
    cpu = statistics.median(s["cpu_seconds"] for s in good)
    gigabytes = records * size / 1e9
    summary = {"records_per_s": round(records / seconds) if seconds == seconds else 0,
               "mb_per_s": round(records * size / seconds / 1e6, 1) if seconds == seconds else 0,
               "seconds": round(seconds, 2), "cpu_s_per_gb": round(cpu / gigabytes, 1),
               "peak_rss_mb": round(statistics.median(s["peak_rss_mb"] for s in good), 1),
               "runs": len(samples), "ok": all(s["ok"] for s in samples)}
    for key in ("first_record_s", "stop_s", "startup_s", "joined_s"):
        values = [s[key] for s in good if s.get(key) is not None]
        if values:
            summary[key] = round(statistics.median(values), 2)
    after_first = [s["records_per_s_after_first"] for s in good if s.get("records_per_s_after_first")]
    if after_first:
        summary["records_per_s_after_first"] = round(statistics.median(after_first))
    after_join = [s["records_per_s_after_join"] for s in good if s.get("records_per_s_after_join")]
    if after_join:
        summary["records_per_s_after_join"] = round(statistics.median(after_join))
    if "startup_s" in summary:
        summary["records_per_s_after_start"] = round(records / max(seconds - summary["startup_s"], 1e-9))
    split = [s for s in good if s.get("cpu_split")]
    if split:  # the run nearest the median's time, whole: a split's parts add up only within one run
        nearest = min(split, key=lambda s: abs(s["seconds"] - seconds))
        summary["cpu_split"] = {key: round(value, 2) for key, value in nearest["cpu_split"].items()}
    return summary


def _summarize_steady(samples, good, size: int) -> dict:
    rates = [s["steady_records_per_s"] for s in good]
    rate = statistics.median(rates)
    done = [max(s.get("records_done", 0), 1) for s in good]
    summary = {"records_per_s": round(rate), "mb_per_s": round(rate * size / 1e6, 1),
               "spread": [round(min(rates)), round(max(rates))],
               # Each run's rate in run order (None: it failed): round i of two rows ran minutes
               # apart, so their ratios pair runs under the same stretch of the machine.
               "run_records_per_s": [round(s["steady_records_per_s"]) if s in good else None for s in samples],
               "window_s": round(min(s["steady_window_s"] for s in good), 1),
               "end_to_end_records_per_s": round(statistics.median(d / s["seconds"] for d, s in zip(done, good))),
               "seconds": round(statistics.median(s["seconds"] for s in good), 2),
               "cpu_s_per_gb": round(statistics.median(s["cpu_seconds"] / (d * size / 1e9) for d, s in zip(done, good)),
                                     1),
               "peak_rss_mb": round(statistics.median(s["peak_rss_mb"] for s in good), 1),
               "runs": len(samples), "ok": all(s["ok"] for s in samples)}
    steady_cpu = [s["steady_cpu_seconds"] / (s["steady_records_per_s"] * s["steady_window_s"] * size / 1e9)
                  for s in good if s.get("steady_cpu_seconds") is not None]
    if steady_cpu:  # over the window only: start-up's CPU (a JVM's above all) is start-up's, reported apart
        summary["steady_cpu_s_per_gb"] = round(statistics.median(steady_cpu), 1)
    jvm = [s["steady_jvm_cpu_seconds"] / s["steady_cpu_seconds"] for s in good
           if s.get("steady_jvm_cpu_seconds") and s.get("steady_cpu_seconds")]
    if jvm:  # the JVMs' share of the window's CPU: Spark's own cost (all of a Java tool's)
        summary["steady_jvm_cpu_share"] = round(statistics.median(jvm), 3)
    for key in ("first_record_s", "stop_s", "startup_s"):
        values = [s[key] for s in good if s.get(key) is not None]
        if values:
            summary[key] = round(statistics.median(values), 2)
    split = [s for s in good if s.get("cpu_split")]
    if split:  # the run nearest the median's rate, whole: a split's parts add up only within one run
        nearest = min(split, key=lambda s: abs(s["steady_records_per_s"] - rate))
        summary["cpu_split"] = {key: round(value, 2) for key, value in nearest["cpu_split"].items()}
    return summary


def byte_compile(root: Path) -> None:
    """Compile the package as ``pip install`` does. Where PYTHONDONTWRITEBYTECODE is set (this
    machine sets it), every start of the mirror compiled it again: 0.15 s of each run's start-up
    that no installed mirror pays."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "mirror_maker")], check=True)


class Bench:
    def __init__(self, args, work: Path) -> None:
        self.args, self.work = args, work
        self.results: Dict[str, dict] = {}
        self.baseline = None
        byte_compile(ROOT)
        if args.baseline:
            self.baseline = work / "baseline"
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(self.baseline), args.baseline],
                           cwd=ROOT, check=True)
            byte_compile(self.baseline)

    def _steady(self, brokers: Brokers) -> bool:
        """Runs on this broker kind are timed over a window once records flow (a watcher reads the
        target's end offsets; Tansu's are wrong, so its runs are timed by the mirror's own lines)."""
        return self.args.window > 0 and brokers.kind == "kafka"

    def _window(self, brokers: Brokers) -> Optional[Tuple[float, float]]:
        return (self.args.settle, self.args.window) if self._steady(brokers) else None

    def close(self) -> None:
        if self.baseline is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(self.baseline)], cwd=ROOT)

    # -- one broker kind -----------------------------------------------------------------

    def run_kind(self, kind: str, workloads) -> None:
        print(f"\n#### {kind}", flush=True)
        section = self.results.setdefault(kind, {"workloads": []})
        with KINDS[kind](self.work / kind) as brokers:
            for size, count in workloads:
                for compression in self.args.compressions.split(","):
                    section["workloads"].append(self.workload(brokers, size, self.backlog(brokers, size, compression,
                                                                                          count), compression,
                                                              limits=self.args.limits))
            if kind == "kafka" and self.args.pinned:
                section["pinned"] = self.pinned(brokers)
            if kind == "kafka" and self.args.raw_goal:
                section["raw_goal"] = self.raw_goal(brokers)
            if kind == "kafka" and self.args.record_path:
                section["record_path"] = self.record_path(brokers)
            if kind == "kafka" and self.args.dedicated:
                section["dedicated"] = self.dedicated(brokers)
            if kind == "kafka" and self.args.failover:
                print(f"\n== {kind}: consumer failover, ours against Kafka's MirrorMaker 2", flush=True)
                section["failover"] = failover(brokers, self.work, ROOT, seed, brokers.create_topic, tree_cpu,
                                               FAILOVER_RECORDS // 10 if self.args.quick else FAILOVER_RECORDS)

    def backlog(self, brokers: Brokers, size: int, compression: str, count: int) -> int:
        """The records a workload seeds: enough for a whole window on Kafka, what Tansu holds."""
        if self.args.count is not None:
            return self.args.count
        if self._steady(brokers):
            backlog = STEADY_BACKLOG.get((size, compression), count)
        elif brokers.kind == "tansu" and self.args.window > 0:
            backlog = TANSU_BACKLOG.get(size, count)
        else:
            return count  # the workload's own (a tenth of it already with --quick)
        return backlog // 10 if self.args.quick else backlog

    def rows(self, kind: str, streams_list) -> List[tuple]:
        """(label, run function) of every measured tool on this broker kind."""
        steady = self.args.window > 0
        # A steady run of exactly-once commits every second, as a user who wants its records
        # visible soon would; a count-timed one as soon as every partition is read to its end.
        eos = ("--exactly.once", "--offset.commit.interval.ms", "1000") if steady else \
            ("--exactly.once", "--exit.when.caught.up")
        rows = [(f"mirror, --num.streams {n}", self._ours(n)) for n in streams_list]
        rows.append(("mirror --use.raw.bytes, --num.streams 1", self._ours(1, extra=("--use.raw.bytes",))))
        if kind == "kafka":  # Tansu's read_committed serves aborted records: no exactly-once there
            rows.append(("mirror --exactly.once, --num.streams 1", self._ours(1, extra=eos)))
        if self.baseline is not None:  # each mode before -> after, in the same run
            at = self.args.baseline
            rows.append((f"mirror at {at}, --num.streams 1", self._ours(1, root=self.baseline)))
            rows.append((f"mirror --use.raw.bytes at {at}, --num.streams 1",
                         self._ours(1, extra=("--use.raw.bytes",), root=self.baseline)))
            if kind == "kafka":
                rows.append((f"mirror --exactly.once at {at}, --num.streams 1", self._ours(1, extra=eos,
                                                                                           root=self.baseline)))
        if kind == "kafka" and self.args.all_rows:
            # What offset syncs cost (consumer failover): the same mapping with and without them.
            keep = ("--message.handler", "mirror_maker.handlers.PartitionPreservingHandler")
            rows.append(("mirror, partition kept, --num.streams 1", self._ours(1, extra=keep)))
            rows.append(("mirror, partition kept, offset syncs, --num.streams 1",
                         self._ours(1, extra=keep + ("--emit.offset-syncs.enabled", "true"))))
            rows.append(("mirror --use.raw.bytes, offset syncs, --num.streams 1",
                         self._ours(1, extra=("--use.raw.bytes", "--emit.offset-syncs.enabled", "true"))))
        if self.args.all_rows:
            rows.append(("mirror, --num.streams 1, previous defaults",
                         self._ours(1, consumer=PREVIOUS_DEFAULTS["consumer"], producer=PREVIOUS_DEFAULTS["producer"])))
        rows += [(f"mirror --spark, --num.streams {n}", self._ours(n, spark=True)) for n in self.args.spark_streams]
        if kind == "kafka":
            rows += [(f"Kafka MirrorMaker v1, --num.streams {n}", self._mm1(n)) for n in self.args.peer_streams]
            rows += [(f"Kafka MirrorMaker 2, tasks.max {n}", self._mm2(n)) for n in self.args.peer_streams]
            rows.append(("Kafka MirrorMaker 2 exactly-once, tasks.max 1", self._mm2(1, exactly_once=True)))
        if kind == "tansu" or self.args.all_rows:  # on Kafka the copy loop limit is the same loop
            rows.append(("peer: confluent loop", self._python_peer("confluent_loop")))
        if kind == "tansu" and self.args.peers_python:
            rows.append(("peer: quix replicator", self._python_peer("quix_replicator")))
        if self.args.only:
            rows = [row for row in rows if re.search(self.args.only, row[0])]
        return rows

    def workload(self, brokers: Brokers, size: int, count: int, compression: str, limits=tuple(LIMIT_LABELS),
                 rows: Optional[List[tuple]] = None, topic: Optional[str] = None) -> dict:
        """One workload: seed, the ``limits`` (limit.py's modes), then the ``rows`` (label, run),
        by default every row of this broker kind."""
        name = f"{size} B x {count:,} ({compression})"
        print(f"\n== {brokers.kind}: {name}", flush=True)
        row = {"record_bytes": size, "records": count, "compression": compression, "results": {}}
        topic = topic or f"w{size}{compression}"
        brokers.create_topic(brokers.source.bootstrap, topic)
        seed(brokers.source.bootstrap, [topic], size, count, compression)
        rows = self.rows(brokers.kind, self.args.streams) if rows is None else rows
        # The limits run in the rounds too: each is a row's yardstick (the copy loop the streams',
        # the ingest limit raw mode's), and the machine's drift must fall on both alike. The copy
        # loop first: the warm-up run is the first row's, and it reads the source as the mirrors do.
        rows = ((self._copy_rows(size, self.args.streams) if "copy" in limits else [])
                + [(LIMIT_LABELS[mode], self._limit_run(mode, size)) for mode in limits if mode != "copy"] + rows)
        row["results"].update(self._run_rows(brokers, topic, compression, count, size, rows))
        brokers.delete_topic(brokers.source.bootstrap, topic)  # tens of GB with the steady backlogs
        return row

    def _run_rows(self, brokers: Brokers, topic: str, compression: str, count: int, size: int,
                  rows: List[tuple]) -> Dict[str, dict]:
        results = {}
        if rows and self.args.warmup:  # the first run after seeding is slower for every tool: not measured
            rows[0][1](brokers, topic, compression, count, f"{brokers.kind}-warmup")
        # In rounds (run i of every row, then run i + 1), so that a slower stretch of the machine
        # falls on every row alike rather than on the rows that ran during it; each round in its
        # own order (round_order).
        runs: Dict[str, list] = {label: [] for label, _run in rows}
        for i in range(self.args.runs):
            order = round_order(rows, i)
            print(f"-- round {i + 1}: " + "; ".join(label for label, _run in order), flush=True)
            for label, run in order:
                runs[label].append(run(brokers, topic, compression, count,
                                       f"{brokers.kind}-{re.sub(r'[^a-z0-9]+', '-', label.lower())}-{i}"))
        for label, _run in rows:
            results[label] = summarize(runs[label], count, size)
            self._print(label, results[label])
        return results

    def pinned(self, brokers: Brokers) -> dict:
        """How streams scale where the mirror has a core of its own: both brokers pinned to core 0,
        the copy loop and the mirror (1, 2, 4 streams) to core 1; 100 B, no compression."""
        size, compression = 100, "none"
        count = self.backlog(brokers, size, compression, 1_000_000)
        pids = [_broker_pid(brokers.source), _broker_pid(brokers.target)]
        core = ["taskset", "-c", "1"]
        for pid in pids:
            subprocess.run(["taskset", "-a", "-p", "-c", "0", str(pid)], check=True, capture_output=True)
        try:
            print(f"\n== {brokers.kind}: brokers on core 0, the tool on core 1", flush=True)
            topic = "pinned"
            brokers.create_topic(brokers.source.bootstrap, topic)
            seed(brokers.source.bootstrap, [topic], size, count, compression)
            row = {"record_bytes": size, "records": count, "compression": compression, "results": {}}
            rows = self._copy_rows(size, (1, 2, 4), prefix=core)
            rows += [(f"mirror, --num.streams {n}", self._ours(n, prefix=core)) for n in (1, 2, 4)]
            row["results"].update(self._run_rows(brokers, topic, compression, count, size, rows))
            brokers.delete_topic(brokers.source.bootstrap, topic)
            return row
        finally:
            for pid in pids:
                subprocess.run(["taskset", "-a", "-p", "-c", f"0-{os.cpu_count() - 1}", str(pid)], capture_output=True)

    def raw_goal(self, brokers: Brokers) -> dict:
        """RAW_GOAL: the target's ingest limit, record mode and raw mode, nothing else."""
        size, count, compression = RAW_GOAL
        rows = [("mirror, --num.streams 1", self._ours(1)),
                ("mirror --use.raw.bytes, --num.streams 1", self._ours(1, extra=("--use.raw.bytes",)))]
        return self.workload(brokers, size, count // 10 if self.args.quick else count, compression,
                             limits=("ingest",), rows=rows, topic=f"raw-goal-{size}{compression}")

    def record_path(self, brokers: Brokers) -> List[dict]:
        """RECORD_PATH_SOURCES: record mode and raw mode where raw mode's record path takes the
        batches. A compacted topic is mirrored once its cleaner is done (the records it kept)."""
        size, count, compression = RECORD_PATH  # all of them even with --quick: fewer fill no segment to clean
        rows = [("mirror, --num.streams 1", self._ours(1)),
                ("mirror --use.raw.bytes, --num.streams 1", self._ours(1, extra=("--use.raw.bytes",)))]
        if self.baseline is not None and (self.baseline / "mirror_maker" / "shallow").is_dir():
            rows.append((f"mirror --use.raw.bytes at {self.args.baseline}, --num.streams 1",
                         self._ours(1, extra=("--use.raw.bytes",), root=self.baseline)))
        out = []
        for source, config in RECORD_PATH_SOURCES.items():
            print(f"\n== {brokers.kind}: {size} B x {count:,} ({compression}), {source} source", flush=True)
            topic = f"record-path-{source.lower()}"
            compacted = config.get("cleanup.policy") == "compact"
            brokers.create_topic(brokers.source.bootstrap, topic, config=config)
            seed(brokers.source.bootstrap, [topic], size, count, compression, keys=count // 2 if compacted else None)
            kept = settled_count(brokers.source.bootstrap, topic, count) if compacted else count
            out.append({"source": source, "record_bytes": size, "seeded": count, "records": kept,
                        "compression": compression,
                        "results": self._run_rows(brokers, topic, compression, kept, size, rows)})
        return out

    def dedicated(self, brokers: Brokers) -> dict:
        """DEDICATED: the same two-flow mm2.properties, ours against Kafka's MirrorMaker 2."""
        size, count, compression = DEDICATED
        if self._steady(brokers):  # ours mirrors this in 30 s or more: a whole window
            count = DEDICATED_STEADY
        half = (count // 10 if self.args.quick else count) // 2
        print(f"\n== {brokers.kind}: {size} B x {2 * half:,} ({compression}), one mm2.properties, two flows", flush=True)
        for cluster, topic in ((brokers.source, "dedicated-s"), (brokers.target, "dedicated-t")):
            brokers.create_topic(cluster.bootstrap, topic)
            seed(cluster.bootstrap, [topic], size, half, compression)
        rows = [("connect-mirror-maker, 2 flows, tasks.max 1", self._dedicated(ours=True)),
                ("Kafka MirrorMaker 2, 2 flows, tasks.max 1", self._dedicated(ours=False))]
        results = {}
        for label, run in rows:
            tag = f"{brokers.kind}-dedicated-{'ours' if label.startswith('connect') else 'mm2'}"
            results[label] = summarize([run(brokers, compression, 2 * half, f"{tag}-{i}") for i in range(self.args.runs)],
                                       2 * half, size)
            self._print(label, results[label])
        return {"record_bytes": size, "records": 2 * half, "compression": compression, "results": results}

    def _dedicated(self, ours: bool):
        from tests.brokers.java_mirror_makers import mirror_maker_2

        def run(brokers, compression, count, tag):
            # New aliases each run: new consumer groups for ours, new Connect offsets for MirrorMaker 2.
            run_id = time.time_ns()
            a, b = f"S{run_id}", f"T{run_id}"
            props = {"clusters": f"{a}, {b}", f"{a}.bootstrap.servers": brokers.source.bootstrap,
                     f"{b}.bootstrap.servers": brokers.target.bootstrap, f"{a}->{b}.enabled": "true",
                     f"{b}->{a}.enabled": "true", f"{a}->{b}.topics": "dedicated-s", f"{b}->{a}.topics": "dedicated-t",
                     "tasks.max": 1, "status.interval.ms": 0}
            for alias in (a, b):
                props.update({f"{alias}.producer.compression.type": compression,
                              f"{alias}.producer.max.request.size": 10000000})
            for internal in ("replication", "offset-syncs.topic.replication", "checkpoints.topic.replication",
                             "heartbeats.topic.replication", "offset.storage.replication",
                             "status.storage.replication", "config.storage.replication"):
                props[f"{internal}.factor"] = 1
            command = mirror_maker_2(props, self.work / tag)  # writes the file both tools read
            if ours:
                command = [sys.executable, str(ROOT / "bin" / "connect-mirror-maker.py"),
                           str(self.work / tag / "mm2.properties"), "--log.level", "WARN"]
            quiet = logging.getLogger("bench.watcher")  # its clients outlive the brokers: no lines then
            quiet.propagate = False
            remote = [(AdminClient({"bootstrap.servers": brokers.target.bootstrap, "logger": quiet}), f"{a}.dedicated-s"),
                      (AdminClient({"bootstrap.servers": brokers.source.bootstrap, "logger": quiet}), f"{b}.dedicated-t")]

            def on_targets() -> Optional[int]:
                total = 0
                for admin, topic in remote:
                    latest = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
                    try:
                        answers = admin.list_offsets(latest, request_timeout=5)
                        total += sum(max(answer.result().offset, 0) for answer in answers.values())
                    except KafkaException:  # not created yet
                        pass
                return total
            sample = measure(command, self.work / f"{tag}.log", watch=on_targets, expected=count,
                             cpu=split_with_brokers(brokers), window=self._window(brokers))
            sample["ok"] = sample["mirrored"] and sample["exit"] in (0, 143, -signal.SIGTERM)
            return sample
        return run

    @staticmethod
    def _print(label: str, r: dict) -> None:
        extra = ""
        if "first_record_s" in r:
            extra = f"  first record {r['first_record_s']} s, stop {r.get('stop_s')} s"
        elif "joined_s" in r:
            extra = f"  group joined {r['joined_s']} s, {r.get('records_per_s_after_join', 0):,} rec/s after it"
        print(f"  {label:<40} {r['records_per_s']:>9,} rec/s {r['mb_per_s']:>7} MB/s "
              f"{r['cpu_s_per_gb']:>6} CPU s/GB {r['peak_rss_mb']:>7} MB RSS{extra}"
              f"{'' if r['ok'] else '  (FAILED)'}", flush=True)

    # -- what is measured ------------------------------------------------------------------

    def _copy_rows(self, size: int, streams, prefix=()) -> List[tuple]:
        """The copy loop in one thread and in as many as each row of more streams (``--threads``)."""
        return [(copy_label(n), self._limit_run("copy", size, prefix=prefix, threads=n))
                for n in sorted({1, *streams})]

    def _limit_run(self, mode, size, prefix=(), threads=1):
        """limit.py's ``mode`` as a row's run (produce only: into a new topic of its own)."""
        def run(brokers, topic, compression, count, tag):
            broker, name = brokers.source, topic
            if mode == "produce":
                broker, name = brokers.target, f"limit-{size}-{compression}-{time.time_ns()}"
                brokers.create_topic(broker.bootstrap, name)
            elif mode in ("ingest", "copy"):
                brokers.fresh_target(name)
            command = [*prefix, sys.executable, str(HERE / "limit.py"), mode, broker.bootstrap, name, str(count),
                       str(size), "--compression", compression, "--target", brokers.target.bootstrap,
                       "--threads", str(threads)]
            # The limits that write to the target are timed there, as the mirrors are (the same
            # watcher's load on the machine and the target); their own window is a bound only.
            watched = self._steady(brokers) and mode in WATCHED_LIMITS
            if self._steady(brokers):
                spare = self.args.settle + WATCHED_LIMIT_SPARE_S if watched else 0
                command += ["--seconds", str(self.args.window + spare), "--settle", str(self.args.settle)]
            sample = measure(command, self.work / f"{tag}.log", cpu=split_with_brokers(brokers),
                             watch=(lambda: brokers.end_offsets(name)) if watched else None, expected=count,
                             window=self._window(brokers) if watched else None)
            lines = sample["log"].read_text(errors="replace").strip().splitlines()
            # Its one JSON line (kafka-python may write "Exception ignored" lines at exit after it).
            found = [line for line in lines if line.startswith("{")]
            if sample["exit"] != 0 or not found:
                raise SystemExit(f"limit {mode} failed (exit {sample['exit']}):\n" + "\n".join(lines[-15:]))
            inner = json.loads(found[-1])
            sample["seconds"] = inner["seconds"]  # the client's own loop, without interpreter start
            if not watched:
                sample.update({key: inner[key] for key in ("steady_records_per_s", "steady_window_s", "records_done")
                               if key in inner})
            if sample.get("cpu_split"):
                sample["cpu_split"].update(thread_shares(inner["running_s"], inner["waiting_s"], inner["seconds"]))
            sample["ok"] = sample["exit"] == 0
            return sample
        return run

    def _timed(self, brokers: Brokers, topic: str, count: int, command, tag: str, *, self_exit: bool,
               whole_tree: bool = False, env=None) -> dict:
        """Run one tool on a fresh target topic, timed as the module docstring says."""
        brokers.fresh_target(topic)
        watch = None if brokers.kind == "tansu" else (lambda: brokers.end_offsets(topic))
        sample = measure(command, self.work / f"{tag}.log", env=env, whole_tree=whole_tree,
                         watch=watch, expected=count, cpu=None if whole_tree else split_with_brokers(brokers),
                         window=self._window(brokers))
        if watch is not None:  # a peer without a SIGTERM handler ends with -15 after its work is done
            sample["ok"] = sample["mirrored"] and sample["exit"] in (0, 143, -signal.SIGTERM)
        else:
            sample["ok"] = sample["exit"] == 0 and (not self_exit or caught_up_count(sample["log"]) == count)
        if not sample["ok"]:
            print(f"    {tag}: exit {sample['exit']}, see its log:\n"
                  + "".join(sample["log"].read_text(errors="replace").splitlines(True)[-5:]), flush=True)
        return sample

    def _ours(self, streams: int, spark: bool = False, extra=(), consumer: str = "", producer: str = "",
              root: Path = ROOT, prefix=()):
        """Our mirror (``root``: a checkout of another commit, for a before -> after row; ``prefix``:
        what runs it, e.g. taskset)."""
        def run(brokers, topic, compression, count, tag):
            consumer_file, producer_file = properties(self.work, tag, brokers.source.bootstrap,
                                                      brokers.target.bootstrap, compression, consumer, producer)
            command = [*prefix, sys.executable, str(root / "bin" / "kafka-mirror-maker.py"), "--consumer.config",
                       str(consumer_file), "--producer.config", str(producer_file), "--include", topic,
                       "--num.streams", str(streams), "--status.interval.ms", "0",
                       "--log.level", "INFO" if spark or brokers.kind == "tansu" else "WARN", *extra]
            if spark:
                command.append("--spark")
            if brokers.kind == "tansu":
                command.append("--exit.when.caught.up")
            sample = self._timed(brokers, topic, count, command, tag, self_exit=brokers.kind == "tansu",
                                 whole_tree=spark)
            if spark:
                sample["startup_s"] = spark_startup_s(sample["log"])
            elif brokers.kind == "tansu" and sample["ok"]:
                sample.update(joined_and_caught_up(sample["log"], count))
            return sample
        return run

    def _mm1(self, streams: int):
        from tests.brokers.java_mirror_makers import mirror_maker_v1

        def run(brokers, topic, compression, count, tag):
            consumer_file, producer_file = properties(self.work, tag, brokers.source.bootstrap,
                                                      brokers.target.bootstrap, compression)
            command = mirror_maker_v1(["--consumer.config", str(consumer_file), "--producer.config",
                                       str(producer_file), "--include", topic, "--num.streams", str(streams)],
                                      self.work / tag)
            return self._timed(brokers, topic, count, command, tag, self_exit=False)
        return run

    def _mm2(self, tasks: int, exactly_once: bool = False):
        """MirrorMaker 2 in dedicated mode; ``exactly_once``: Connect's exactly-once source support
        (3.5+: transactions on the target, a transaction per poll, the internal REST it needs)."""
        from mirror_maker.embedded import free_port
        from tests.brokers.java_mirror_makers import mirror_maker_2, mirror_maker_2_properties

        def run(brokers, topic, compression, count, tag):
            # The same producer settings as the other tools' producer.properties, for the target; new
            # aliases each run, so Connect does not resume from the previous run's stored offsets.
            run_id = time.time_ns()
            source, target = f"S{run_id}", f"T{run_id}"
            extra = {f"{target}.producer.compression.type": compression,
                     f"{target}.producer.max.request.size": 10000000}
            if exactly_once:
                extra.update({f"{target}.exactly.once.source.support": "enabled",
                              f"{source}.consumer.isolation.level": "read_committed",
                              "dedicated.mode.enable.internal.rest": "true",
                              "listeners": f"http://127.0.0.1:{free_port()}"})
            props = mirror_maker_2_properties(brokers.source.bootstrap, brokers.target.bootstrap, topic, tasks,
                                              extra, aliases=(source, target))
            command = mirror_maker_2(props, self.work / tag)
            return self._timed(brokers, topic, count, command, tag, self_exit=False)
        return run

    def _python_peer(self, peer: str):
        python = self.args.peers_python if peer == "quix_replicator" else sys.executable

        def run(brokers, topic, compression, count, tag):
            command = [python, str(HERE / "peers" / f"{peer}.py"), brokers.source.bootstrap,
                       brokers.target.bootstrap, topic, str(count), "--compression", compression]
            return self._timed(brokers, topic, count, command, tag, self_exit=False)
        return run

    # -- growth and profile ----------------------------------------------------------------

    def growth(self, kind: str) -> None:
        print(f"\n== cost growth on {kind} (1 KB records, one run each)", flush=True)
        size, out = 1000, self.results[kind].setdefault("growth", [])
        cases = [("partitions", n, 1, n, 40_000) for n in (8, 64, 512)]
        cases += [("topics", n, n, 1, 40_000) for n in (1, 100, 1000)]
        for axis, value, topics, partitions, count in cases:
            with KINDS[kind](self.work / f"growth-{axis}-{value}") as brokers:
                names = [f"g{axis[0]}{value}-{i}" for i in range(topics)]
                for start in range(0, len(names), 200):
                    from confluent_kafka.admin import AdminClient, NewTopic

                    for bootstrap in (brokers.source.bootstrap, brokers.target.bootstrap):
                        admin = AdminClient({"bootstrap.servers": bootstrap})
                        for future in admin.create_topics([NewTopic(t, num_partitions=partitions)
                                                           for t in names[start:start + 200]]).values():
                            future.result()
                seed(brokers.source.bootstrap, names, size, count, "none")
                consumer_file, producer_file = properties(self.work, f"g{axis}{value}", brokers.source.bootstrap,
                                                          brokers.target.bootstrap, "none")
                command = [sys.executable, str(ROOT / "bin" / "kafka-mirror-maker.py"), "--consumer.config",
                           str(consumer_file), "--producer.config", str(producer_file), "--include",
                           f"g{axis[0]}{value}-.*", "--exit.when.caught.up", "--log.level", "WARN",
                           "--status.interval.ms", "0"]
                sample = measure(command, self.work / f"growth-{axis}-{value}.log")
                ok = sample["exit"] == 0 and caught_up_count(sample["log"]) == count
                result = summarize([{**sample, "ok": ok}], count, size)
                result.update(axis=axis, value=value, topics=topics, partitions_per_topic=partitions)
                out.append(result)
                print(f"  {axis:<10} {value:>5}: {result['records_per_s']:>8,} rec/s, {result['seconds']:>6} s, "
                      f"{result['peak_rss_mb']:>6} MB RSS{'' if ok else '  (FAILED)'}", flush=True)

    def profile(self, kind: str) -> None:
        """Where the time goes for 100 B lz4 records (record mode's furthest row from its goal):
        py-spy's self time per function."""
        py_spy = Path(sys.executable).parent / "py-spy"
        if not py_spy.exists():
            return
        print(f"\n== profile on {kind} (100 B x {PROFILE_RECORDS:,} lz4, --num.streams 1)", flush=True)
        with KINDS[kind](self.work / "profile") as brokers:
            brokers.create_topic(brokers.source.bootstrap, "prof")
            brokers.create_topic(brokers.target.bootstrap, "prof")
            seed(brokers.source.bootstrap, ["prof"], 100, PROFILE_RECORDS, "lz4")
            consumer_file, producer_file = properties(self.work, "prof", brokers.source.bootstrap,
                                                      brokers.target.bootstrap, "lz4")
            raw = self.work / "profile.txt"
            command = [str(py_spy), "record", "--format", "raw", "-o", str(raw), "--rate", "250",
                       "--nonblocking", "--", sys.executable, str(ROOT / "bin" / "kafka-mirror-maker.py"),
                       "--consumer.config", str(consumer_file), "--producer.config", str(producer_file),
                       "--include", "prof", "--exit.when.caught.up", "--log.level", "WARN"]
            measure(command, self.work / "profile.log")
        self_time, total = Counter(), 0
        for line in raw.read_text().splitlines():
            stack, _, samples = line.rpartition(" ")
            frame = stack.split(";")[-1]
            self_time[re.sub(r" \(/.*?/(mirror_maker|site-packages)/", r" (\1/", frame)] += int(samples)
            total += int(samples)
        self.results[kind]["profile"] = [{"function": f, "percent": round(100 * n / total, 1)}
                                         for f, n in self_time.most_common(12)]
        for entry in self.results[kind]["profile"]:
            print(f"  {entry['percent']:5.1f}%  {entry['function']}")


def machine() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    from tests.brokers.apache_kafka import KAFKA_3_9, KAFKA_4, MIRROR_MAKER_2

    return {"date": datetime.date.today().isoformat(), "commit": commit, "cores": os.cpu_count(),
            "python": platform.python_version(), "librdkafka": libversion()[0],
            "machine": platform.machine(), "kernel": platform.release(),
            "kafka": KAFKA_4, "mirror_maker_v1": KAFKA_3_9, "mirror_maker_2": MIRROR_MAKER_2.split("-")[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", default="kafka,tansu", help="broker kinds, in order: kafka, tansu")
    parser.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    parser.add_argument("--peer-streams", type=lambda s: [int(x) for x in s.split(",") if x], default=[1],
                        help="--num.streams of Kafka's MirrorMaker v1 and tasks.max of MirrorMaker 2")
    parser.add_argument("--spark-streams", type=lambda s: [int(x) for x in s.split(",") if x], default=[2],
                        help="--num.streams of the --spark rows (empty: none)")
    parser.add_argument("--compressions", default="none,lz4")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=list(DEFAULT_SIZES),
                        help="these record sizes (of 100, 1000, 102400)")
    parser.add_argument("--window", type=float, default=20.0,
                        help="seconds a run is timed over once records flow, after --settle (0: time each run "
                             "until the whole workload is mirrored, start-up included)")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds after the first record before the window")
    parser.add_argument("--count", type=int, default=None, help="the backlog of every workload (default: sized "
                                                                  "for the window)")
    parser.add_argument("--all-rows", action="store_true",
                        help="also the offset syncs rows, the previous defaults and the confluent loop on Kafka")
    parser.add_argument("--no-pinned", dest="pinned", action="store_false",
                        help="skip the streams with the brokers and the tool on a core each (taskset)")
    parser.add_argument("--only", default=None, help="a regex: only the rows whose label matches (limits always)")
    parser.add_argument("--limits", type=lambda s: [x for x in s.split(",") if x], default=list(LIMIT_LABELS),
                        help=f"the limits of each workload, of {','.join(LIMIT_LABELS)}")
    parser.add_argument("--peers-python", default=None,
                        help="a Python with quixstreams installed (make bench: .venv-peers); quix skipped without")
    parser.add_argument("--baseline", default=None,
                        help="a commit whose mirror runs as a row too (before -> after in the same run)")
    parser.add_argument("--warmup", type=int, default=1, help="a discarded run before each workload's rows")
    parser.add_argument("--raw-goal", action="store_true",
                        help="raw mode's long goal row on Kafka (RAW_GOAL; the steady rows time raw mode too)")
    parser.add_argument("--record-path", action="store_true",
                        help="raw mode's record path rows on Kafka (RECORD_PATH_SOURCES)")
    parser.add_argument("--no-dedicated", dest="dedicated", action="store_false",
                        help="skip the dedicated mode's row on Kafka (DEDICATED: ours against MirrorMaker 2)")
    parser.add_argument("--no-failover", dest="failover", action="store_false",
                        help="skip the consumer failover row on Kafka (failover.py: ours against MirrorMaker 2)")
    parser.add_argument("--skip-growth", action="store_true")
    parser.add_argument("--skip-profile", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a tenth of the records, one run (a smoke test)")
    args = parser.parse_args()
    workloads = [(size, count // 10 if args.quick else count) for size, count in WORKLOADS if size in args.sizes]
    if args.quick:
        args.runs = 1
    kinds = [k.strip() for k in args.brokers.split(",") if k.strip()]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mirror-bench-") as tmp:
        bench = Bench(args, Path(tmp))
        try:
            for kind in kinds:
                bench.run_kind(kind, workloads)
            if not args.skip_growth:
                bench.growth(kinds[0])
            if not args.skip_profile:
                bench.profile(kinds[0])
        finally:
            bench.close()
    report = {"machine": machine(), "runs": args.runs, "baseline": args.baseline,
              "minutes": round((time.monotonic() - started) / 60, 1),
              "partitions": PARTITIONS, "brokers": bench.results}
    from report import write_report  # noqa: E402  (matplotlib only when a report is written)

    partial = bool(args.only or args.sizes != parser.get_default("sizes") or args.quick or args.skip_growth
                   or args.skip_profile or not args.dedicated or not args.failover or not args.pinned
                   or args.count is not None
                   or args.limits != parser.get_default("limits")
                   or args.brokers != parser.get_default("brokers"))
    paths = write_report(report, HERE / "results", partial)
    print(f"\nwritten: {', '.join(str(p.relative_to(ROOT)) for p in paths)} in {report['minutes']} min")


if __name__ == "__main__":
    main()
