"""Report of ``adaptstream bench reliability``: chaos, backlog and soak of one invocation, every verdict computed
here.

Targets, fixed before any run was recorded (issue #57: "0 rows lost and 0 duplicated over every chaos trial";
"soak: RSS, descriptors and threads within 10 % of their value after warm-up"; "a 10x backlog on every connector
with peak memory"):

* chaos, per kind: the rule of ``chaos_report`` (every restart drains, output == batch SQL, 0 lost / duplicated /
  wrong; met only when a trial of the kind was really killed and none was skipped);
* backlog, per connector: both drains (1x and 10x the cap) exit 0 with 0 rows lost and 0 extra, the 10x drain
  takes at least 10 batches with rows (the cap held), and the peak resident memory of the Python side (source
  runner + Python workers, each role's peak, summed) at 10x is at most 1.25x the peak at 1x. Missed on any breach;
  undecided when a drain of the connector is missing;
* soak, per role and measure: the rule of ``soak_report`` (median of the last minute at most 1.10x the median of
  the minute after the warm-up).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adaptstream_bench import chaos_report, soak_report
from adaptstream_bench.meta import describe, rerender, verdict_table, write_report_files

NAME = "reliability"
PEAK_GROWTH = 1.25
PYTHON_ROLES = ("source", "workers")


def python_peak(row: dict) -> int:
    return sum(int(row["peak_rss_mb"][r]) for r in PYTHON_ROLES)


def backlog_targets(drains: list[dict]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for connector in dict.fromkeys(d["connector"] for d in drains):
        by_size = {d["size"]: d for d in drains if d["connector"] == connector}
        one, ten = by_size.get(1), by_size.get(10)
        target = f"backlog {connector}: 10x the cap drains whole, in capped batches, Python peak RSS <= 1.25x of 1x"
        rule = "both drains exit 0, 0 lost, 0 extra; 10x: >= 10 batches with rows; (source + workers) peak ratio"
        if one is None or ten is None:
            out.append({"target": target, "rule": rule, "measured": "a drain is missing", "met": None})
            continue
        ratio = python_peak(ten) / max(python_peak(one), 1)
        breaches = [f"{s}x exit {d['exit_status']}" for s, d in ((1, one), (10, ten)) if d["exit_status"] != 0] + [
            f"{s}x lost {d['lost']} extra {d['extra']}" for s, d in ((1, one), (10, ten)) if d["lost"] or d["extra"]
        ]
        if (ten.get("batches") or 0) < 10:
            breaches.append(f"10x in {ten.get('batches')} batches")
        if ratio > PEAK_GROWTH:
            breaches.append(f"peak ratio {ratio:.2f}")
        measured = (
            f"{ten['expected']} rows in {ten.get('batches')} batches; Python peak {python_peak(one)} MB at 1x, "
            f"{python_peak(ten)} MB at 10x ({ratio:.2f}x)" + (f"; {', '.join(breaches)}" if breaches else "")
        )
        out.append({"target": target, "rule": rule, "measured": measured, "met": not breaches})
    return out


def targets(data: dict) -> list[dict[str, Any]]:
    chaos = [{**t, "target": "chaos " + t["target"]} for t in chaos_report.targets(data["chaos"])]
    soak = [{**t, "target": "soak: " + t["target"]} for t in soak_report.targets(data["soak"])] if data["soak"].get(
        "samples"
    ) else []  # fmt: skip
    return chaos + backlog_targets(data["backlog"].get("drains", [])) + soak


def _backlog_lines(drains: list[dict]) -> list[str]:
    lines = [
        "| connector | input | rows | batches with rows | exit | s | lost | extra | peak RSS MB: driver | jvm | "
        "source | workers |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in drains:
        p = d["peak_rss_mb"]
        lines.append(
            f"| {d['connector']} | {d['size']}x the cap ({d['rows_per_cap']} rows) | {d['expected']} | "
            f"{d.get('batches')} | {d['exit_status']} | {d['seconds']:.0f} | {d['lost']} | {d['extra']} | "
            f"{p['driver']} | {p['jvm']} | {p['source']} | {p['workers']} |"
        )
    lines += [f"- {d['connector']} {d['size']}x failed: `{d['error'][-300:]}`" for d in drains if d.get("error")]
    return lines


def _controller_lines(trials: list[dict]) -> list[str]:
    rows = [t for t in trials if "scheduler_state" in t]
    if not rows:
        return []
    lines = ["", "Scheduler state after the controller kind's restarts (Klink's state saved by `state_path`):", ""]
    for t in rows:
        s = t["scheduler_state"]
        saved = "yes" if s["saved_before_restart"] else "no"
        lines.append(
            f"- trial {t['trial'] + 1}: a saved state before the restart: {saved};"
            f" the restart restored the state saved at batch count: {s['restored_offset']}"
        )
    return lines


def markdown(data: dict) -> str:
    m = data["meta"]
    doc = (__doc__ or "").split("):", 1)[1].strip()
    lines = [
        "# Reliability: chaos, backlog and soak in one invocation (issue #57 item 6)",
        "",
        describe(m),
        "",
        "Targets, fixed in code before the run:",
        "",
        doc,
        "",
        "## Targets",
        "",
        *verdict_table(data["targets"]),
        "",
        "## Chaos: kill -9 at random moments, then restart",
        "",
        f"Set-up: {m['sizing']['chaos']}",
        "",
        "What each kind kills:",
        "",
        chaos_report.kinds_text(),
        "",
        *chaos_report.trial_lines(data["chaos"]),
        *_controller_lines(data["chaos"]["trials"]),
        "",
        "## Backlog: ten times the per-batch cap, every connector",
        "",
        f"Set-up: {m['sizing']['backlog']}",
        "",
        *_backlog_lines(data["backlog"].get("drains", [])),
        "",
        "## Soak: one query at a steady rate",
        "",
        f"Set-up: {m['sizing']['soak']}",
        "",
        f"What is sampled: {m.get('sampled', 'not recorded')}",
        "",
        f"Samples: {len(data['soak'].get('samples', []))}; the run's exit status: "
        f"{data['soak']['meta'].get('exit_status', 'not run or still running')}.",
        "",
        f"![chaos kill moments, backlog peaks, soak over time]({NAME}.png)",
        "",
    ]
    return "\n".join(lines)


def _plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    chaos_report.draw(axes[0], data["chaos"])
    drains = data["backlog"].get("drains", [])
    conns = list(dict.fromkeys(d["connector"] for d in drains))
    for j, size in enumerate((1, 10)):
        ys = [next((python_peak(d) for d in drains if d["connector"] == c and d["size"] == size), 0) for c in conns]
        axes[1].bar([i + 0.4 * j for i in range(len(conns))], ys, width=0.4, label=f"{size}x the cap")
    axes[1].set_xticks([i + 0.2 for i in range(len(conns))], conns)
    axes[1].set_ylabel("peak RSS, source + Python workers (MB)")
    axes[1].legend(fontsize=8)
    soak_report.draw(axes[2], data["soak"].get("samples", []), "rss_mb")
    axes[2].set_xlabel("soak minutes")
    axes[2].set_ylabel("RSS (MB)")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(data: dict, target: Path) -> Path:
    return write_report_files(data, target, NAME, targets, markdown, _plot)


if __name__ == "__main__":  # pragma: no cover
    rerender(NAME, write_report)
