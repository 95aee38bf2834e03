"""The throughput issues' goals, read off one run: each met or not, and by how much.

The report's tables hold every figure; this section puts the goals of record mode (at least 0.9
of the slower client limit with one stream at 100 B and 1 KB; more streams not slower; ahead of
Kafka's MirrorMaker v1 and v2 in records/s and CPU s/GB) and of raw mode (3x record mode, at most
1/5 of its CPU s/GB, at least 0.9 of the target's ingest limit) next to what this run measured,
so that a goal not met is stated with its shortfall, and where the machine's CPU went in those
runs (``cpu_split``) is one table below.
"""

from __future__ import annotations

import re
from typing import List, Optional

ONE_STREAM = "mirror, --num.streams 1"
RAW = "mirror --use.raw.bytes, --num.streams 1"
COPY = "limit: copy loop (one thread)"
INGEST = "limit: target ingest (raw batches)"
_MORE_STREAMS = re.compile(r"mirror, --num\.streams (\d+)")
RECORD_GOAL = 0.9
RECORD_GOAL_SIZES = (100, 1000)
RAW_SPEED_GOAL, RAW_CPU_GOAL, RAW_INGEST_GOAL = 3.0, 0.2, 0.9
#: The runs the CPU split table shows: the client limits, the copy loop, one and two streams, raw
#: mode and Kafka's MirrorMaker v1 with one stream. Not the ingest limit: its process fetches every
#: batch before its timed loop, so its window is mostly that.
SPLIT_RUNS = ("limit: produce only", "limit: consume only", COPY, ONE_STREAM, "mirror, --num.streams 2", RAW,
              "Kafka MirrorMaker v1, --num.streams 1")


def slower_limit(results: dict) -> Optional[int]:
    """The slower of the client's produce-only and consume-only limits (records/s), if measured."""
    try:
        return min(results["limit: produce only"]["records_per_s"], results["limit: consume only"]["records_per_s"])
    except KeyError:
        return None


def _verdict(value: Optional[float], goal: float, at_most: bool = False) -> str:
    if value is None:
        return "not measured"
    met = value <= goal if at_most else value >= goal
    return "met" if met else f"**not met** ({value - goal:+.2f})"


def _workload(row: dict) -> str:
    return f"{row['record_bytes']} B {row['compression']}"


def _record_mode(kind: str, section: dict) -> List[str]:
    """One stream against the slower client limit, end to end and once records flow (Kafka: from
    the first record on the target; Tansu: from the group join, its 1 s JoinGroup hold left out)."""
    flowing_key = "records_per_s_after_first" if kind == "kafka" else "records_per_s_after_join"
    lines = [f"| Record mode, one stream, at least {RECORD_GOAL} of the slower client limit | Workload | "
             "end to end | once flowing | copy loop (the client's own one-thread copy) | goal, once flowing |",
             "|---|---|---|---|---|---|"]
    for row in section["workloads"]:
        results = row["results"]
        limit, mirror = slower_limit(results), results.get(ONE_STREAM)
        if row["record_bytes"] not in RECORD_GOAL_SIZES or not limit or not mirror:
            continue
        flowing = mirror.get(flowing_key)
        copy = results.get(COPY, {}).get("records_per_s")
        lines.append(f"| | {_workload(row)} | {mirror['records_per_s'] / limit:.2f} | "
                     f"{f'{flowing / limit:.2f}' if flowing else ''} | {f'{copy / limit:.2f}' if copy else ''} | "
                     f"{_verdict(flowing / limit if flowing else None, RECORD_GOAL)} |")
    return lines


def _streams(section: dict) -> List[str]:
    """More streams against one stream, records/s end to end (the goal: not slower)."""
    lines = []
    for row in section["workloads"]:
        one = row["results"].get(ONE_STREAM)
        if not one:
            continue
        ratios = {int(match.group(1)): r["records_per_s"] / one["records_per_s"]
                  for label, r in row["results"].items()
                  for match in [_MORE_STREAMS.fullmatch(label)] if match and label != ONE_STREAM}
        if ratios:
            worst = min(ratios.values())
            lines.append(f"| | {_workload(row)} | " + ", ".join(f"{n} streams {v:.2f}" for n, v in ratios.items())
                         + f" | {_verdict(worst, 1.0)} |")
    if lines:
        lines = ["| More streams not slower than one | Workload | records/s against one stream | goal |",
                 "|---|---|---|---|"] + lines
    return lines


