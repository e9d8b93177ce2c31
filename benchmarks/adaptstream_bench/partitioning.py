"""Partitioning benchmarks: every partitioner side by side on the same seeded data, one report each.

(a) `metrics`: Prompt Fig. 10 — BSI relative to hash and BCI relative to shuffle (plus KSR, Gamma) on SynD
    (Zipf sweep) and TPC-H / DEBS / GCM keys. Pure Python, no Spark.
(b) `cost`: holistic Table 4 / Fig. 13 and Prompt Fig. 14b — partitioner cost per tuple and memory, exact
    vs HyperLogLog, and Prompt's planning time at the cut with and without early batch release.
The Spark-timed benchmarks (c) `rate` and (d) `blocks` are in partitioning_spark.py.
Reports (Markdown + PNG, with date and machine) go where they are told.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from adaptstream.partitioning import MAIN_NAMES, build_partitioner, key_hash
from adaptstream.partitioning.metrics import batch_report
from adaptstream.workloads.partition_workloads import (
    ZIPF_EXPONENTS,
    get_workload,
    to_arrow,
    zipf_keys,
)
from adaptstream_bench.meta import describe, finish_meta, sample_load, start_meta, targets_table

RESULTS = Path("docs/results")


def md_table(df: pd.DataFrame, floatfmt: str = "{:.3g}") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        cells = [floatfmt.format(v) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def warm_partitioners(names: Sequence[str]) -> None:
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
    meta = start_meta("partitioning", "bench", "metrics")
    warm_partitioners(names)
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
    return write_json(
        {"bench": "metrics", "meta": meta, "config": {"rows": rows, "blocks": num_blocks}, "records": recs},
        out_dir / "partitioning_metrics.json",
    )


def render_metrics(data: dict[str, Any], md: Path) -> Path:
    df = pd.DataFrame(data["records"])
    rows, num_blocks = data["config"]["rows"], data["config"]["blocks"]
    png = md.with_suffix(".png")
    _plot_metrics(df, png)
    text = "# Partitioning metrics (Prompt Fig. 10)\n\n" + describe(data["meta"]) + "\n"
    text += (
        f"{rows} rows per dataset, {num_blocks} blocks, one batch. BSI relative to hash and BCI relative "
        "to shuffle, as Prompt Sec. 7.2 reports them (0 = balanced; a reference below 1 counts as 1, "
        "e.g. shuffle's BCI on "
        "TPC-H where every block holds nearly every group). SynD draws from 1e6 possible keys. "
        "Pure Python, exact metrics over the planned blocks.\n\n"
    )
    text += "## Targets (issue #3)\n\n" + targets_md(data) + f"\n![metrics]({png.name})\n\n" + md_table(df)
    md.write_text(text)
    return md


def target(
    name: str, rule: str, value: float | None, threshold: float, met: bool | None, measured: str
) -> dict[str, Any]:
    """One entry of a report's ``targets`` list (the shape every report JSON uses)."""
    return {"target": name, "rule": rule, "value": value, "threshold": threshold, "measured": measured, "met": met}


