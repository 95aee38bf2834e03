"""The throughput goals, read off one run: each met or not, and by how much.

The report's tables hold every figure; this section puts each goal next to what this run
measured, so that a goal not met is stated with its shortfall:

1. every row timed in steady state, over a window of at least WINDOW_GOAL_S once records flow,
   medians of at least RUNS_GOAL runs;
2. record mode, one stream, at least COPY_GOAL of the copy loop (the client's own one-thread
   consume -> produce with the mirror's settings) at 100 B and 1 KB, none and lz4 (beside the
   ratio of the medians, the median of the rounds' ratios and the CPU s/GB against the loop's);
3. ``--num.streams`` 2 and 4 at least STREAMS_GOAL of one stream, every workload (and the same
   with the brokers and the mirror on a core each, where the machine allows it);
4. ``--spark`` with 2 streams at least SPARK_SPEED_GOAL of 2 threads' records/s, at most
   SPARK_CPU_GOAL times their CPU s/GB (the JVM and the Python workers counted);
5. ahead of Kafka's MirrorMaker v1 and v2 in records/s and CPU s/GB; raw mode at least 3x record
   mode at 100 B lz4, at most 1/5 of its CPU s/GB, at least 0.9 of the target's ingest limit
   (beside it, the target broker's CPU against its CPU under that limit);
6. with ``--baseline``: no mode slower than at that commit (its rows run in the same run): each
   mode's median at least the lowest of the baseline's runs, so that a shortfall smaller than the
   baseline's own run-to-run spread is not called a regression, and a larger one is.

Where the machine's CPU went in those runs (``cpu_split``) is one table below.
"""

from __future__ import annotations

import re
import statistics
from typing import List, Optional

ONE_STREAM = "mirror, --num.streams 1"
TWO_STREAMS = "mirror, --num.streams 2"
SPARK_TWO = "mirror --spark, --num.streams 2"
RAW = "mirror --use.raw.bytes, --num.streams 1"
COPY = "limit: copy loop (one thread)"
PRODUCE_ONLY = "limit: produce only"
INGEST = "limit: target ingest (raw batches)"
_MORE_STREAMS = re.compile(r"mirror, --num\.streams (\d+)")
#: A row of the baseline commit's code: the mode's own label is the same without " at COMMIT".
_AT_BASELINE = re.compile(r"(mirror.*) at (\w+)(, --num\.streams 1)")
WINDOW_GOAL_S, RUNS_GOAL = 20.0, 3
COPY_GOAL = 0.9
COPY_GOAL_SIZES = (100, 1000)
STREAMS_GOAL = 0.95
SPARK_SPEED_GOAL, SPARK_CPU_GOAL = 0.9, 1.3
RAW_SPEED_GOAL, RAW_CPU_GOAL, RAW_INGEST_GOAL = 3.0, 0.2, 0.9
RAW_GOAL_WORKLOAD = (100, "lz4")
#: The runs the CPU split table shows: the client limits, the copy loop, the ingest limit, one and
#: two streams, raw mode and Kafka's MirrorMaker v1 with one stream.
SPLIT_RUNS = (PRODUCE_ONLY, "limit: consume only", COPY, INGEST, ONE_STREAM, TWO_STREAMS, RAW,
              "Kafka MirrorMaker v1, --num.streams 1")


def copy_label(threads: int) -> str:
    """The copy loop's row: in one thread, or in as many threads as a row of more streams."""
    return COPY if threads == 1 else f"limit: copy loop ({threads} threads)"


def slower_limit(results: dict) -> Optional[int]:
    """The slower of the client's produce-only and consume-only limits (records/s), if measured."""
    try:
        return min(results[PRODUCE_ONLY]["records_per_s"], results["limit: consume only"]["records_per_s"])
    except KeyError:
        return None


def _verdict(value: Optional[float], goal: float, at_most: bool = False) -> str:
    if value is None:
        return "not measured"
    met = value <= goal if at_most else value >= goal
    short = f"{value - goal:+.2f}"
    if float(short) == 0:  # a shortfall two decimals round away is shown with three
        short = f"{value - goal:+.3f}"
    return "met" if met else f"**not met** ({short})"


