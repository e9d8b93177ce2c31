"""Dataset and batch accounting (LMStream Eq. 4-5), written as JSON lines into the run's metrics directory.

Files: datasets.jsonl (one line per dataset when its batch completes), batches.jsonl (one per data batch),
quarantine.jsonl (malformed rows with file, record, byte offset, raw text and reason; written deduplicated by
spark/accounting.py). A replayed batch after a restart writes its
lines again; readers keep the last line per dataset / batch (see metrics.summary).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

DATASETS = "datasets.jsonl"
BATCHES = "batches.jsonl"
QUARANTINE = "quarantine.jsonl"


def quarantine_key(record: dict) -> tuple:
    """What makes two quarantine records the same event: a replayed batch or a restart quarantines the same row
    (file, byte offset, record number) again; a file event (no offset) is told apart by its reason. The writer
    (spark/accounting.py) and every reader (metrics.summary) deduplicate by this one key."""
    offset = record.get("offset")
    return record.get("path"), offset, record.get("row"), record.get("reason") if offset is None else ""


@dataclass
class DatasetRecord:
    seq: int
    path: str
    arrival: float
    rows: int
    bytes: int
    quarantined: int
    sentinel: bool
    batch: int = -1
    admitted_at: float = 0.0
    completed_at: float = 0.0

    @property
    def buffering(self) -> float:  # Buff(i,j)
        return max(self.admitted_at - self.arrival, 0.0)

    @property
    def latency(self) -> float:
        return max(self.completed_at - self.arrival, 0.0)


@dataclass
class BatchRecord:
    batch: int  # adaptstream's data-batch counter (Spark's batchId also counts no-data batches)
    start: int
    end: int
    datasets: int
    rows: int
    bytes: int
    quarantined: int
    admitted_at: float
    planned_at: float
    completed_at: float
    buffering_time: float  # max over datasets of Buff(i,j)
    processing_time: float  # Proc_i
    max_latency: float  # MaxLat_i (Eq. 5)
    avg_throughput: float  # AvgThPut_i (Eq. 4), rows per second of processing time, cumulative
    est_max_latency: float | None
    admission: str
    block_rows: list[int] = field(default_factory=list)
    plan_seconds: float = 0.0
    partitioner: str = "time"
    extra: dict[str, Any] = field(default_factory=dict)


class MetricsRecorder:
    """Appends records; None path means the caller did not ask for metrics (nothing is written)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        if path:
            os.makedirs(path, exist_ok=True)

    def _append(self, name: str, rows: list[dict]) -> None:
        if not self.path or not rows:
            return
        with open(os.path.join(self.path, name), "a", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, default=float) + "\n")

    def datasets(self, records: list[DatasetRecord]) -> None:
        rows = []
        for r in records:
            d = dict(vars(r))  # flat records: a shallow copy (asdict deep-copies, a cost paid per dataset)
            d.update(buffering=r.buffering, latency=r.latency, processing=r.completed_at - r.admitted_at)
            rows.append(d)
        self._append(DATASETS, rows)

    def batch(self, record: BatchRecord) -> None:
        self._append(BATCHES, [dict(vars(record))])
