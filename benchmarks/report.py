"""Turns a benchmark run into results/latest.json, .md and .png (docs/performance.md shows them):
one table per broker kind; a full run also adds its headline figures to results/history.md."""

from __future__ import annotations

import json
import time
from pathlib import Path

from goals import cpu_split, goals, raw_goal_ratios, slower_limit

TITLES = {"kafka": "Apache Kafka", "tansu": "Tansu (the embedded broker of make demo)"}
TIMING = {
    "kafka": "Every tool is timed the same way, in steady state: a watcher reads the target's end offsets "
             "(read_committed) every 10 ms from the process start; the window starts 2 s after the first record on "
             "the target and lasts 20 s, over a backlog the fastest tool does not finish sooner; then SIGTERM. "
             "records/s is the records that arrived over the window (medians of the runs, and their spread); "
             "start-up is the seconds from the process start to the first record (JVM start and group join "
             "included); end to end is what the run mirrored over its whole time, start-up included; CPU s/GB is "
             "over the whole run. The limits are the client's own loops: those that write to the target "
             "(produce only, the copy loop, the target's ingest) timed there by the same watcher, consume only "
             "over its own window.",
    "tansu": "Limits are the client's own loop; the mirror and the peers are timed from process start "
             "until every record is on the target and the process exited by itself; the mirror's own lines also "
             "give its rate from its group join to its end (\"after join\").",
}


def _workload(row) -> str:
    return f"{row['record_bytes']} B x {row['records']:,}"


def _limits(row) -> tuple:
    """(the slower of the client's produce-only and consume-only limits, the target's ingest limit)."""
    results = row["results"]
    return slower_limit(results), results.get("limit: target ingest (raw batches)", {}).get("records_per_s")


def _limit_for(row, label: str):
    """What a run is measured against: raw mode (``--use.raw.bytes``) the target's ingest limit for
    the same batches where it was measured, everything else the slower client limit."""
    limit, ingest = _limits(row)
    return ingest if "--use.raw.bytes" in label and ingest else limit


def _rows_with(section: dict, key: str) -> list:
    """(workload row, run label, result) of every run whose result has ``key``."""
    return [(row, label, r) for row in section["workloads"] for label, r in row["results"].items() if key in r]


def _share(share) -> str:
    return "" if share is None else f"{share:.0%}"