def _workload(row: dict) -> str:
    return f"{row['record_bytes']} B {row['compression']}"


def rate(result: Optional[dict], kind: str) -> Optional[float]:
    """A row's steady rate: over its window on Kafka; on Tansu, where no watcher can read the
    target, from the group join to the end for the mirror, from its cold start's end for Spark
    (its tasks log no join the bench reads), the whole loop for a limit."""
    if not result or not result.get("ok", True):
        return None
    if kind == "tansu":
        return (result.get("records_per_s_after_join") or result.get("records_per_s_after_start")
                or result.get("records_per_s"))
    return result["records_per_s"]


def _all_rows(section: dict):
    """(where, label, result) of every timed row of a broker kind."""
    for row in section["workloads"] + ([section["pinned"]] if section.get("pinned") else []):
        where = _workload(row) + (", pinned" if row is section.get("pinned") else "")
        for label, result in row["results"].items():
            yield where, label, result
    if section.get("dedicated"):
        for label, result in section["dedicated"]["results"].items():
            yield "dedicated", label, result


def _steady(kind: str, section: dict) -> List[str]:
    """Goal 1: every row over a whole window, medians of enough runs."""
    header = ["| Steady state | Goal | measured | verdict |", "|---|---|---|---|"]
    goal = f"every row over at least {WINDOW_GOAL_S:.0f} s once records flow, medians of {RUNS_GOAL} runs"
    if kind != "kafka":
        return header + [f"| | {goal} | not on Tansu: its ListOffsets is wrong, so no watcher reads the target; the "
                         "mirror is timed by its own lines from its group join to its end, against Tansu's own copy "
                         "loop | explained |"]
    rows = list(_all_rows(section))
    short = [f"{where}: {label} ({r.get('window_s', 0)} s, {r['runs']} runs)" for where, label, r in rows
             if r.get("window_s", 0) < WINDOW_GOAL_S * 0.99 or r["runs"] < RUNS_GOAL]
    return header + [f"| | {goal} | {len(rows) - len(short)} of {len(rows)} rows"
                     + (f"; short: {'; '.join(short)}" if short else "") + f" | {'met' if not short else '**not met**'} |"]


def _record_mode(kind: str, section: dict) -> List[str]:
    """Goal 2: one stream against the copy loop."""
    lines = [f"| Record mode, one stream, at least {COPY_GOAL} of the copy loop | Workload | one stream | copy loop "
             "| ratio | run by run | CPU s/GB against the copy loop's | goal |", "|---|---|---|---|---|---|---|---|"]
    for row in section["workloads"]:
        if row["record_bytes"] not in COPY_GOAL_SIZES:
            continue
        one, loop = row["results"].get(ONE_STREAM), row["results"].get(COPY)
        mirror, copy = rate(one, kind), rate(loop, kind)
        ratio = mirror / copy if mirror and copy else None
        paired, cost = paired_ratio(one, loop), cpu_ratio(one, loop)
        lines.append(f"| | {_workload(row)} | {f'{mirror:,.0f}' if mirror else ''} | {f'{copy:,.0f}' if copy else ''} "
                     f"| {f'{ratio:.2f}' if ratio else ''} | {f'{paired:.2f}' if paired else ''} "
                     f"| {f'{cost:.2f}' if cost else ''} | {_verdict(ratio, COPY_GOAL)} |")
    return lines


def cpu_key(result: Optional[dict], other: Optional[dict]) -> str:
    """The CPU s/GB two rows are compared on: over the steady window where both have it (as their
    records/s are), else over their whole runs."""
    steady = "steady_cpu_s_per_gb"
    return steady if (result or {}).get(steady) and (other or {}).get(steady) else "cpu_s_per_gb"


def cpu_ratio(result: Optional[dict], yardstick: Optional[dict]) -> Optional[float]:
    """CPU s/GB against the yardstick's (``cpu_key``): with the machine's cores all busy, what the
    mirror does per record beyond the yardstick's loop costs it about as much of its rate."""
    key = cpu_key(result, yardstick)
    mine, theirs = (result or {}).get(key), (yardstick or {}).get(key)
    return mine / theirs if mine and theirs else None


