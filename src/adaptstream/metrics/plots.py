"""PNG plots of runs, shaped like LMStream Fig. 8/9: max latency and data size per micro-batch over time."""

from __future__ import annotations

import os
from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from adaptstream.metrics.summary import load_batches


def plot_timelines(runs: Mapping[str, str], out_png: str, title: str, slide: float | None = None) -> str:
    """``runs`` maps a label (policy) to its metrics directory; one line per run in each panel."""
    fig, (ax_lat, ax_size) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for label, metrics_dir in runs.items():
        bs = load_batches(metrics_dir)
        if bs.empty:
            continue
        t0 = float(bs["admitted_at"].min() - bs["buffering_time"].iloc[0])
        t = bs["completed_at"] - t0
        ax_lat.plot(t, bs["max_latency"], marker=".", label=label)
        ax_size.plot(t, bs["rows"], marker=".", label=label)
    if slide:
        ax_lat.axhline(slide, color="grey", linestyle="--", linewidth=1, label=f"slide = {slide:g} s")
    ax_lat.set_ylabel("max latency per batch (s)")
    ax_size.set_ylabel("rows per batch")
    ax_size.set_xlabel("time since first arrival (s)")
    ax_lat.set_title(title)
    ax_lat.legend(loc="upper left", fontsize=8)
    ax_lat.grid(alpha=0.3)
    ax_size.grid(alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(out_png) or ".", exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png


def plot_bars(values: Mapping[str, Mapping[str, float]], out_png: str, ylabel: str, title: str) -> str:
    """Grouped bars: values[group][policy] (LMStream Fig. 6/7 shape: per query, per policy)."""
    import numpy as np

    groups = list(values)
    policies = sorted({p for g in values.values() for p in g})
    width = 0.8 / max(len(policies), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(groups) + 2), 4))
    x = np.arange(len(groups))
    for k, pol in enumerate(policies):
        ax.bar(x + k * width, [values[g].get(pol, float("nan")) for g in groups], width, label=pol)
    ax.set_xticks(x + width * (len(policies) - 1) / 2, groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(out_png) or ".", exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png