def _table(kind: str, section: dict, machine: dict) -> list:
    lines = [f"## {TITLES.get(kind, kind)}", ""]
    if kind == "kafka":
        lines += [f"Brokers: Apache Kafka {machine.get('kafka')} (one KRaft node each, on this machine); "
                  f"Kafka's MirrorMaker v1 from {machine.get('mirror_maker_v1')}, MirrorMaker 2 from "
                  f"{machine.get('mirror_maker_2')} (dedicated mode, IdentityReplicationPolicy), their JVMs "
                  "included in CPU and RSS.", ""]
    lines += [TIMING.get(kind, ""), ""]
    steady = any("window_s" in r for row in section["workloads"] for r in row["results"].values())
    if section["workloads"] and steady:
        lines += ["The last two columns: against the copy loop (the client's own one-thread consume -> produce with "
                  "the mirror's settings) and, for raw mode (`--use.raw.bytes`), against the target's ingest limit "
                  "for the same batches; record mode against the slower of the produce-only and consume-only limits.",
                  "", "| Workload | Compression | Run | records/s | spread | window s | start-up s | end to end "
                  "records/s | CPU s/GB | Peak RSS MB | vs copy loop | vs limit |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    elif section["workloads"]:
        lines += ["The last column: record mode against the slower of the client's produce-only and consume-only "
                  "limits; raw mode (`--use.raw.bytes`) against the target's ingest limit for the same batches.", "",
                  "| Workload | Compression | Run | records/s | MB/s | CPU s/GB | Peak RSS MB | vs limit |",
                  "|---|---|---|---|---|---|---|---|"]
    for row in section["workloads"]:
        lines += _rows(row, steady)
    if section["workloads"]:  # a run of other rows only (e.g. the dedicated mode's) has no goals to state
        lines += goals(kind, section, TITLES.get(kind, kind))
    lines += cpu_split(section, TITLES.get(kind, kind), machine.get("cores", 2))
    timed = [t for t in _rows_with(section, "first_record_s") if "window_s" not in t[2]]
    if timed:
        lines += ["", f"### Start-up, rate once records flow, and stop on {TITLES.get(kind, kind)}", "",
                  "Seconds from process start to the first record on the target; the records after it over the "
                  "time after it (start-up excluded, as the limits' loops are timed), against the same limit as "
                  "above (not for exactly-once rows: their records appear a transaction at a time), and for "
                  "record mode against the copy loop (the same client settings, consume -> produce of key, value, "
                  "timestamp and headers, nothing else: what the mirror's own work costs); seconds from SIGTERM "
                  "to exit.", "",
                  "| Workload | Compression | Run | first record s | records/s after it | vs limit | vs copy loop "
                  "| stop s |",
                  "|---|---|---|---|---|---|---|---|"]
        for row, label, r in timed:
            after = None if "exactly" in label else r.get("records_per_s_after_first")
            base = _limit_for(row, label)
            ratio = f"{after / base:.2f}" if after and base else ""
            copy = row["results"].get("limit: copy loop (one thread)", {}).get("records_per_s")
            versus_copy = f"{after / copy:.2f}" if after and copy and "--use.raw.bytes" not in label else ""
            lines.append(f"| {_workload(row)} | {row['compression']} | {label} | {r['first_record_s']} | "
                         f"{f'{after:,}' if after else ''} | {ratio} | {versus_copy} | {r.get('stop_s')} |")
    joined = _rows_with(section, "joined_s")
    if joined:
        lines += ["", f"### Group join and rate after it on {TITLES.get(kind, kind)}", "",
                  "Without a watcher here, from the mirror's own INFO lines: seconds from its first line to its "
                  "first assignment (the group join: the broker's JoinGroup answer), and the records over the time "
                  "from then until every partition was at its end, against the same limit as above.", "",
                  "| Workload | Compression | Run | group joined s | records/s after it | vs limit |",
                  "|---|---|---|---|---|---|"]
        for row, label, r in joined:
            base = _limit_for(row, label)
            after = r.get("records_per_s_after_join")
            lines.append(f"| {_workload(row)} | {row['compression']} | {label} | {r['joined_s']} | "
                         f"{f'{after:,}' if after else ''} | {f'{after / base:.2f}' if after and base else ''} |")
    if section.get("raw_goal"):
        lines += _raw_goal(section["raw_goal"], TITLES.get(kind, kind))
    if section.get("record_path"):
        lines += _record_path(section["record_path"], TITLES.get(kind, kind))
    if section.get("dedicated"):
        lines += _dedicated(section["dedicated"], TITLES.get(kind, kind))
    if section.get("pinned"):
        lines += _pinned(section["pinned"], TITLES.get(kind, kind))
    if section.get("failover"):
        from failover import table

        lines += table(section["failover"])
    spark = _rows_with(section, "startup_s")
    if spark:
        lines += ["", f"### Spark mode on {TITLES.get(kind, kind)} (local mode, one JVM and one Python process "
                  "per stream)", "",
                  "The cold start is the JVM, the SparkContext and pyspark's worker daemon, until the first "
                  "worker runs. CPU and RSS are summed over the whole process tree: CPU s/GB over the whole run "
                  "(the cold start included) and over the steady window alone, and the JVM's share of the "
                  "window's CPU (Spark's own cost; the rest is the streams' Python processes).", "",
                  "| Workload | Compression | Run | records/s end to end | cold start s | records/s after it |"
                  " CPU s/GB | CPU s/GB, steady window | JVM's share of it | Peak RSS MB (tree) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {_workload(row)} | {row['compression']} | {label} | "
                  f"{r.get('end_to_end_records_per_s', r['records_per_s']):,} | {r['startup_s']} | "
                  f"{r.get('records_per_s_after_start', r['records_per_s']):,} | {r['cpu_s_per_gb']} | "
                  f"{r.get('steady_cpu_s_per_gb', '')} | {_share(r.get('steady_jvm_cpu_share'))} | "
                  f"{r['peak_rss_mb']} |" for row, label, r in spark]
    if section.get("growth"):
        lines += ["", f"### Cost growth on {TITLES.get(kind, kind)} (1 KB records, 40,000 in all, "
                  "--num.streams 1, one run each)", "",
                  "| Axis | Value | records/s | seconds | Peak RSS MB |", "|---|---|---|---|---|"]
        lines += [f"| {g['axis']} | {g['value']} | {g['records_per_s']:,} | {g['seconds']} | {g['peak_rss_mb']} |"
                  for g in section["growth"]]
    if section.get("profile"):
        lines += ["", f"### Where the time goes on {TITLES.get(kind, kind)} (100 B lz4 records, py-spy self time)", "",
                  "| % of samples | Function |", "|---|---|"]
        lines += [f"| {p['percent']} | `{p['function']}` |" for p in section["profile"]]
    return lines + [""]


def _rows(row: dict, steady: bool) -> list:
    """One workload's lines of the main table."""
    lines = []
    copy = row["results"].get("limit: copy loop (one thread)", {}).get("records_per_s")
    for label, r in row["results"].items():
        base = _limit_for(row, label)
        ratio = "" if label.startswith("limit") or not base else f"{r['records_per_s'] / base:.2f}"
        flag = "" if r["ok"] else " (failed)"
        if not steady:
            lines.append(f"| {_workload(row)} | {row['compression']} | {label}{flag} | {r['records_per_s']:,} | "
                         f"{r['mb_per_s']} | {r['cpu_s_per_gb']} | {r['peak_rss_mb']} | {ratio} |")
            continue
        spread = _spread(r)
        versus_copy = f"{r['records_per_s'] / copy:.2f}" if copy and not label.startswith("limit") else ""
        end_to_end = f"{r['end_to_end_records_per_s']:,}" if r.get("end_to_end_records_per_s") else ""
        lines.append(f"| {_workload(row)} | {row['compression']} | {label}{flag} | {r['records_per_s']:,} | {spread} | "
                     f"{r.get('window_s', '')} | {r.get('first_record_s', '')} | {end_to_end} | {r['cpu_s_per_gb']} | "
                     f"{r['peak_rss_mb']} | {versus_copy} | {ratio} |")
    return lines


def _spread(result: dict) -> str:
    """A row's lowest and highest run, as ``low–high``."""
    return "–".join(f"{v:,}" for v in result["spread"]) if result.get("spread") else ""


def _pinned(row: dict, title: str) -> list:
    """Streams where the mirror has a core of its own."""
    lines = ["", f"### Streams with a core of their own, on {title} ({_workload(row)}, {row['compression']})", "",
             "Both brokers pinned to core 0 (taskset, every thread), the copy loop and the mirror to core 1: what "
             "more streams give a mirror that does not share its core with the brokers. Timed as the table above.",
             "", "| Run | records/s | spread | window s | CPU s/GB | against one stream |", "|---|---|---|---|---|---|"]
    one = row["results"].get("mirror, --num.streams 1", {}).get("records_per_s")
    for label, r in row["results"].items():
        spread = _spread(r)
        against = f"{r['records_per_s'] / one:.2f}" if one and label.startswith("mirror") else ""
        lines.append(f"| {label}{'' if r['ok'] else ' (failed)'} | {r['records_per_s']:,} | {spread} | "
                     f"{r.get('window_s', '')} | {r['cpu_s_per_gb']} | {against} |")
    return lines


def _raw_goal(row: dict, title: str) -> list:
    """Raw mode's goal row, long run: against record mode and the target's ingest limit."""
    results = row["results"]
    lines = ["", f"### Raw mode's goal row, long run, on {title} ({_workload(row)}, {row['compression']})", "",
             "The issue's goal for `--use.raw.bytes` at 100 B lz4: at least 3x record mode's records/s, at most "
             "1/5 of its CPU s/GB, at least 0.9 of the target's ingest limit. Enough records for raw mode's rate to "
             "be timed over seconds; the limit is timed over its own loop, so \"once flowing\" is the like-for-like "
             "ratio.", "",
             "| Run | records/s | CPU s/GB | Peak RSS MB | first record s | records/s after it |", "|---|---|---|---|---|---|"]
    for label, r in results.items():
        lines.append(f"| {label}{'' if r['ok'] else ' (failed)'} | {r['records_per_s']:,} | {r['cpu_s_per_gb']} | "
                     f"{r['peak_rss_mb']} | {r.get('first_record_s', '')} | "
                     f"{format(r['records_per_s_after_first'], ',') if r.get('records_per_s_after_first') else ''} |")
    ratios = raw_goal_ratios(results)
    if ratios is not None:
        lines += ["", f"Raw mode: {ratios['speed']:.1f}x record mode's records/s for {ratios['cpu']:.2f} of its "
                  f"CPU s/GB; {ratios['ingest']:.2f} of the ingest limit."]
    return lines


def _dedicated(row: dict, title: str) -> list:
    """MirrorMaker 2's dedicated mode: the same mm2.properties run by both tools."""
    lines = ["", f"### Dedicated mode on {title} ({_workload(row)}, {row['compression']})", "",
             "One mm2.properties with two flows, source->target and target->source, half the records each way, "
             "MirrorMaker 2's defaults (offset syncs, checkpoints, heartbeats, syncs), tasks.max 1: "
             "`connect-mirror-maker mm2.properties` against Kafka's MirrorMaker 2 dedicated mode, timed as the "
             "table above over both remote topics (records/s over the window, or from the first record on).", "",
             "| Run | records/s | spread | window s | CPU s/GB | Peak RSS MB | start-up s | stop s |",
             "|---|---|---|---|---|---|---|---|"]
    for label, r in row["results"].items():
        rate = r.get("records_per_s_after_first") or r["records_per_s"]
        spread = _spread(r)
        lines.append(f"| {label}{'' if r['ok'] else ' (failed)'} | {rate:,} | {spread} | {r.get('window_s', '')} | "
                     f"{r['cpu_s_per_gb']} | {r['peak_rss_mb']} | {r.get('first_record_s', '')} | "
                     f"{r.get('stop_s', '')} |")
    return lines


def _record_path(rows: list, title: str) -> list:
    """Raw mode where its record path takes the batches, against record mode on the same records."""
    lines = ["", f"### Raw mode's record path on {title}", "",
             "Sources whose batches raw mode cannot forward as they are: every batch of a LogAppendTime topic, and "
             "a compacted topic's batches with offset holes (seeded with half as many random keys as records, "
             "mirrored once the log cleaner is done: the records it kept). Timed as every run on this broker.", "",
             "| Source | Records | Compression | Run | records/s | CPU s/GB | Peak RSS MB | first record s |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        kept = f"{row['records']:,} of {row['seeded']:,}" if row["records"] != row["seeded"] else f"{row['records']:,}"
        for label, r in row["results"].items():
            lines.append(f"| {row['source']} | {kept} x {row['record_bytes']} B | {row['compression']} | {label}"
                         f"{'' if r['ok'] else ' (failed)'} | {r['records_per_s']:,} | {r['cpu_s_per_gb']} | "
                         f"{r['peak_rss_mb']} | {r.get('first_record_s', '')} |")
        record = row["results"].get("mirror, --num.streams 1")
        raw = row["results"].get("mirror --use.raw.bytes, --num.streams 1")
        if record and raw:
            lines.append(f"| {row['source']} | | | raw mode against record mode | "
                         f"{raw['records_per_s'] / record['records_per_s']:.2f}x | "
                         f"{raw['cpu_s_per_gb'] / record['cpu_s_per_gb']:.2f}x | | |")
    return lines


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [f"# Mirror benchmark, {m['date']} (commit {m['commit']})", "",
             f"{m['cores']} cores, Python {m['python']}, librdkafka {m['librdkafka']}, {m['machine']}; "
             f"medians of {report['runs']} runs; {report.get('partitions', 8)} partitions; brokers and tools on "
             f"the same machine; our package byte-compiled first, as pip install does; "
             f"{report['minutes']} minutes in all.", ""]
    for kind, section in report["brokers"].items():
        lines += _table(kind, section, m)
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [kind for kind, section in report["brokers"].items() if section["workloads"]]
    fig, axes = plt.subplots(len(kinds), 1, figsize=(13, 5.5 * len(kinds)), squeeze=False)
    for ax, kind in zip(axes[:, 0], kinds):
        rows = report["brokers"][kind]["workloads"]
        labels = list(rows[0]["results"].keys())
        width = 0.85 / len(labels)
        for i, label in enumerate(labels):
            values = [row["results"].get(label, {}).get("mb_per_s", 0) for row in rows]
            ax.bar([x + i * width for x in range(len(rows))], values, width, label=label)
        ax.set_xticks([x + 0.425 - width / 2 for x in range(len(rows))])
        ax.set_xticklabels([f"{r['record_bytes']} B\n{r['compression']}" for r in rows])
        ax.set_ylabel("MB/s (median)")
        ax.set_title(f"{TITLES.get(kind, kind)}: mirror throughput vs the client's limits and peers")
        ax.legend(fontsize=7, ncol=3)
    m = report["machine"]
    fig.suptitle(f"{m['cores']} cores, commit {m['commit']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


#: The headline row of history.md: records/s of one workload on Apache Kafka, per tool.
HEADLINE_WORKLOAD = (100, "lz4")
HEADLINE_RUNS = (("record ×1", "mirror, --num.streams 1"), ("raw", "mirror --use.raw.bytes, --num.streams 1"),
                 ("exactly-once", "mirror --exactly.once, --num.streams 1"),
                 ("MirrorMaker v1 ×1", "Kafka MirrorMaker v1, --num.streams 1"),
                 ("MirrorMaker 2 ×1", "Kafka MirrorMaker 2, tasks.max 1"))
HISTORY_HEADER = ("| Date | Commit | Run | Workload | " + " | ".join(name for name, _ in HEADLINE_RUNS)
                  + " | Notes |\n|" + "---|" * (len(HEADLINE_RUNS) + 5) + "\n")


def history_row(report: dict, run: str = "full", notes: str = "") -> str:
    """One line of history.md: the headline workload's records/s per tool (the first Kafka workload
    where the run has no 100 B lz4 one, Tansu's where it has no Kafka one)."""
    m, brokers = report["machine"], report.get("brokers") or {"tansu": {"workloads": report.get("workloads", [])}}
    kind = "kafka" if brokers.get("kafka", {}).get("workloads") else next(iter(brokers))
    rows = brokers[kind].get("workloads", [])
    row = next((r for r in rows if (r["record_bytes"], r["compression"]) == HEADLINE_WORKLOAD), rows[0] if rows else None)
    cells, workload = [], ""
    if row is not None:
        workload = f"{TITLES.get(kind, kind).split(' (')[0]}, {_workload(row)} ({row['compression']})"
        cells = [f"{row['results'][label]['records_per_s']:,}" if label in row["results"] else ""
                 for _name, label in HEADLINE_RUNS]
    else:
        cells = [""] * len(HEADLINE_RUNS)
    return "| " + " | ".join([m["date"], m["commit"], f"{run}, {report['minutes']} min", workload, *cells,
                              notes]) + " |"


def write_report(report: dict, folder: Path, partial: bool = False):
    """``latest.*``, and a row of history.md. A partial run (some rows, sizes or brokers) goes to
    ``partial/`` (not kept in the repository) and leaves both alone."""
    if partial:
        folder = folder / "partial"
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / ("latest" if not partial else report["machine"]["date"] + time.strftime("-%H%M"))
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md"), stem.with_suffix(".png")]
    paths[0].write_text(json.dumps(report, indent=2, default=str) + "\n")
    paths[1].write_text(markdown(report))
    if any(section["workloads"] for section in report["brokers"].values()):
        plot(report, paths[2])
    else:  # only the raw goal or record path sections: nothing for the chart
        paths.pop()
    if not partial:
        history = folder / "history.md"
        text = history.read_text() if history.exists() else "# Benchmark history\n\n" + HISTORY_HEADER
        history.write_text(text.rstrip("\n") + "\n" + history_row(report) + "\n")
        paths.append(history)
    return paths