def paired_ratio(result: Optional[dict], yardstick: Optional[dict]) -> Optional[float]:
    """The median of the runs' ratios round by round (run i of one row against run i of the
    other, minutes apart): the machine's drift between rounds falls on both sides of each."""
    runs = list(zip((result or {}).get("run_records_per_s", ()), (yardstick or {}).get("run_records_per_s", ())))
    ratios = [a / b for a, b in runs if a and b]
    return statistics.median(ratios) if ratios else None


def _streams(kind: str, section: dict) -> List[str]:
    """Goal 3: more streams against one, in every workload (and pinned), beside the client's own
    copy loop in as many threads against its one thread: what threads of this client gain at all."""
    lines = []
    rows = section["workloads"] + ([section["pinned"]] if section.get("pinned") else [])
    for row in rows:
        results = row["results"]
        one = rate(results.get(ONE_STREAM), kind)
        if not one:
            continue
        ratios = {int(match.group(1)): (rate(r, kind) or 0) / one for label, r in results.items()
                  for match in [_MORE_STREAMS.fullmatch(label)] if match and label != ONE_STREAM}
        copy_one = rate(results.get(COPY), kind)
        client = {n: rate(results.get(copy_label(n)), kind) for n in ratios}
        client = {n: v / copy_one for n, v in client.items() if v and copy_one}
        if ratios:
            where = _workload(row) + (", brokers on core 0, the mirror on core 1" if row is section.get("pinned")
                                      else "")
            lines.append(f"| | {where} | " + ", ".join(f"{n} streams {v:.2f}" for n, v in ratios.items())
                         + " | " + ", ".join(f"{n} threads {v:.2f}" for n, v in client.items())
                         + f" | {_verdict(min(ratios.values()), STREAMS_GOAL)} |")
    if lines:
        lines = [f"| --num.streams 2 and 4, at least {STREAMS_GOAL} of one stream | Workload | records/s against one "
                 "stream | the client's copy loop in as many threads, against one | goal |",
                 "|---|---|---|---|---|"] + lines
    return lines


def _spark(kind: str, section: dict) -> List[str]:
    """Goal 4: Spark's 2 tasks against 2 threads."""
    lines = []
    for row in section["workloads"]:
        spark, threads = row["results"].get(SPARK_TWO), row["results"].get(TWO_STREAMS)
        if not spark or not threads or not rate(threads, kind):
            continue
        speed = (rate(spark, kind) or 0) / rate(threads, kind)
        # In steady state, as the records/s: the JVM's start is Spark's start-up, reported apart.
        key, cpu = cpu_key(spark, threads), cpu_ratio(spark, threads)
        met = speed >= SPARK_SPEED_GOAL and cpu is not None and cpu <= SPARK_CPU_GOAL
        whole = " (whole run: its cold start in)" if key == "cpu_s_per_gb" else ""
        lines.append(f"| | {_workload(row)} | {speed:.2f} | {f'{cpu:.2f}{whole}' if cpu else ''} | "
                     f"{spark.get('startup_s', '')} | {'met' if met else '**not met**'} |")
    if lines:
        lines = [f"| --spark, 2 streams, at least {SPARK_SPEED_GOAL} of 2 threads' records/s at most {SPARK_CPU_GOAL}x "
                 "their CPU s/GB | Workload | records/s against threads | CPU s/GB against threads (steady window) | "
                 "Spark's start-up s (apart) | goal |", "|---|---|---|---|---|---|"] + lines
    return lines


