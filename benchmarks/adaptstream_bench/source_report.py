"""Report of ``adaptstream bench source``: Markdown + PNG from the recorded JSON (and only from it).

``python -m adaptstream_bench.source_report DIR`` rebuilds source.md and source.png from DIR/source.json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from adaptstream_bench.meta import dirty_note
from adaptstream_bench.source import PATHS, QUERIES, median


def targets(r: dict) -> list[tuple[str, str, str, bool | None]]:
    """(target, rule, measured, met) — each verdict computed here from the recorded figures."""
    out: list[tuple[str, str, str, bool | None]] = []
    ratios = {
        q: median(r["local"][q]["adaptstream"], "rows_per_s") / median(r["local"][q]["spark-csv"], "rows_per_s")
        for q in QUERIES
    }
    out.append(
        (
            "adaptstream / Spark CSV source >= 1.0 on both queries",
            "median rows/s of adaptstream (executor reads) / median rows/s of Spark's CSV source, per query",
            ", ".join(f"{q} {v:.2f}x" for q, v in ratios.items()),
            all(v >= 1.0 for v in ratios.values()),
        )
    )
    cpu = {
        q: median(r["local"][q]["adaptstream"], "source_cpu_us_per_row")
        / median(r["local"][q]["adaptstream-driver"], "source_cpu_us_per_row")
        for q in QUERIES
    }
    out.append(
        (
            "driver-side CPU per row <= 10 % of the driver-parse path",
            "source-process CPU per row, executor reads / readOn=driver (the path before this change)",
            ", ".join(f"{q} {100 * v:.1f} %" for q, v in cpu.items()),
            all(v <= 0.10 for v in cpu.values()),
        )
    )
    b = r["backlog"]["adaptstream"]
    out.append(
        (
            "a 10x backlog is drained in batches within the cap, no loss",
            "largest batch bytes <= maxBytesPerTrigger and rows read == rows written",
            f"largest batch {b.get('max_batch_bytes', 0) / 2**20:.1f} MiB of cap {b['cap_bytes'] / 2**20:.1f} MiB,"
            f" lost {b['lost_rows']}, peak worker RSS {b['peak_worker_rss_mb']:.0f} MB",
            b.get("max_batch_bytes", 0) <= b["cap_bytes"] and b["lost_rows"] == 0,
        )
    )
    c = r.get("cluster") or {}
    if "1" in c and "2" in c:
        one, two = (median(c[n]["adaptstream"], "rows_per_s") for n in ("1", "2"))
        out.append(
            (
                "on the standalone cluster, throughput grows with workers",
                "median rows/s with 2 workers / with 1 worker > 1.1 (adaptstream, filter)",
                f"{two / one:.2f}x ({one:,.0f} -> {two:,.0f} rows/s)",
                two / one > 1.1,
            )
        )
    else:
        out.append(
            (
                "on the standalone cluster, throughput grows with workers",
                "needs runs with 1 and 2 workers",
                "not run",
                None,
            )
        )
    return out


def _table(r: dict) -> list[str]:
    lines = [
        "| query | path | rows/s (median) | runs | ratio to Spark CSV | source CPU µs/row |",
        "|---|---|---|---|---|---|",
    ]
    for q in QUERIES:
        base = median(r["local"][q]["spark-csv"], "rows_per_s")
        for p in PATHS:
            runs = r["local"][q][p]
            v = median(runs, "rows_per_s")
            cpu = median(runs, "source_cpu_us_per_row")
            cells = ", ".join(f"{x['rows_per_s']:,.0f}" for x in runs)
            lines.append(
                f"| {q} | {p} | {v:,.0f} | {cells} | {v / base:.2f}x | {'-' if cpu != cpu else f'{cpu:.2f}'} |"
            )
    return lines


def _phases(r: dict) -> list[str]:
    """Start-up and batch time per path, for runs that recorded them (later than the 2026-12-06 recording)."""
    if not any("batch_s" in x for q in QUERIES for p in PATHS for x in r["local"][q][p]):
        return ["(This run did not record where the time went: `bench source` records start-up and batch time "
                "per drain since 2026-12-06, after this run.)"]  # fmt: skip
    lines = [
        "| query | path | wall s (median) | start to first batch s | batches' own time s (Spark's triggerExecution) |",
        "|---|---|---|---|---|",
    ]
    for q in QUERIES:
        for p in PATHS:
            runs = r["local"][q][p]
            wall, first, own = (median(runs, k) for k in ("wall_s", "to_first_batch_s", "batch_s"))
            lines.append(f"| {q} | {p} | {wall:.2f} | {first:.2f} | {own:.2f} |")
    return lines


def _cluster(r: dict) -> list[str]:
    c = r.get("cluster") or {}
    if not c:
        return ["Not run in this invocation."]
    lines = [
        "| workers | path | rows/s (median) | runs | driver JVM CPU s (median) | source CPU µs/row |",
        "|---|---|---|---|---|---|",
    ]
    for n, runs in c.items():
        for p, rs in runs.items():
            cpu = median(rs, "source_cpu_us_per_row")
            cells = ", ".join(f"{x['rows_per_s']:,.0f}" for x in rs)
            lines.append(
                f"| {n} | {p} | {median(rs, 'rows_per_s'):,.0f} | {cells} | "
                f"{median(rs, 'driver_jvm_cpu_s'):.1f} | {'-' if cpu != cpu else f'{cpu:.2f}'} |"
            )
    return lines


def _plot(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if r.get("cluster") else 1, figsize=(11 if r.get("cluster") else 6, 4), squeeze=False)
    ax = axes[0][0]
    width = 0.27
    for k, p in enumerate(PATHS):
        vals = [median(r["local"][q][p], "rows_per_s") / 1e3 for q in QUERIES]
        ax.bar([i + (k - 1) * width for i in range(len(QUERIES))], vals, width, label=p)
    ax.set_xticks(range(len(QUERIES)), QUERIES)
    ax.set_ylabel("thousand rows/s (median)")
    ax.set_title("local[2]: drain one CSV directory")
    ax.legend()
    if r.get("cluster"):
        ax2 = axes[0][1]
        ns = sorted(r["cluster"], key=int)
        for p in ("spark-csv", "adaptstream"):
            ax2.plot([int(n) for n in ns], [median(r["cluster"][n][p], "rows_per_s") / 1e3 for n in ns], "o-", label=p)
        ax2.set_xticks([int(n) for n in ns])
        ax2.set_ylim(bottom=0)
        ax2.set_xlabel("standalone workers (1 core each)")
        ax2.set_ylabel("thousand rows/s (median)")
        ax2.set_title("filter on a standalone cluster")
        ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(r: dict, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    # the verdicts travel in the JSON too, computed from its figures (rebuilding recomputes the same list)
    r = {**r, "targets": [{"target": t, "rule": rule, "measured": m, "met": ok} for t, rule, m, ok in targets(r)]}
    (target / "source.json").write_text(json.dumps(r, indent=1, default=float) + "\n")
    _plot(r, target / "source.png")
    m = r["meta"]
    b = r["backlog"]
    verdict = {True: "met", False: "missed", None: "not measured"}
    lines = [
        "# Input path: adaptstream's source vs Spark's CSV file source",
        "",
        f"Recorded run: `{m['command']}` at git `{m['git']}`{dirty_note(m)} "
        f"on {m['machine']['host']} ({m['machine']['cpus']} cores),"
        f" {time.strftime('%Y-%m-%d %H:%M', time.localtime(m['started']))}; load average before"
        f" {m['load_before'][0]:.2f} / after {m['load_after'][0]:.2f} (other work may share the machine: compare"
        " within this run only). Figures: `source.json` beside this file; this page and `source.png` are rebuilt from"
        " it with `python -m adaptstream_bench.source_report DIR`.",
        "",
        f"Data: {m['rows']:,} Linear Road rows in {m['files']} CSV files ({m['data_bytes'] / 2**20:.0f} MiB). Each run"
        " drains the directory with `Trigger.AvailableNow`, 10 files per micro-batch, into a noop sink. Paths:"
        ' `spark-csv` = `spark.readStream.csv`; `adaptstream` = `format("adaptstream")`, executors read and parse'
        " (the default); `adaptstream-driver` = `readOn=driver`, rows parsed beside the driver and shipped inside the"
        f" partitions (how every row travelled before). One warm-up per path, then {m['reps']} runs alternating order."
        " Queries: `filter` = `Spd >= 0`; `window` = 30 s / 10 s sliding average speed per expressway.",
        "",
        "## Targets",
        "",
        "| target | rule | measured | verdict |",
        "|---|---|---|---|",
        *[f"| {t} | {rule} | {meas} | {verdict[ok]} |" for t, rule, meas, ok in targets(r)],
        "",
        "## Throughput on local[2]",
        "",
        *_table(r),
        "",
        "Source CPU = CPU seconds of the long-lived Python process that runs the source (planning, accounting and,"
        " for `readOn=driver`, parsing), per row, from the first to the last batch.",
        "",
        "Where the time goes (shown, not judged): a drain's wall time is the query's start-up (from `start()` to its "
        "first batch; for a Python data source Spark starts the source's Python process, which imports PySpark, "
        "pyarrow and adaptstream) plus the batches' own time.",
        "",
        *_phases(r),
        "",
        "## Backlog of ten times the per-batch cap",
        "",
        "| path | cap MiB | batches | largest batch MiB | rows | lost | peak one Python process MB | peak all MB |",
        "|---|---|---|---|---|---|---|---|",
        *[
            f"| {p} | {x['cap_bytes'] / 2**20:.1f} | {x['batches']} | {x.get('max_batch_bytes', 0) / 2**20:.1f} |"
            f" {x['rows']:,} | {x['lost_rows']} | {x['peak_worker_rss_mb']:.0f} | {x['peak_all_workers_rss_mb']:.0f} |"
            for p, x in b.items()
        ],
        "",
        "Python processes sampled every 50 ms: Spark's Python workers, their daemon and the source process.",
        "",
        "## Standalone cluster (scripts/cluster.sh, workers of 1 core on this machine)",
        "",
        *_cluster(r),
        "",
        "![throughput](source.png)",
        "",
    ]
    (target / "source.md").write_text("\n".join(lines))


if __name__ == "__main__":
    run_dir = Path(sys.argv[1])
    write_report(json.loads((run_dir / "source.json").read_text()), run_dir)
