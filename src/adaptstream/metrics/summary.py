"""Read a run's metrics back and summarise them the way the LMStream paper reports (Fig. 6-9)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from adaptstream.metrics.recorder import BATCHES, DATASETS, QUARANTINE, quarantine_key


def _records(path: str) -> list[dict]:
    """The records of a metrics file; a torn last line (the run was killed mid-write) is left out, not fatal."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [line for line in f if line.strip()]
    rows = []
    for k, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except ValueError:
            if k < len(lines) - 1:
                raise ValueError(f"{path} is corrupt at record {k + 1}: {line[:80]!r}") from None
    return rows


def _read_jsonl(path: str) -> pd.DataFrame:
    return pd.DataFrame(_records(path))


def load_datasets(metrics_dir: str, include_sentinel: bool = False) -> pd.DataFrame:
    df = _read_jsonl(os.path.join(metrics_dir, DATASETS))
    if df.empty:
        return df
    df = df.drop_duplicates("seq", keep="last").sort_values("seq").reset_index(drop=True)
    return df if include_sentinel else df[~df["sentinel"]].reset_index(drop=True)


def load_batches(metrics_dir: str) -> pd.DataFrame:
    df = _read_jsonl(os.path.join(metrics_dir, BATCHES))
    if df.empty:
        return df
    return df.drop_duplicates(["start", "end"], keep="last").sort_values("start").reset_index(drop=True)


def count_quarantined(metrics_dir: str) -> int:
    """Quarantined rows and file events, each counted once however often a replay wrote it."""
    return len({quarantine_key(r) for r in _records(os.path.join(metrics_dir, QUARANTINE))})


@dataclass(frozen=True)
class RunSummary:
    datasets: int
    rows: int
    batches: int
    avg_latency: float
    p50_latency: float
    p99_latency: float
    max_latency: float
    avg_buffering: float
    avg_processing: float
    within_slide: float | None  # fraction of batches whose MaxLat <= slide (sliding windows)
    throughput: float  # AvgThPut (Eq. 4): rows per second of processing time
    wall_throughput: float  # rows per second of wall time between first arrival and last completion
    avg_batch_rows: float
    quarantined: int

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(metrics_dir: str, slide: float | None = None, warmup: float = 0.0) -> RunSummary:
    """``warmup``: leave out datasets that arrived in the first seconds (and batches holding only those)."""
    ds, bs = load_datasets(metrics_dir), load_batches(metrics_dir)
    if warmup > 0 and not ds.empty:
        ds = ds[ds["arrival"] >= ds["arrival"].min() + warmup].reset_index(drop=True)
        if not bs.empty:
            bs = bs[bs["end"] > (ds["seq"].min() if len(ds) else float("inf"))].reset_index(drop=True)
    if ds.empty or bs.empty:
        nan = float("nan")
        return RunSummary(0, 0, 0, nan, nan, nan, nan, nan, nan, None, nan, nan, nan, count_quarantined(metrics_dir))
    lat = ds["latency"].to_numpy()
    # A batch with MaxLat 0 held only the end-of-input marker (--drain): not a batch of the user's data.
    data_batches = bs[bs["max_latency"] > 0] if "max_latency" in bs else bs
    within = None
    if slide and slide > 0 and len(data_batches):
        within = float(np.mean(data_batches["max_latency"] <= slide))
    span = float(ds["completed_at"].max() - ds["arrival"].min())
    return RunSummary(
        datasets=len(ds),
        rows=int(ds["rows"].sum()),
        batches=len(data_batches),
        avg_latency=float(lat.mean()),
        p50_latency=float(np.percentile(lat, 50)),
        p99_latency=float(np.percentile(lat, 99)),
        max_latency=float(lat.max()),
        avg_buffering=float(ds["buffering"].mean()),
        avg_processing=float(ds["processing"].mean()),
        within_slide=within,
        throughput=float(bs["rows"].sum() / max(bs["processing_time"].sum(), 1e-9)),
        wall_throughput=float(ds["rows"].sum() / max(span, 1e-9)),
        avg_batch_rows=float(data_batches["rows"].mean()) if len(data_batches) else float("nan"),
        quarantined=count_quarantined(metrics_dir),
    )
