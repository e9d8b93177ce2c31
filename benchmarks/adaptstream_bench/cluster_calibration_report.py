"""Report of ``adaptstream bench cluster-calibration``: Markdown + PNG from the recorded JSON (and only from it).

``python -m adaptstream_bench.cluster_calibration_report DIR`` rebuilds the Markdown, the plot and the targets from
the JSON in DIR.

The rule, fixed here before the first run (issue #56 item 1; suggested in the session-38 note): at every executor
count k >= 2 whose quotas fit the machine's cores after the driver's share (k x PCT <= (cores - 0.5) x 100), the
speed-up over one executor is at least 0.7 x k. Speed-up = median rows/s at k / median rows/s at 1. Undecided when
the threshold lies inside the repeats' spread (lowest at k / highest at 1 .. highest at k / lowest at 1), or when a
count has no completed drain.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from adaptstream_bench.meta import describe, targets_table

NAME = "cluster_calibration"
EFFICIENCY = 0.7  # speed-up at k executors >= EFFICIENCY x k
DRIVER_CORES = 0.5  # cores left to the driver, its source process and the daemons: not judged beyond


def _rates(point: dict | None) -> list[float]:
    return [r["rows_per_s"] for r in point["runs"]] if point else []


def judged(k: int, cpu_pct: float, cores: int) -> bool:
    """Whether the rule judges k executors: k >= 2 and their quotas fit the cores after the driver's share."""
    return k >= 2 and k * cpu_pct <= (cores - DRIVER_CORES) * 100 + 1e-9


def speedup(one: list[float], k: list[float]) -> dict[str, float] | None:
    """Median speed-up and its spread bounds from the repeats; None when either side has no drain."""
    if not one or not k:
        return None
    return {
        "value": statistics.median(k) / statistics.median(one),
        "low": min(k) / max(one),
        "high": max(k) / min(one),
    }


def targets(r: dict) -> list[dict[str, Any]]:
    """One verdict per judged executor count, computed from the recorded drains by the module's rule."""
    c, cores = r["meta"]["config"], r["meta"]["machine"]["cpus"]
    by_k = {p["executors"]: p for p in r["points"]}
    out = []
    for k in range(2, c["workers"] + 1):
        if not judged(k, c["cpu_pct"], cores):
            continue
        threshold = EFFICIENCY * k
        s = speedup(_rates(by_k.get(1)), _rates(by_k.get(k)))
        if s is None:
            met, value, measured = None, None, "not run (no completed drain at 1 or at k executors)"
        else:
            met = True if s["low"] >= threshold else False if s["high"] < threshold else None
            value = s["value"]
            measured = f"{s['value']:.2f}x (repeats' spread {s['low']:.2f}-{s['high']:.2f}x)"
        out.append(
            {
                "target": f"speed-up at {k} executors >= {EFFICIENCY:g} x {k}",
                "rule": f"median rows/s at {k} / at 1 executor; undecided when {threshold:.2f} lies within the "
                "repeats' spread",
                "value": value,
                "threshold": threshold,
                "measured": measured,
                "met": met,
            }
        )
    return out


