"""Turns a benchmark run into results/<date>.json, results/<date>.md and results/<date>.png
(also copied to results/latest.*, which the README shows)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [f"# Mirror benchmark, {m['date']} (commit {m['commit']})", "",
             f"{m['cores']} cores, Python {m['python']}, librdkafka {m['librdkafka']}, "
             f"{m['machine']}; medians of {report['runs']} runs; embedded brokers (Tansu) on the same "
             f"machine; {report['minutes']} minutes in all.", "",
             "Limits are the client's own loop (no interpreter start); the mirror and the peers are "
             "measured end to end, from process start (group join included) until every record is on "
             "the target and the process has exited.", "",
             "| Workload | Compression | Run | records/s | MB/s | CPU s/GB | Peak RSS MB | vs slower limit |",
             "|---|---|---|---|---|---|---|---|"]
    for row in report["workloads"]:
        results = row["results"]
        limit = min(results["limit: produce only"]["records_per_s"], results["limit: consume only"]["records_per_s"])
        for label, r in results.items():
            ratio = "" if label.startswith("limit") else f"{r['records_per_s'] / limit:.2f}"
            flag = "" if r["ok"] else " (failed)"
            lines.append(f"| {row['record_bytes']} B x {row['records']:,} | {row['compression']} | {label}{flag} | "
                         f"{r['records_per_s']:,} | {r['mb_per_s']} | {r['cpu_s_per_gb']} | {r['peak_rss_mb']} | {ratio} |")
    spark = [(row, label, r) for row in report["workloads"] for label, r in row["results"].items()
             if "startup_s" in r]
    if spark:
        lines += ["", "## Spark mode (local mode, one JVM and one Python process per stream)", "",
                  "End to end includes the cold start: the JVM, the SparkContext and pyspark's worker "
                  "daemon, until the first worker runs. CPU and RSS are summed over the whole process "
                  "tree (driver, JVM, workers).", "",
                  "| Workload | Compression | Run | records/s end to end | cold start s | records/s after it |"
                  " CPU s/GB | Peak RSS MB (tree) |", "|---|---|---|---|---|---|---|---|"]
        for row, label, r in spark:
            lines.append(f"| {row['record_bytes']} B x {row['records']:,} | {row['compression']} | {label} | "
                         f"{r['records_per_s']:,} | {r['startup_s']} | {r['records_per_s_after_start']:,} | "
                         f"{r['cpu_s_per_gb']} | {r['peak_rss_mb']} |")
    if report.get("growth"):
        lines += ["", "## Cost growth (1 KB records, 40,000 in all, --num.streams 1, one run each)", "",
                  "| Axis | Value | records/s | seconds | Peak RSS MB |", "|---|---|---|---|---|"]
        for g in report["growth"]:
            lines.append(f"| {g['axis']} | {g['value']} | {g['records_per_s']:,} | {g['seconds']} | {g['peak_rss_mb']} |")
    if report.get("profile"):
        lines += ["", "## Where the time goes (100 B records, py-spy self time)", "",
                  "| % of samples | Function |", "|---|---|"]
        lines += [f"| {p['percent']} | `{p['function']}` |" for p in report["profile"]]
    return "\n".join(lines) + "\n"


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["workloads"]
    labels = list(rows[0]["results"].keys())
    fig, ax = plt.subplots(figsize=(12, 5.5))
    width = 0.8 / len(labels)
    for i, label in enumerate(labels):
        values = [row["results"].get(label, {}).get("mb_per_s", 0) for row in rows]
        ax.bar([x + i * width for x in range(len(rows))], values, width, label=label)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))])
    ax.set_xticklabels([f"{r['record_bytes']} B\n{r['compression']}" for r in rows])
    ax.set_ylabel("MB/s (median)")
    m = report["machine"]
    ax.set_title(f"Mirror throughput vs the Python client's limits and peers ({m['cores']} cores, commit {m['commit']})")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: dict, folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / report["machine"]["date"]
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md"), stem.with_suffix(".png")]
    paths[0].write_text(json.dumps(report, indent=2, default=str) + "\n")
    paths[1].write_text(markdown(report))
    plot(report, paths[2])
    for path in paths:
        shutil.copyfile(path, folder / f"latest{path.suffix}")
    return paths
