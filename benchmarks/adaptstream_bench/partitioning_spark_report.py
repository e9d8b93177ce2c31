"""Markdown + PNG of the Spark-timed partitioning benchmarks, rendered from their JSON only (no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from adaptstream_bench.meta import describe
from adaptstream_bench.partitioning import md_table, target, targets_md


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ----------------------------------------------------------------------------------------------------- rate
def resolution(cfg: dict[str, Any]) -> float:
    """The factor to which the bisection resolves a rate: the true maximum lies within [found, found x this)."""
    return float((cfg["hi"] / cfg["lo"]) ** (1 / 2 ** cfg["steps"]))


def _capped(data: dict[str, Any]) -> set[tuple[float, float, str]]:
    """(interval, z, partitioner) whose every probe was sustainable: its rate is only a lower bound (the search
    range ended below its true maximum)."""
    probes = pd.DataFrame(data.get("probes") or [])
    if probes.empty:
        return set()
    ok = probes.groupby(["interval_s", "z", "partitioner"])["sustainable"].all()
    return {(float(i), float(z), str(n)) for (i, z, n), v in ok.items() if v}


def _ratio_verdict(ratio: float, threshold: float, spread: float, num_open: bool, den_open: bool) -> bool | None:
    """Met when the ratio clears its threshold at the low end of what the bisection allows (each rate known within
    a factor ``spread``; a rate whose probes all passed has no upper end), missed when even the high end stays
    below it, else undecided."""
    low = 0.0 if den_open else ratio / spread
    high = float("inf") if num_open else ratio * spread
    if low >= threshold:
        return True
    if high < threshold:
        return False
    return None


def rate_targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue #3's rule per skewed configuration (z >= 1): prompt >= 2x time and >= 1.3x the best other. Each rate
    is resolved to a factor r, so a ratio of two is known within a factor r either way (and without an upper end
    where a rate's every probe passed): inside that, undecided."""
    df, r, capped = pd.DataFrame(data["max"]), resolution(data["config"]), _capped(data)
    out: list[dict[str, Any]] = []
    if df.empty:
        return out
    for (interval, z), g in df.groupby(["interval_s", "z"]):
        rates = g.set_index("partitioner")["max_rate"]
        if z < 1.0 or "prompt" not in rates or "time" not in rates:
            continue
        where = f"interval {interval:g} s, z={z:g}"
        best_name = str(rates.drop(["prompt"]).idxmax())
        for ref, threshold in (("time", 2.0), (best_name, 1.3)):
            label = "time" if ref == "time" else "the best other"
            rule = f"prompt's rate >= {threshold:g}x {label}'s; undecided within the bisection's x{r:.2f}"
            name = f"{where}: prompt vs {ref}" + ("" if ref == "time" else " (best other)")
            if min(float(rates[ref]), float(rates["prompt"])) <= 0:
                out.append(target(name, rule, None, threshold, None, "not sustainable at the lowest probe"))
                continue
            ratio = float(rates["prompt"] / rates[ref])
            open_ = [(float(interval), float(z), n) in capped for n in ("prompt", ref)]
            met = _ratio_verdict(ratio, threshold, r, *open_)
            note = [
                f"{n}'s rate a lower bound (every probe sustainable)"
                for n, o in zip(("prompt", ref), open_, strict=True)
                if o
            ]
            measured = f"{ratio:.2f}x" + (f" ({'; '.join(note)})" if note else "")
            out.append(target(name, rule, ratio, threshold, met, measured))
    return out


def write_rate(data: dict[str, Any], md: Path) -> Path:
    meta, cfg = data["meta"], data["config"]
    df, probes = pd.DataFrame(data["max"]), pd.DataFrame(data["probes"])
    text = "# Highest sustainable input rate per partitioner (Prompt Fig. 11)\n\n" + describe(meta) + "\n"
    text += (
        f"SynD 30 s/10 s sliding word count, 1e5 possible keys. Per probe: two micro-batches of rate x interval "
        f"rows; processing time = assign() + Spark running the windowed aggregation over exactly {cfg['blocks']} "
        f"blocks (one task each) on {meta['master']}; buffering statistics (observe) are untimed since they happen "
        f"while tuples arrive. Sustainable = the slower batch finishes within the interval. Geometric bisection in "
        f"[{cfg['lo']:g}, {cfg['hi']:g}] rows/s, {cfg['steps']} probes: a rate is resolved to about "
        f"x{resolution(cfg):.2f}, so smaller differences are not resolved. 0 = not even the lowest probe was "
        "sustainable. Each batch is its own Spark job (no state store carried across batches).\n\n"
    )
    text += "## Targets\n\n" + targets_md(data)
    if not df.empty:
        piv = df.pivot_table(index=["interval_s", "z"], columns="partitioner", values="max_rate").reset_index()
        png = md.with_suffix(".png")
        text += "\n" + md_table(piv, "{:,.0f}") + f"\n![rate]({png.name})\n\n"
        text += "<details><summary>probes</summary>\n\n" + md_table(probes, "{:.3g}") + "\n</details>\n"
        plt = _plt()
        fig, ax = plt.subplots(figsize=(10, 4))
        label = piv["interval_s"].astype(str) + "s z=" + piv["z"].astype(str)
        piv.set_index(label).drop(columns=["interval_s", "z"]).plot.bar(ax=ax)
        ax.set_ylabel("max sustainable rows/s")
        ax.set_title(f"Spark master {meta['master']}")
        fig.tight_layout()
        fig.savefig(png, dpi=110)
        plt.close(fig)
    md.write_text(text)
    return md


