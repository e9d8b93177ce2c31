"""Partitioning benchmarks: every partitioner side by side on the same seeded data, one report each.

(a) `metrics`: Prompt Fig. 10 — BSI relative to hash and BCI relative to shuffle (plus KSR, Gamma) on SynD
    (Zipf sweep) and TPC-H / DEBS / GCM keys. Pure Python, no Spark.
(b) `cost`: holistic Table 4 / Fig. 13 and Prompt Fig. 14b — partitioner cost per tuple and memory, exact
    vs HyperLogLog, and Prompt's planning time at the cut with and without early batch release.
(c) `rate`: Prompt Fig. 11 — highest sustainable input rate (processing time <= batch interval) per
    partitioner, real Spark aggregating over the planned blocks (spark_blocks harness).
(d) `blocks`: holistic Fig. 5-7 — throughput vs number of blocks for TPC-H Q1/Q3, DEBS, GCM, with the
    aggregation load Gamma / N.
Reports (Markdown + PNG, with date and machine) go to docs/results/.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from adaptstream.partitioning import MAIN_NAMES, build_partitioner, key_hash
from adaptstream.partitioning.metrics import batch_report
from adaptstream.workloads.partition_workloads import (
    ZIPF_EXPONENTS,
    get_workload,
    synd,
    to_arrow,
    zipf_keys,
)

RESULTS = Path("docs/results")


def machine() -> str:
    return f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()})"


def header(title: str, command: str) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return (
        f"# {title}\n\nDate: {now}. Machine: {machine()}; load average at the start {load} (other processes "
        f"share the 2 cores).\nCommand: `{command}`.\n\n"
    )


def md_table(df: pd.DataFrame, floatfmt: str = "{:.3g}") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        cells = [floatfmt.format(v) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _warm(names: Sequence[str]) -> None:
    keys = zipf_keys(5000, 1.0, 500, seed=0)
    for n in names:
        build_partitioner(n).assign(keys, 4)  # numba compile outside the measurements


# ----------------------------------------------------------------------------------------- (a)
def dataset_keys(rows: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Key hashes of every dataset of the metric benchmark."""
    out = {f"SynD z={z}": zipf_keys(rows, z, 1_000_000, seed=seed) for z in ZIPF_EXPONENTS}
    for name in ("tpch-q1", "tpch-q3", "debs-routes", "gcm-q2"):
        w = get_workload(name)
        out[name] = key_hash(to_arrow(w.generate(rows, seed=seed)), list(w.key_columns))
    return out


def bench_metrics(
    rows: int = 200_000, num_blocks: int = 8, names: Sequence[str] = MAIN_NAMES, out_dir: Path = RESULTS
) -> Path:
    _warm(names)
    recs = []
    for ds, keys in dataset_keys(rows).items():
        reps = {n: batch_report(keys, build_partitioner(n).assign(keys, num_blocks), num_blocks) for n in names}
        # metrics count tuples / keys: a reference below 1 is floored at 1 so a ratio stays defined
        hash_bsi = max(reps["hash"]["bsi"], 1.0) if "hash" in reps else 1.0
        shuf_bci = max(reps["shuffle"]["bci"], 1.0) if "shuffle" in reps else 1.0
        for n, r in reps.items():
            recs.append(
                {
                    "dataset": ds,
                    "partitioner": n,
                    "BSI/hash": r["bsi"] / hash_bsi,
                    "BCI/shuffle": r["bci"] / shuf_bci,
                    "KSR": r["ksr"],
                    "Gamma/K": r["aggregation_cost"] / r["distinct_keys"],
                    "BSI": r["bsi"],
                    "BCI": r["bci"],
                    "distinct": r["distinct_keys"],
                }
            )
    df = pd.DataFrame(recs)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / "partitioning_metrics.png"
    _plot_metrics(df, png)
    md = out_dir / "partitioning_metrics.md"
    text = header(
        "Partitioning metrics (Prompt Fig. 10)",
        f"adaptstream partitioning bench metrics --rows {rows} --blocks {num_blocks}",
    )
    text += (
        f"{rows} rows per dataset, {num_blocks} blocks, one batch. BSI relative to hash and BCI relative "
        "to shuffle, as Prompt Sec. 7.2 reports them (0 = balanced; a reference below 1 counts as 1, "
        "e.g. shuffle's BCI on "
        "TPC-H where every block holds nearly every group). SynD draws from 1e6 possible keys. "
        "Pure Python, exact metrics over the planned blocks.\n\n"
    )
    text += _targets_metrics(df) + "\n![metrics](partitioning_metrics.png)\n\n" + md_table(df)
    md.write_text(text)
    return md


