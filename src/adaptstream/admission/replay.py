"""Drive an admission policy through a seeded arrival trace with a modelled processing time, without Spark.

This is a *simulated* engine for testing policies and producing golden traces: processing time is
``overhead + rows / rows_per_second`` (the shape measured for Spark micro-batches, DESIGN.md), and the policy is
polled every ``poll`` seconds between batches, as Spark polls ``latestOffset``. Real measurements come from Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from adaptstream.admission.base import AdmissionPolicy, BatchOutcome, PendingDataset


@dataclass(frozen=True)
class SimBatch:
    admitted_at: float
    completed_at: float
    datasets: int
    rows: int
    max_latency: float


def replay(policy: AdmissionPolicy, rows_per_second: list[int], overhead: float = 0.25,
           rows_per_sec_capacity: float = 5000.0, poll: float = 0.02, tail: float = 60.0) -> list[SimBatch]:
    """One dataset arrives at the end of every second ``k`` with ``rows_per_second[k]`` rows."""
    arrivals = [(k + 1.0, n) for k, n in enumerate(rows_per_second)]
    end_time = len(arrivals) + tail
    now, nxt = 0.0, 0
    pending: list[PendingDataset] = []
    batches: list[SimBatch] = []
    while now < end_time and (nxt < len(arrivals) or pending):
        while nxt < len(arrivals) and arrivals[nxt][0] <= now:
            pending.append(PendingDataset(nxt, arrivals[nxt][0], arrivals[nxt][1]))
            nxt += 1
        if pending and policy.admit(now, pending):
            rows = sum(d.rows for d in pending)
            done = now + overhead + rows / rows_per_sec_capacity
            max_lat = max(done - d.arrival for d in pending)
            batches.append(SimBatch(round(now, 6), round(done, 6), len(pending), rows, round(max_lat, 6)))
            policy.on_batch_complete(BatchOutcome(rows, now, done, max_lat))
            pending, now = [], done
        else:
            now = round(now + poll, 9)
    return batches