def _peers(kind: str, section: dict) -> List[str]:
    """Goal 5: our one stream against Kafka's MirrorMaker v1 and v2 (their best row of each
    workload), beside the client's produce-only limit against the peer: a peer faster than this
    client can produce alone is out of reach of any record-mode mirror on it."""
    lines = []
    for row in section["workloads"]:
        ours = row["results"].get(ONE_STREAM)
        if not rate(ours, kind):
            continue
        produce_only = rate(row["results"].get(PRODUCE_ONLY), kind)
        for peer in ("Kafka MirrorMaker v1", "Kafka MirrorMaker 2,"):
            rows = [r for label, r in row["results"].items() if label.startswith(peer) and r["ok"]]
            if not rows:
                continue
            best = max(rows, key=lambda r: r["records_per_s"])
            speed = rate(ours, kind) / best["records_per_s"]
            cpu = ours["cpu_s_per_gb"] / best["cpu_s_per_gb"] if best["cpu_s_per_gb"] else None
            met = speed > 1 and cpu is not None and cpu < 1
            bound = f"{produce_only / best['records_per_s']:.2f}x" if produce_only else ""
            lines.append(f"| | {_workload(row)} | {peer.rstrip(',')} | {speed:.1f}x | "
                         f"{f'{cpu:.2f}' if cpu is not None else ''} | {bound} | {'met' if met else '**not met**'} |")
    if lines:
        lines = ["| Ahead of Kafka's MirrorMaker (its fastest row) | Workload | Peer | our records/s against its | "
                 "our CPU s/GB against its | the client's produce-only limit against it | goal |",
                 "|---|---|---|---|---|---|---|"] + lines
    return lines


def _baseline(kind: str, section: dict) -> List[str]:
    """Goal 6: every mode against the same mode at the baseline commit, in the same run."""
    lines, commit = [], None
    for row in section["workloads"]:
        for label, before in row["results"].items():
            match = _AT_BASELINE.fullmatch(label)
            now = row["results"].get(match.group(1) + match.group(3)) if match else None
            if not rate(now, kind) or not rate(before, kind):
                continue
            commit, spread = match.group(2), before.get("spread")
            was = f"{rate(before, kind):,.0f}" + (f" ({spread[0]:,}–{spread[1]:,})" if spread else "")
            cost = cpu_ratio(now, before)
            cpu = f"{cost:.2f}" if cost else ""
            met = rate(now, kind) >= (spread[0] if spread else rate(before, kind))
            lines.append(f"| | {_workload(row)} | {match.group(1)} | {rate(now, kind):,.0f} | {was} | "
                         f"{rate(now, kind) / rate(before, kind):.2f} | {cpu} | {'met' if met else '**not met**'} |")
    if lines:
        lines = [f"| No mode slower than at {commit} (same run): the median at least the lowest of {commit}'s runs "
                 f"| Workload | Mode | records/s | at {commit} (spread) | ratio | CPU s/GB against {commit} | goal |",
                 "|---|---|---|---|---|---|---|---|"] + lines
    return lines


def raw_goal_ratios(results: dict) -> Optional[dict]:
    """Raw mode against record mode and the target's ingest limit: ``speed`` and ``cpu`` (raw over
    record mode) and ``ingest`` (raw over the ingest limit). None when a run or the limit is missing."""
    record, raw = results.get(ONE_STREAM), results.get(RAW)
    ingest = results.get(INGEST, {}).get("records_per_s")
    if not record or not raw or not ingest:
        return None
    return {"speed": raw["records_per_s"] / record["records_per_s"],
            "cpu": raw["cpu_s_per_gb"] / record["cpu_s_per_gb"], "ingest": raw["records_per_s"] / ingest}


def _raw(section: dict) -> List[str]:
    row = next((r for r in section["workloads"] if (r["record_bytes"], r["compression"]) == RAW_GOAL_WORKLOAD),
               section.get("raw_goal"))
    ratios = raw_goal_ratios(row["results"]) if row else None
    if ratios is None:
        return []
    paired = paired_ratio(row["results"].get(RAW), row["results"].get(INGEST))
    broker = target_broker_share(row["results"].get(RAW), row["results"].get(INGEST))
    return [f"| Raw mode, {_workload(row)} | Goal | measured | verdict |", "|---|---|---|---|",
            f"| | at least {RAW_SPEED_GOAL:.0f}x record mode's records/s | {ratios['speed']:.1f}x | "
            f"{_verdict(ratios['speed'], RAW_SPEED_GOAL)} |",
            f"| | at most {RAW_CPU_GOAL} of its CPU s/GB | {ratios['cpu']:.2f} | "
            f"{_verdict(ratios['cpu'], RAW_CPU_GOAL, at_most=True)} |",
            f"| | at least {RAW_INGEST_GOAL} of the target's ingest limit | {ratios['ingest']:.2f}"
            + (f" (run by run: {paired:.2f})" if paired else "")
            + (f"; the target broker had {broker:.2f} of the CPU it had under the ingest limit" if broker else "")
            + f" | {_verdict(ratios['ingest'], RAW_INGEST_GOAL)} |"]