def _curve_table(r: dict) -> list[str]:
    c, cores = r["meta"]["config"], r["meta"]["machine"]["cpus"]
    one = _rates(next((p for p in r["points"] if p["executors"] == 1), None))
    lines = [
        "| executors | quota (cores) | rows/s (median) | repeats | speed-up | judged | worker CPU µs/row | "
        "throttled s (median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in sorted(r["points"], key=lambda p: p["executors"]):
        k, rates = p["executors"], _rates(p)
        if not rates:
            continue
        s = speedup(one, rates)
        cpu = [1e6 * x["worker_cpu_s"] / max(x["rows"], 1) for x in p["runs"]]
        sp = "-" if s is None else f"{s['value']:.2f}x"
        lines.append(
            f"| {k} | {k * c['cpu_pct'] / 100:.2f} | {statistics.median(rates):,.0f} | "
            + ", ".join(f"{x:,.0f}" for x in rates)
            + f" | {sp} | "
            f"{'yes' if judged(k, c['cpu_pct'], cores) else 'no'} | {statistics.median(cpu):.1f} | "
            f"{statistics.median(x['throttled_s'] for x in p['runs']):.1f} |"
        )
    return lines


def _plot(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = sorted((p for p in r["points"] if p["runs"]), key=lambda p: p["executors"])
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    ks = [p["executors"] for p in pts]
    med = [statistics.median(_rates(p)) for p in pts]
    lo = [m - min(_rates(p)) for m, p in zip(med, pts, strict=True)]
    hi = [max(_rates(p)) - m for m, p in zip(med, pts, strict=True)]
    ax.errorbar(ks, med, yerr=[lo, hi], fmt="o-", capsize=3, label="measured (median, min-max)")
    one = next((m for k, m in zip(ks, med, strict=True) if k == 1), None)
    if one is not None:
        xs = list(range(1, r["meta"]["config"]["workers"] + 1))
        ax.plot(xs, [one * k for k in xs], "k--", lw=0.8, label="linear from 1 executor")
        ax.plot(xs, [EFFICIENCY * one * k for k in xs], "k:", lw=0.8, label=f"target ({EFFICIENCY:g} x linear)")
    ax.set_xlabel(f"executors ({r['meta']['config']['cpu_pct']:g} % of a core each)")
    ax.set_ylabel("rows/s")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(r: dict, target: Path) -> dict:
    """Write NAME.json (with its targets), NAME.png and NAME.md into ``target``; the document written."""
    target.mkdir(parents=True, exist_ok=True)
    doc = {**r, "targets": targets(r)}
    (target / f"{NAME}.json").write_text(json.dumps(doc, indent=1))
    _plot(doc, target / f"{NAME}.png")
    m, c = doc["meta"], doc["meta"]["config"]
    gone = [f"{x['repeats']} drain(s) at {x['executors']} executor(s): {x['why']}" for x in doc["missing"]]
    lines = [
        "# Capped-worker cluster: throughput against the executor count (issue #56)",
        "",
        describe(m),
        f"Set-up: `scripts/cluster.sh start {c['workers']} --cpu {c['cpu_pct']:g} --mem {c['mem_mb']}` (each worker, "
        f"its executor and their Python workers in one cgroup v1 with {c['cpu_pct']:g} % of one core); one Spark "
        f"application, one single-core executor per worker ({c['executor_memory']}); the driver is not capped. "
        f'Input: {c["rows"]:,} Linear Road rows in {c["files"]} CSV files, drained by `format("adaptstream")` '
        f"(executors read and parse) with `Trigger.AvailableNow` in one micro-batch of one task per file, query "
        f"`{c['query']}`, noop sink. After one unrecorded drain on all executors, the count goes down from "
        f"{c['workers']} to 1 (executors killed, none started cold) with {c['repeats']} drains at each.",
        "",
        "## Targets",
        "",
        f"Rule (fixed in code before the run): speed-up over one executor >= {EFFICIENCY:g} x k at every k >= 2 with "
        f"k x {c['cpu_pct']:g} % <= (cores - {DRIVER_CORES:g}) x 100 %; undecided when the threshold lies within "
        "the repeats' spread.",
        "",
        *targets_table([(t["target"], t["rule"], t["measured"], t["met"]) for t in doc["targets"]], "undecided"),
        "",
        "## Curve",
        "",
        "Worker CPU: CPU-seconds the workers' cgroups accounted during the drain (executors, their Python workers "
        "and the worker daemons), per input row. Throttled: seconds the kernel held the cgroups back for their "
        "quota, summed over workers.",
        "",
        *_curve_table(doc),
        "",
        *(["Not run: " + "; ".join(gone) + ".", ""] if gone else []),
        f"![throughput against executors]({NAME}.png)",
    ]
    (target / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    return doc


if __name__ == "__main__":
    d = Path(sys.argv[1])
    write_report(json.loads((d / f"{NAME}.json").read_text()), d)
