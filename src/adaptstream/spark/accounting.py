"""Dataset-latency accounting (LMStream Eq. 4-5) for the source, kept apart from Spark's contract.

A batch is complete when Spark commits its end offset or asks for the next offset from it (Spark plans the next
batch only after the previous one finished, sink write and commit log included), whichever comes first. Row
counts and malformed rows come from the part files the executors wrote while reading (spark/read.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field

from adaptstream.admission import AdmissionPolicy, BatchOutcome
from adaptstream.connectors.base import DatasetRef, append_jsonl, read_jsonl
from adaptstream.connectors.ranges import part_path, read_part
from adaptstream.metrics.recorder import QUARANTINE, BatchRecord, DatasetRecord, MetricsRecorder, quarantine_key

log = logging.getLogger(__name__)


@dataclass
class Planned:
    start: int
    end: int
    admitted_at: float
    planned_at: float
    est_max_latency: float | None
    refs: list[DatasetRef]
    blocks: list[list[int]] = field(default_factory=list)  # seqs per partition
    block_rows: list[int] | None = None  # known at plan time on the driver path
    plan_seconds: float = 0.0


class RowEstimator:
    """Rows of a dataset not yet read, from its bytes: the ratio of recently read datasets (bounded history)."""

    def __init__(self, history: int = 64) -> None:
        self._seen: deque[tuple[int, int]] = deque(maxlen=history)
        self._prior: float | None = None  # from the head of the first dataset, until one has been read

    def observe(self, rows: int, nbytes: int) -> None:
        if nbytes > 0:
            self._seen.append((rows, nbytes))

    def rows_per_byte(self) -> float | None:
        b = sum(n for _, n in self._seen)
        return sum(r for r, _ in self._seen) / b if b else None

    def estimate(self, ref: DatasetRef) -> int:
        ratio = self.rows_per_byte()
        if ratio is None:
            if self._prior is None:
                self._prior = _head_ratio(ref)
            ratio = self._prior
        return round(ref.bytes * ratio)


def _head_ratio(ref: DatasetRef, probe: int = 64 * 1024) -> float:
    """Lines per byte in the first 64 KiB of a dataset: the estimate before any dataset was read."""
    try:
        with open(ref.path, "rb") as f:
            f.seek(ref.start)
            head = f.read(min(probe, ref.bytes))
    except OSError:
        return 0.0
    return (head.count(b"\n") or 1) / max(len(head), 1)


class Quarantine:
    """quarantine.jsonl, deduplicated by (file, byte offset or record number) across replays and restarts."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, QUARANTINE)
        self._keys = {quarantine_key(r) for r in read_jsonl(self.path)}

    def add(self, records: list[dict]) -> int:
        new = [r for r in records if quarantine_key(r) not in self._keys]
        self._keys.update(quarantine_key(r) for r in new)
        append_jsonl(self.path, new)
        return len(new)


class Accountant:
    """Turns completed batches into dataset and batch records and feeds the admission policy."""

    def __init__(
        self,
        recorder: MetricsRecorder,
        quarantine: Quarantine,
        parts_dir: str,
        policy: AdmissionPolicy,
        admission: str,
        partitioner: str,
    ) -> None:
        self.recorder = recorder
        self.quarantine = quarantine
        self.parts_dir = parts_dir
        self.policy = policy
        self.admission = admission
        self.partitioner = partitioner
        self.rows = RowEstimator()
        self.inflight: Planned | None = None
        self.batches = 0
        self._rows_done = 0
        self._proc_done = 0.0

    def complete(self, end: int, now: float) -> Planned | None:
        """Account the in-flight batch if it ends at ``end``; returns it (None if nothing was in flight)."""
        p = self.inflight
        if p is None or p.end != end:
            return None
        self.inflight = None
        records, per_seq = self._records(p, now)
        data = [r for r in records if not r.sentinel]
        rows = sum(r.rows for r in records)
        proc = max(now - p.admitted_at, 1e-9)
        self._rows_done += rows
        self._proc_done += proc
        max_lat = max((r.latency for r in data), default=0.0)
        block_rows = p.block_rows if p.block_rows is not None else [sum(per_seq.get(s, 0) for s in b) for b in p.blocks]
        self.recorder.datasets(records)
        self.recorder.batch(
            BatchRecord(
                batch=self.batches,
                start=p.start,
                end=p.end,
                datasets=len(records),
                rows=rows,
                bytes=sum(r.bytes for r in records),
                quarantined=sum(r.quarantined for r in records),
                admitted_at=p.admitted_at,
                planned_at=p.planned_at,
                completed_at=now,
                buffering_time=max((r.buffering for r in data), default=0.0),
                processing_time=proc,
                max_latency=max_lat,
                avg_throughput=self._rows_done / self._proc_done,
                est_max_latency=p.est_max_latency,
                admission=self.admission,
                block_rows=block_rows,
                plan_seconds=p.plan_seconds,
                partitioner=self.partitioner,
                extra={
                    **{k: v for k, v in self.policy.state().items() if v is not None},
                    "source_cpu_s": time.process_time(),
                },  # the source process's CPU so far (driver-side cost)
            )
        )
        self.policy.on_batch_complete(BatchOutcome(rows, p.admitted_at, now, max_lat, p.est_max_latency))
        self.batches += 1
        for ref in p.refs:
            with contextlib.suppress(FileNotFoundError):
                os.remove(part_path(self.parts_dir, ref.seq))
        return p

    def _records(self, p: Planned, now: float) -> tuple[list[DatasetRecord], dict[int, int]]:
        records, per_seq, bad = [], {}, []
        for ref in p.refs:
            part = read_part(self.parts_dir, ref.seq)
            if part is None:
                log.warning("no read report for dataset %d (%s): its rows were not counted", ref.seq, ref.path)
                part = {"rows": 0, "bad": []}
            rows = int(part["rows"])
            per_seq[ref.seq] = rows
            if not ref.sentinel:
                self.rows.observe(rows + len(part["bad"]), ref.bytes)
            bad += [{"seq": ref.seq, "path": ref.path, **b} for b in part["bad"]]
            records.append(
                DatasetRecord(
                    ref.seq,
                    ref.path,
                    ref.arrival,
                    rows,
                    ref.bytes,
                    len(part["bad"]),
                    ref.sentinel,
                    batch=self.batches,
                    admitted_at=p.admitted_at,
                    completed_at=now,
                )
            )
        self.quarantine.add(bad)
        return records, per_seq