# --------------------------------------------------------------------------------------------------- blocks
def blocks_targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue #3's rule on the many-group query tpch-q3: best of AM/cAM >= 1.3x hash (FLD) and >= 3x best PK. With
    repeats, a ratio is judged at both ends of the repeats' range (slowest vs fastest): undecided when they differ."""
    df = pd.DataFrame(data["records"])
    out: list[dict[str, Any]] = []
    if df.empty:
        return out
    for p, g in df[df["workload"] == "tpch-q3"].groupby("blocks"):
        g = g.set_index("partitioner")
        am = max((n for n in ("cam", "am") if n in g.index), key=lambda n: g.loc[n, "rows/s"], default=None)
        pk = max((n for n in ("pk2", "pk5") if n in g.index), key=lambda n: g.loc[n, "rows/s"], default=None)
        for ref, threshold in (("hash", 1.3), (pk, 3.0)):
            name = f"{int(p)} blocks: best AM/cAM vs {ref or 'PK'}"
            rule = f"best of AM/cAM rows/s >= {threshold:g}x {ref or 'best PK'}'s (tpch-q3)"
            if am is None or ref is None or ref not in g.index:
                out.append(target(name, rule, None, threshold, None, "a partitioner is missing"))
                continue
            ratio = float(g.loc[am, "rows/s"] / g.loc[ref, "rows/s"])
            lo = _rate(g.loc[am], "spark_s_max") / _rate(g.loc[ref], "spark_s_min")
            hi = _rate(g.loc[am], "spark_s_min") / _rate(g.loc[ref], "spark_s_max")
            met = True if lo >= threshold else False if hi < threshold else None
            out.append(
                target(name, rule, ratio, threshold, met, f"{ratio:.2f}x ({am}; repeats' range {lo:.2f}-{hi:.2f})")
            )
    return out


def _rate(row: pd.Series, col: str) -> float:
    """rows/s at a repeats' end (slowest or fastest); a record without repeats' ends has only its median."""
    return (
        float(row["rows/s"])
        if col not in row or pd.isna(row[col])
        else float(row["rows/s"] * row["spark_s"] / row[col])
    )


def write_blocks(data: dict[str, Any], md: Path) -> Path:
    meta, cfg = data["meta"], data["config"]
    df = pd.DataFrame(data["records"])
    text = "# Throughput vs number of blocks (holistic Fig. 5-7, 10-12)\n\n" + describe(meta) + "\n"
    text += (
        f"{cfg['rows']} rows = one 60 s window per workload, aggregated by Spark over the planned blocks (partial "
        f"aggregation per block, exchange, final aggregation) on {meta['master']}; median of {cfg['repeats']} "
        "runs. rows/s counts Spark time only (the partitioning cost is in the cost report). Gamma/N = partial "
        "results per input row, the aggregation load of holistic Eq. 2. With more blocks than cores the tasks "
        "queue: more blocks add no parallelism, while skew and Gamma still show.\n\n"
    )
    text += "## Targets\n\n" + targets_md(data)
    if not df.empty:
        for wl, g in df.groupby("workload", sort=False):
            text += f"\n### {wl}\n\n" + md_table(g.drop(columns=["workload"]), "{:.4g}")
        wls = list(df["workload"].unique())
        plt = _plt()
        fig, axes = plt.subplots(1, len(wls), figsize=(4 * len(wls), 3.5), squeeze=False)
        for ax, wl in zip(axes[0], wls, strict=True):
            df[df["workload"] == wl].pivot(index="blocks", columns="partitioner", values="rows/s").plot(
                ax=ax, marker="o", legend=ax is axes[0][0]
            )
            ax.set_title(wl)
            ax.set_ylabel("rows/s (Spark)")
        fig.tight_layout()
        png = md.with_suffix(".png")
        fig.savefig(png, dpi=110)
        plt.close(fig)
        text += f"\n![blocks]({png.name})\n"
    md.write_text(text)
    return md