def _peers(section: dict) -> List[str]:
    """Our one stream against Kafka's MirrorMaker v1 and v2 (their best row of each workload)."""
    lines = []
    for row in section["workloads"]:
        ours = row["results"].get(ONE_STREAM)
        if not ours:
            continue
        for peer in ("Kafka MirrorMaker v1", "Kafka MirrorMaker 2,"):
            rows = [r for label, r in row["results"].items() if label.startswith(peer) and r["ok"]]
            if not rows:
                continue
            best = max(rows, key=lambda r: r["records_per_s"])
            speed = ours["records_per_s"] / best["records_per_s"]
            cpu = ours["cpu_s_per_gb"] / best["cpu_s_per_gb"] if best["cpu_s_per_gb"] else None
            met = speed > 1 and cpu is not None and cpu < 1
            lines.append(f"| | {_workload(row)} | {peer.rstrip(',')} | {speed:.1f}x | "
                         f"{f'{cpu:.2f}' if cpu is not None else ''} | {'met' if met else '**not met**'} |")
    if lines:
        lines = ["| Ahead of Kafka's MirrorMaker (its fastest row) | Workload | Peer | our records/s against its | "
                 "our CPU s/GB against its | goal |", "|---|---|---|---|---|---|"] + lines
    return lines


def raw_goal_ratios(results: dict) -> Optional[dict]:
    """Raw mode against record mode and the target's ingest limit in the raw goal row's results:
    ``speed`` and ``cpu`` (raw over record mode), ``end_to_end`` and ``flowing`` (raw over the ingest
    limit; ``flowing`` None when not timed). None when a run or the limit is missing."""
    record, raw = results.get(ONE_STREAM), results.get(RAW)
    ingest = results.get(INGEST, {}).get("records_per_s")
    if not record or not raw or not ingest:
        return None
    flowing = raw.get("records_per_s_after_first")
    return {"speed": raw["records_per_s"] / record["records_per_s"],
            "cpu": raw["cpu_s_per_gb"] / record["cpu_s_per_gb"],
            "end_to_end": raw["records_per_s"] / ingest, "flowing": flowing / ingest if flowing else None}


def _raw(section: dict) -> List[str]:
    goal = section.get("raw_goal")
    ratios = raw_goal_ratios(goal["results"]) if goal else None
    if ratios is None:
        return []
    flowing = ratios["flowing"]
    return ["| Raw mode, 100 B lz4, long run | Goal | measured | verdict |", "|---|---|---|---|",
            f"| | at least {RAW_SPEED_GOAL:.0f}x record mode's records/s | {ratios['speed']:.1f}x | "
            f"{_verdict(ratios['speed'], RAW_SPEED_GOAL)} |",
            f"| | at most {RAW_CPU_GOAL} of its CPU s/GB | {ratios['cpu']:.2f} | "
            f"{_verdict(ratios['cpu'], RAW_CPU_GOAL, at_most=True)} |",
            f"| | at least {RAW_INGEST_GOAL} of the target's ingest limit, once flowing (end to end) | "
            + (f"{flowing:.2f} ({ratios['end_to_end']:.2f})" if flowing else "")
            + f" | {_verdict(flowing, RAW_INGEST_GOAL)} |"]


def goals(kind: str, section: dict, title: str) -> List[str]:
    """The goals section of one broker kind."""
    parts = [_record_mode(kind, section), _streams(section)]
    if kind == "kafka":
        parts += [_peers(section), _raw(section)]
    lines = ["", f"### The goals, on {title}", "",
             "Each goal of the throughput issues against this run. \"Once flowing\" leaves the start-up out, as "
             "the limits' own loops are timed without it; the copy loop's ratio shows what the client itself "
             "reaches copying in one thread with the mirror's settings."]
    for part in parts:
        if part:
            lines += [""] + part
    return lines


def _thread_shares(split: dict) -> str:
    if "busiest_thread_running" not in split:
        return ""
    return f"{100 * split['busiest_thread_running']:.0f}%, {100 * split['busiest_thread_waiting']:.0f}%"


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
        seconds = split["seconds"] or 1e-9

        def cores_of(*keys):
            return f"{sum(split.get(key, 0) for key in keys) / seconds:.2f}"
        workload = f"{row['record_bytes']} B x {row['records']:,} {row['compression']}"
        lines.append(f"| {workload} | {label} | {split['seconds']:.2f} | {cores_of('busy')} | "
                     f"{cores_of('tool_other_threads')} | {cores_of('tool_librdkafka_threads')} | "
                     f"{cores_of('source_broker')} | {cores_of('target_broker')} | "
                     f"{cores_of('benchmark', 'rest')} | {_thread_shares(split)} |")
    return lines
