"""Side-by-side comparison of runs: a Markdown table, ratios against baselines, and plots."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from adaptstream.app.runner import RunResult
from adaptstream.metrics.plots import plot_timelines

COLUMNS = [  # header (short enough for an 80-column terminal), summary field, format
    ("avg lat s", "avg_latency", "{:.2f}"),
    ("p99 s", "p99_latency", "{:.2f}"),
    ("max s", "max_latency", "{:.2f}"),
    ("<=slide", "within_slide", "{:.0%}"),
    ("rows/s", "throughput", "{:.0f}"),
    ("batches", "batches", "{:d}"),
    ("rows/b", "avg_batch_rows", "{:.0f}"),
    ("sets", "datasets", "{:d}"),
]


LEGEND = (
    "avg lat / p99 / max: dataset latency (arrival to batch completion), seconds; <=slide: share of batches "
    "with MaxLat <= the window slide (sliding windows); rows/s: AvgThPut, rows per second of processing time "
    "(LMStream Eq. 4); rows/b: rows per micro-batch; sets: datasets counted; unfinished: datasets whose batch "
    "had not completed when the run gave up waiting."
)


def _fmt(fmt: str, v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return fmt.format(v)


def comparison_rows(results: Sequence[RunResult]) -> list[list[str]]:
    rows = []
    for r in results:
        d = r.summary.as_dict()
        row = [r.spec.workload, r.spec.admission] + [_fmt(f, d[key]) for _, key, f in COLUMNS]
        row.append(str(r.unfinished))
        rows.append(row)
    return rows


def markdown_table(results: Sequence[RunResult]) -> str:
    head = ["workload", "policy"] + [c for c, _, _ in COLUMNS] + ["unfinished"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in comparison_rows(results)]
    lines += ["", LEGEND]
    return "\n".join(lines)


def ratios(results: Sequence[RunResult], ours: str = "lmstream") -> dict[str, dict[str, float]]:
    """Per baseline: avg-latency reduction (1 - ours/base) and throughput ratio (ours/base), per workload."""
    by = {(r.spec.workload, r.spec.admission): r.summary for r in results}
    out: dict[str, dict[str, float]] = {}
    for (wl, pol), s in by.items():
        mine = by.get((wl, ours))
        if pol == ours or mine is None:
            continue
        out[f"{wl} vs {pol}"] = {
            "latency_reduction": 1 - mine.avg_latency / s.avg_latency if s.avg_latency else float("nan"),
            "throughput_ratio": mine.throughput / s.throughput if s.throughput else float("nan"),
        }
    return out


def ratio_lines(results: Sequence[RunResult]) -> list[str]:
    """Markdown table of lmstream's latency reduction and throughput ratio against each baseline."""
    rat = ratios(results)
    if not rat:
        return []
    lines = ["| comparison | avg-latency reduction (1 - lmstream/baseline) | throughput ratio |", "|---|---|---|"]
    lines += [f"| {k} | {v['latency_reduction']:.0%} | {v['throughput_ratio']:.2f}x |" for k, v in rat.items()]
    return [*lines, ""]


def timeline_lines(results: Sequence[RunResult], out_dir: str, suffix: str = "") -> list[str]:
    """One timeline PNG per workload (all policies in it); Markdown image lines."""
    lines = []
    for wl in dict.fromkeys(r.spec.workload for r in results):
        runs = {r.spec.admission: r.metrics_dir for r in results if r.spec.workload == wl}
        slide = next(r.slide for r in results if r.spec.workload == wl)
        png = plot_timelines(
            runs,
            os.path.join(out_dir, f"timeline-{wl}{suffix}.png"),
            f"{wl}{suffix.replace('-', ', ')}: max latency and rows per micro-batch",
            slide or None,
        )
        lines.append(f"![{wl} timeline]({os.path.basename(png)})")
    return lines


def write_comparison(results: Sequence[RunResult], out_dir: str, title: str) -> str:
    """Write comparison.md and one timeline PNG per workload into ``out_dir``; return the Markdown path."""
    os.makedirs(out_dir, exist_ok=True)
    parts = [f"# {title}", "", markdown_table(results), "", *ratio_lines(results), *timeline_lines(results, out_dir)]
    path = os.path.join(out_dir, "comparison.md")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")
    return path