def _targets_metrics(df: pd.DataFrame) -> str:
    """Issue #3 targets: Prompt BSI within 10% of shuffle's and BCI within 10% of hash's."""
    lines = ["## Targets (issue #3)\n"]
    for ds, g in df.groupby("dataset", sort=False):
        g = g.set_index("partitioner")
        if not {"prompt", "shuffle", "hash"} <= set(g.index):
            continue
        p, s, h = g.loc["prompt"], g.loc["shuffle"], g.loc["hash"]
        bsi_ok = p["BSI"] <= s["BSI"] * 1.1 + 1.0  # +1 tuple: integer block sizes
        bci_ok = p["BCI"] <= h["BCI"] * 1.1 + 1.0
        lines.append(
            f"- {ds}: prompt BSI {p['BSI']:.1f} vs shuffle {s['BSI']:.1f} -> "
            f"{'met' if bsi_ok else 'MISSED'}; prompt BCI {p['BCI']:.1f} vs hash {h['BCI']:.1f} -> "
            f"{'met' if bci_ok else 'MISSED'} (KSR {p['KSR']:.3f})"
        )
    return "\n".join(lines) + "\n"


def _plot_metrics(df: pd.DataFrame, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    for ax, col in zip(axes, ["BSI/hash", "BCI/shuffle"], strict=True):
        piv = df.pivot(index="dataset", columns="partitioner", values=col)
        piv = piv[[c for c in df["partitioner"].unique()]].reindex(df["dataset"].unique())
        piv.plot.bar(ax=ax, width=0.85, legend=ax is axes[0])
        ax.set_ylabel(col)
        ax.set_yscale("symlog", linthresh=0.01)
    axes[0].legend(ncol=6, fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------------- (b)
def bench_cost(rows: int = 1_000_000, blocks: Sequence[int] = (8, 16, 32), out_dir: Path = RESULTS) -> Path:
    names = [*MAIN_NAMES, "cm-hll", "am-hll", "cam-hll", "lm-hll"]
    _warm(names)
    keys = zipf_keys(rows, 1.0, 1_000_000, seed=1)  # DEBS-Q1-like: many distinct keys (holistic Sec. 6.3)
    recs = []
    for p in blocks:
        for n in names:
            part = build_partitioner(n)
            t = time.perf_counter()
            part.assign(keys, p)
            dt = time.perf_counter() - t
            recs.append(
                {"blocks": p, "partitioner": n, "us/tuple": dt / rows * 1e6, "memory MB": part.memory_bytes() / 1e6}
            )
    df = pd.DataFrame(recs)
    prompt = _prompt_cut_costs(keys, 8)
    out_dir.mkdir(parents=True, exist_ok=True)
    _plot_cost(df, out_dir / "partitioning_cost.png")
    md = out_dir / "partitioning_cost.md"
    text = header(
        "Partitioner cost per tuple and memory (holistic Table 4, Fig. 13; Prompt Fig. 14b)",
        f"adaptstream partitioning bench cost --rows {rows}",
    )
    worst = df["us/tuple"].max()
    text += (
        f"{rows} SynD tuples (z=1.0, 1e6 possible keys, {len(np.unique(keys))} distinct) in one batch. "
        "Time = assign() wall time / rows (numba kernels, compiled before timing). Memory = bytes held by "
        "the partitioner's statistics after the batch (exact: key->block-bitmask table; HLL: 2^12 "
        "one-byte registers per block). Target <= 2 us/tuple: "
        f"{'met' if worst <= 2 else 'MISSED'} (worst {worst:.3f} us/tuple).\n\n"
        "![cost](partitioning_cost.png)\n\n"
    )
    text += md_table(
        df.pivot(index="partitioner", columns="blocks", values="us/tuple")
        .reset_index()
        .rename(columns=lambda c: f"us/tuple P={c}" if isinstance(c, int) else c)
    )
    text += "\n" + md_table(
        df.pivot(index="partitioner", columns="blocks", values="memory MB")
        .reset_index()
        .rename(columns=lambda c: f"MB P={c}" if isinstance(c, int) else c)
    )
    text += "\n## Prompt: work at the cut (early batch release)\n\n" + md_table(prompt, "{:.4g}")
    text += (
        "\nobserve = frequency-aware buffering while tuples arrive (Alg. 1, per tuple); release = B-BPFI "
        "plan from the buffered statistics before the heartbeat (hidden by early release); cut = what is "
        "left when the batch is cut (mapping rows to planned fragments). post-sort = no buffering "
        "statistics: exact counting, sorting and planning all at the cut (Prompt Fig. 14a).\n"
    )
    md.write_text(text)
    return md


def _prompt_cut_costs(keys: np.ndarray, p: int) -> pd.DataFrame:
    from adaptstream.partitioning.prompt import PromptPartitioner

    rows = len(keys)
    part = PromptPartitioner(batch_interval_s=1.0)
    part.assign(keys, p)  # a first batch: N_est, K_avg history; also the post-sort measurement
    post = part.decision_log()[-1]
    chunk = max(1, rows // 100)
    t = time.perf_counter()
    release_at = int(rows * 0.95)
    for lo in range(0, release_at, chunk):
        part.observe(keys[lo : min(lo + chunk, release_at)], now=lo / rows)
    obs = time.perf_counter() - t
    plan = part.release(p)
    part.observe(keys[release_at:], now=0.97)
    part.assign(keys, p)
    early = part.decision_log()[-1]
    return pd.DataFrame(
        [
            {
                "mode": "post-sort (no buffering stats)",
                "observe us/tuple": 0.0,
                "release ms": 0.0,
                "at cut ms": post["cut_s"] * 1e3,
                "plan ms": post["plan_s"] * 1e3,
            },
            {
                "mode": "early release at 95% of the batch",
                "observe us/tuple": obs / release_at * 1e6,
                "release ms": plan * 1e3,
                "at cut ms": early["cut_s"] * 1e3,
                "plan ms": early["plan_s"] * 1e3,
            },
        ]
    )


def _plot_cost(df: pd.DataFrame, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    df.pivot(index="partitioner", columns="blocks", values="us/tuple").plot.bar(ax=axes[0])
    axes[0].set_ylabel("us per tuple")
    df.pivot(index="partitioner", columns="blocks", values="memory MB").plot.bar(ax=axes[1], logy=True)
    axes[1].set_ylabel("MB (log)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------------- (c), (d)
def _spark():
    from adaptstream.spark.session import build_spark

    return build_spark(app_name="adaptstream-partitioning-bench")


def process_batch(
    spark: Any, name: str, table: Any, keys: np.ndarray, num_blocks: int, query: Callable, part: Any = None
) -> dict[str, float]:
    """One micro-batch: buffering statistics (untimed, happens while tuples arrive), then the timed cut:
    assign() + Spark executing the query over the blocks."""
    from adaptstream.partitioning.spark_blocks import timed_query

    part = part or build_partitioner(name)
    chunk = max(1, len(keys) // 50)
    for lo in range(0, len(keys), chunk):
        part.observe(keys[lo : lo + chunk])
    t = time.perf_counter()
    blocks = part.assign(keys, num_blocks)
    assign_s = time.perf_counter() - t
    spark_s = timed_query(spark, table, blocks, num_blocks, query)
    rep = batch_report(keys, blocks, num_blocks)
    return {
        "assign_s": assign_s,
        "spark_s": spark_s,
        "total_s": assign_s + spark_s,
        "gamma_ratio": rep["aggregation_cost"] / max(len(keys), 1),
        "bsi": rep["bsi"],
    }


def sustainable_rate(
    spark: Any,
    name: str,
    interval: float,
    z: float,
    num_blocks: int,
    lo: float,
    hi: float,
    steps: int,
    num_keys: int = 100_000,
) -> tuple[float, list[dict[str, Any]]]:
    """Geometric bisection for the highest rate whose batch processing time <= interval (2 batches/probe)."""
    w = get_workload("synd-wordcount")
    probes = []
    best = 0.0
    part = build_partitioner(name)
    for step in range(steps):
        rate = float(np.sqrt(lo * hi))
        n = int(rate * interval)
        times = []
        for rep in range(2):
            pdf = synd(n, z=z, num_keys=num_keys, rate=rate, seed=step * 10 + rep)
            table = to_arrow(pdf)
            keys = key_hash(table, ["word"])
            times.append(process_batch(spark, name, table, keys, num_blocks, w.query, part)["total_s"])
        t = max(times)
        ok = t <= interval
        probes.append({"rate": rate, "processing_s": t, "sustainable": ok})
        if ok:
            best, lo = max(best, rate), rate
        else:
            hi = rate
    return best, probes


def bench_rate(
    names: Sequence[str] = ("time", "shuffle", "hash", "pk2", "cam", "prompt"),
    intervals: Sequence[float] = (1.0, 2.0, 3.0),
    zs: Sequence[float] = (0.5, 1.5, 2.0),
    z_interval: float = 1.0,
    num_blocks: int = 2,
    steps: int = 4,
    lo: float = 20_000,
    hi: float = 2_000_000,
    out_dir: Path = RESULTS,
) -> Path:
    spark = _spark()
    _warm(names)
    w = get_workload("synd-wordcount")
    warm = to_arrow(synd(20_000, z=1.0))
    process_batch(spark, "hash", warm, key_hash(warm, ["word"]), num_blocks, w.query)  # JVM/worker warm-up
    configs = [(i, 1.0) for i in intervals] + [(z_interval, z) for z in zs]
    recs, probes = [], []
    out_dir.mkdir(parents=True, exist_ok=True)
    for interval, z in configs:
        for n in names:
            best, pr = sustainable_rate(spark, n, interval, z, num_blocks, lo, hi, steps)
            recs.append({"interval_s": interval, "z": z, "partitioner": n, "max_rate": best})
            probes += [{"interval_s": interval, "z": z, "partitioner": n, **p} for p in pr]
            _write_rate(pd.DataFrame(recs), pd.DataFrame(probes), num_blocks, steps, lo, hi, out_dir)
    return _write_rate(pd.DataFrame(recs), pd.DataFrame(probes), num_blocks, steps, lo, hi, out_dir)


def _write_rate(
    df: pd.DataFrame, probes: pd.DataFrame, num_blocks: int, steps: int, lo: float, hi: float, out_dir: Path
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    md = out_dir / "partitioning_rate.md"
    text = header(
        "Highest sustainable input rate per partitioner (Prompt Fig. 11)", "adaptstream partitioning bench rate"
    )
    text += (
        f"SynD 30 s/10 s sliding word count, 1e5 possible keys. Per probe: two micro-batches of rate x "
        f"interval rows; processing time = assign() + Spark running the windowed aggregation over exactly "
        f"{num_blocks} blocks (one task each, local[2]); buffering statistics (observe) are untimed since "
        f"they happen while tuples arrive. Sustainable = the slower batch finishes within the interval. "
        f"Geometric bisection in [{lo:g}, {hi:g}] rows/s, {steps} probes: rates are resolved to about "
        f"x{(hi / lo) ** (1 / 2**steps):.2f}. 0 = not even the lowest probe was sustainable. This harness "
        "runs each batch as its own Spark job (no state store carried across batches).\n\n"
    )
    if not df.empty:
        text += _targets_rate(df)
        piv = df.pivot_table(index=["interval_s", "z"], columns="partitioner", values="max_rate").reset_index()
        text += "\n" + md_table(piv, "{:,.0f}") + "\n![rate](partitioning_rate.png)\n\n"
        text += "<details><summary>probes</summary>\n\n" + md_table(probes, "{:.3g}") + "\n</details>\n"
        fig, ax = plt.subplots(figsize=(10, 4))
        piv.set_index(piv["interval_s"].astype(str) + "s z=" + piv["z"].astype(str)).drop(
            columns=["interval_s", "z"]
        ).plot.bar(ax=ax)
        ax.set_ylabel("max sustainable rows/s")
        fig.tight_layout()
        fig.savefig(out_dir / "partitioning_rate.png", dpi=110)
        plt.close(fig)
    md.write_text(text)
    (out_dir / "partitioning_rate.json").write_text(
        json.dumps({"max": df.to_dict("records"), "probes": probes.to_dict("records")}, indent=1)
    )
    return md


def _targets_rate(df: pd.DataFrame) -> str:
    lines = ["## Targets (issue #3): prompt >= 2x time and >= 1.3x the best other, skewed SynD (z >= 1.0)\n"]
    for (interval, z), g in df.groupby(["interval_s", "z"]):
        if z < 1.0:
            continue
        r = g.set_index("partitioner")["max_rate"]
        if "prompt" not in r or "time" not in r:
            continue
        best_other = r.drop(["prompt"]).max()
        if r["time"] <= 0 or best_other <= 0 or r["prompt"] <= 0:
            lines.append(
                f"- interval {interval:g} s, z={z:g}: n/a (not sustainable even at the lowest probe: "
                f"prompt {r['prompt']:,.0f}, time {r['time']:,.0f}, best other {best_other:,.0f} rows/s)"
            )
            continue
        vs_time = r["prompt"] / r["time"]
        vs_best = r["prompt"] / best_other
        lines.append(
            f"- interval {interval:g} s, z={z:g}: prompt/time = {vs_time:.2f} "
            f"({'met' if vs_time >= 2 else 'MISSED'}), prompt/best other = {vs_best:.2f} "
            f"({'met' if vs_best >= 1.3 else 'MISSED'})"
        )
    return "\n".join(lines) + "\n"


def bench_blocks(
    workloads: Sequence[str] = ("tpch-q1", "tpch-q3", "debs-routes", "gcm-q1", "gcm-q2"),
    names: Sequence[str] = ("shuffle", "hash", "pk2", "pk5", "cm", "am", "cam", "lm", "prompt"),
    blocks: Sequence[int] = (2, 4, 8),
    rows: int = 400_000,
    repeats: int = 2,
    out_dir: Path = RESULTS,
) -> Path:
    spark = _spark()
    _warm(names)
    recs = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for wl in workloads:
        w = get_workload(wl)
        pdf = w.generate(rows, rate=rows / 60.0, seed=5)  # one 60 s window's worth of rows
        table = to_arrow(pdf)
        keys = key_hash(table, list(w.key_columns))
        process_batch(spark, "hash", table, keys, 2, w.query)  # warm-up
        for p in blocks:
            for n in names:
                res = [process_batch(spark, n, table, keys, p, w.query) for _ in range(repeats)]
                spark_s = float(np.median([r["spark_s"] for r in res]))
                recs.append(
                    {
                        "workload": wl,
                        "blocks": p,
                        "partitioner": n,
                        "spark_s": spark_s,
                        "rows/s": rows / spark_s,
                        "assign_ms": 1e3 * float(np.median([r["assign_s"] for r in res])),
                        "Gamma/N": res[0]["gamma_ratio"],
                        "BSI": res[0]["bsi"],
                    }
                )
        _write_blocks(pd.DataFrame(recs), rows, repeats, out_dir)
    return _write_blocks(pd.DataFrame(recs), rows, repeats, out_dir)


def _write_blocks(df: pd.DataFrame, rows: int, repeats: int, out_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    md = out_dir / "partitioning_blocks.md"
    text = header("Throughput vs number of blocks (holistic Fig. 5-7, 10-12)", "adaptstream partitioning bench blocks")
    text += (
        f"{rows} rows = one 60 s window per workload, aggregated by Spark over the planned blocks (partial "
        f"aggregation per block, exchange, final aggregation); median of {repeats} runs. rows/s counts Spark "
        "time only (the partitioning cost is in the cost report). Gamma/N = partial results per input row, "
        "the aggregation load of holistic Eq. 2. This machine has 2 cores (local[2]): with 4 or 8 blocks the "
        "tasks queue, so more blocks cannot add parallelism here; skew and Gamma still show.\n\n"
    )
    if not df.empty:
        text += _targets_blocks(df)
        for wl, g in df.groupby("workload", sort=False):
            text += f"\n### {wl}\n\n" + md_table(g.drop(columns=["workload"]), "{:.4g}")
        wls = list(df["workload"].unique())
        fig, axes = plt.subplots(1, len(wls), figsize=(4 * len(wls), 3.5), squeeze=False)
        for ax, wl in zip(axes[0], wls, strict=True):
            df[df["workload"] == wl].pivot(index="blocks", columns="partitioner", values="rows/s").plot(
                ax=ax, marker="o", legend=ax is axes[0][0]
            )
            ax.set_title(wl)
            ax.set_ylabel("rows/s (Spark)")
        fig.tight_layout()
        fig.savefig(out_dir / "partitioning_blocks.png", dpi=110)
        plt.close(fig)
        text += "\n![blocks](partitioning_blocks.png)\n"
    md.write_text(text)
    return md


def _targets_blocks(df: pd.DataFrame) -> str:
    g = df[df["workload"] == "tpch-q3"]
    if g.empty:
        return ""
    lines = ["## Targets (issue #3): cAM/AM >= 1.3x FLD (hash) and >= 3x PK on the many-group query (tpch-q3)\n"]
    for p, gp in g.groupby("blocks"):
        r = gp.set_index("partitioner")["rows/s"]
        best_am = max(r.get("cam", 0.0), r.get("am", 0.0))
        best_pk = max(r.get("pk2", 0.0), r.get("pk5", 0.0))
        vs_fld = best_am / r["hash"] if r.get("hash", 0) else float("nan")
        vs_pk = best_am / best_pk if best_pk else float("nan")
        lines.append(
            f"- {p} blocks: best of AM/cAM / hash = {vs_fld:.2f} ({'met' if vs_fld >= 1.3 else 'MISSED'}); "
            f"/ best PK = {vs_pk:.2f} ({'met' if vs_pk >= 3 else 'MISSED'})"
        )
    return "\n".join(lines) + "\n"