def target_broker_share(result: Optional[dict], limit: Optional[dict]) -> Optional[float]:
    """The target broker's cores over a run's window against its cores under ``limit`` (one run of
    each, cpu_split's): where the broker is what limits the rate and the cores are shared, the
    mirror's rate against the limit's follows this (the mirror and the source broker, serving its
    fetches, take the rest), whatever the mirror's own speed."""
    splits = [(r or {}).get("cpu_split") for r in (result, limit)]
    if not all(split and split.get("seconds") for split in splits):
        return None
    mine, theirs = (split_cores(split, "target_broker") for split in splits)
    return mine / theirs if mine and theirs else None


def goals(kind: str, section: dict, title: str) -> List[str]:
    """The goals section of one broker kind."""
    parts = [_steady(kind, section), _record_mode(kind, section), _streams(kind, section), _spark(kind, section)]
    if kind == "kafka":
        parts += [_peers(kind, section), _raw(section)]
    parts.append(_baseline(kind, section))
    lines = ["", f"### The goals, on {title}", "",
             "Each goal against this run, on the steady rates (records/s over the window once records flow); "
             "the copy loop is the client's own one-thread consume -> produce with the mirror's settings: the "
             "ceiling of a record-mode Python mirror on this machine."]
    for part in parts:
        if part:
            lines += [""] + part
    return lines


def _thread_shares(split: dict) -> str:
    if "busiest_thread_running" not in split:
        return ""
    return f"{100 * split['busiest_thread_running']:.0f}%, {100 * split['busiest_thread_waiting']:.0f}%"


def split_cores(split: dict, *keys: str) -> float:
    """The cores the ``keys`` parts of a run's CPU split took over its window."""
    return sum(split.get(key, 0) for key in keys) / (split["seconds"] or 1e-9)


def cpu_split(section: dict, title: str, cores: int) -> List[str]:
    """Where the machine's CPU went in the runs of SPLIT_RUNS (and the raw goal's)."""
    rows = [(row, label, r) for row in section["workloads"] + ([section["raw_goal"]] if section.get("raw_goal") else [])
            for label, r in row["results"].items() if label in SPLIT_RUNS and r.get("cpu_split")]
    if not rows:
        return []
    lines = ["", f"### Where the machine's CPU went, on {title}", "",
             f"Over each run's window (while records flowed: from the first record on the target to the last; "
             f"where no watcher reads the target, the limits and every run on Tansu, the process's whole life, "
             f"its start included), in cores: CPU seconds over the window's seconds, "
             f"{cores} at most. The tool's librdkafka threads fetch, decompress, compress and send; its other "
             "threads are Python's (or a JVM's), and the busiest of them (a mirror's stream thread) ran for the first "
             "share of the window and was ready to run but waited for a free core the second (the rest of the window "
             "it slept: on its data, a lock or the GIL; for a limit, its one thread over its own timed loop; not shown "
             "for the other runs without a watcher); the rest is the benchmark's watcher and everything else (CPU time is "
             "counted in 10 ms clock ticks, so a part can be off by a few hundredths). One run per row, the one "
             "nearest the median's time.", "",
             "| Workload | Run | window s | machine busy, cores | tool: other threads | tool: librdkafka threads | "
             "source broker | target broker | the rest | busiest Python thread: running, waiting for a core |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row, label, r in rows:
        split = r["cpu_split"]

        def cores_of(*keys):
            return f"{split_cores(split, *keys):.2f}"
        workload = f"{row['record_bytes']} B x {row['records']:,} {row['compression']}"
        lines.append(f"| {workload} | {label} | {split['seconds']:.2f} | {cores_of('busy')} | "
                     f"{cores_of('tool_other_threads')} | {cores_of('tool_librdkafka_threads')} | "
                     f"{cores_of('source_broker')} | {cores_of('target_broker')} | "
                     f"{cores_of('benchmark', 'rest')} | {_thread_shares(split)} |")
    return lines