def metrics_targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue #3: Prompt's BSI within 10 % of shuffle's and its BCI within 10 % of hash's, per dataset (+1: block
    sizes and key counts are integers). The metrics are exact counts of seeded data, so there is no spread."""
    df = pd.DataFrame(data["records"])
    out = []
    for ds, g in df.groupby("dataset", sort=False):
        g = g.set_index("partitioner")
        if not {"prompt", "shuffle", "hash"} <= set(g.index):
            continue
        p, s, h = g.loc["prompt"], g.loc["shuffle"], g.loc["hash"]
        for metric, ref, refname in (("BSI", s, "shuffle"), ("BCI", h, "hash")):
            limit = float(ref[metric]) * 1.1 + 1.0
            value = float(p[metric])
            rule = f"prompt {metric} <= 1.1 x {refname}'s + 1"
            out.append(
                target(f"{ds}: {metric}", rule, value, limit, value <= limit, f"{value:.1f} (limit {limit:.1f})")
            )
    return out


def targets_md(data: dict[str, Any]) -> str:
    """The targets table from the JSON's own ``targets`` (a JSON recorded before they were data has none)."""
    if "targets" not in data:
        return "No targets recorded in this run's JSON (recorded before verdicts were data).\n"
    rows = [(t["target"], t["rule"], t["measured"], t["met"]) for t in data["targets"]]
    return "\n".join(targets_table(rows, "undecided")) + "\n"


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
    meta = start_meta("partitioning", "bench", "cost")
    warm_partitioners(names)
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
    prompt = _prompt_cut_costs(keys, 8)
    sample_load(meta)
    cfg = {"rows": rows, "blocks": list(blocks), "distinct": len(np.unique(keys))}
    data = {"bench": "cost", "meta": meta, "config": cfg, "records": recs, "prompt": prompt.to_dict("records")}
    return write_json(data, out_dir / "partitioning_cost.json")


#: one timing per partitioner on a shared machine: a worst time within 20 % of the limit is not decided
COST_SPREAD = 0.2


def cost_targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Holistic Table 4's scale: every partitioner's assign() <= 2 us per tuple, judged on the worst one."""
    df = pd.DataFrame(data["records"])
    worst = df.loc[df["us/tuple"].idxmax()]
    value = float(worst["us/tuple"])
    met = None if abs(value - 2.0) <= 2.0 * COST_SPREAD else value <= 2.0
    measured = f"worst {value:.3f} us/tuple ({worst['partitioner']}, P={int(worst['blocks'])})"
    rule = f"every partitioner's assign() <= 2 us/tuple; undecided within {COST_SPREAD:.0%} of 2"
    return [target("partitioner cost", rule, value, 2.0, met, measured)]


def render_cost(data: dict[str, Any], md: Path) -> Path:
    df, prompt, cfg = pd.DataFrame(data["records"]), pd.DataFrame(data["prompt"]), data["config"]
    png = md.with_suffix(".png")
    _plot_cost(df, png)
    title = "# Partitioner cost per tuple and memory (holistic Table 4, Fig. 13; Prompt Fig. 14b)\n\n"
    text = title + describe(data["meta"]) + "\n"
    text += (
        f"{cfg['rows']} SynD tuples (z=1.0, 1e6 possible keys, {cfg['distinct']} distinct) in one batch. "
        "Time = assign() wall time / rows (numba kernels, compiled before timing). Memory = bytes held by "
        "the partitioner's statistics after the batch (exact: key->block-bitmask table; HLL: 2^12 "
        "one-byte registers per block).\n\n## Targets\n\n" + targets_md(data) + "\n"
        f"![cost]({png.name})\n\n"
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


def write_json(data: dict[str, Any], json_path: Path, finished: bool = True) -> Path:
    """JSON first (the run's record), then the Markdown and PNG rendered from it alone; a partial write (a long
    run's progress) leaves the meta unfinished, and the report says so."""
    if finished:
        finish_meta(data["meta"])
    data["targets"] = targets_of(data)  # rules in code before the run; a partial run is judged so far
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=1, default=float))
    return render(json_path)


def targets_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdicts of one partitioning report by its bench's rules (fixed in code before the run)."""
    from adaptstream_bench import partitioning_spark_report as spark_report

    rules = {
        "metrics": metrics_targets,
        "cost": cost_targets,
        "rate": spark_report.rate_targets,
        "blocks": spark_report.blocks_targets,
    }
    return rules[data["bench"]](data)


def render(json_path: Path) -> Path:
    """Re-render any partitioning report from its JSON (``--report-only``)."""
    from adaptstream_bench import partitioning_spark_report as spark_report

    data = json.loads(json_path.read_text())
    renderers = {
        "metrics": render_metrics,
        "cost": render_cost,
        "rate": spark_report.write_rate,
        "blocks": spark_report.write_blocks,
    }
    return renderers[data["bench"]](data, json_path.with_suffix(".md"))


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
