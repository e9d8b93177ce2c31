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


def replay(
    policy: AdmissionPolicy,
    rows_per_second: list[int],
    overhead: float = 0.25,
    rows_per_sec_capacity: float = 5000.0,
    poll: float = 0.02,
    tail: float = 60.0,
) -> list[SimBatch]:
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


def recorded_trace(metrics_dir: str, slide: float, source: str) -> dict:
    """A run's per-dataset arrivals and per-batch outcomes (times relative to the first arrival), for
    :func:`replay_recorded`: the datasets.jsonl / batches.jsonl the streaming source wrote."""
    from adaptstream.metrics.summary import load_batches, load_datasets

    ds, bs = load_datasets(metrics_dir), load_batches(metrics_dir)
    t0 = float(ds["arrival"].min())
    bs = bs[bs["max_latency"] > 0]
    return {
        "source": source,
        "slide": slide,
        "datasets": [[round(float(a) - t0, 4), int(r)] for a, r in zip(ds["arrival"], ds["rows"], strict=True)],
        "batches": [
            [
                round(float(b.admitted_at) - t0, 4),
                round(float(b.completed_at) - t0, 4),
                int(b.start),
                int(b.end),
                int(b.rows),
                round(float(b.max_latency), 4),
            ]
            for b in bs.itertuples()
        ],
    }


def replay_recorded(
    policy: AdmissionPolicy, trace: dict, poll: float = 0.02, after_gap: float = 0.0, give_up: float = 120.0
) -> list[dict]:
    """Ask the policy, for each recorded batch in turn, when it would have admitted exactly those datasets.

    Open loop: polling starts when the previous recorded batch completed and the batch's last dataset had arrived;
    the first poll after a batch is followed by ``after_gap`` (Spark's no-data batch), later ones by ``poll``. The
    policy then learns the *recorded* outcome, so every decision sees the history the real run had. Returns per
    batch the decision time relative to the recorded admission and what the policy estimated.
    """
    ds = trace["datasets"]
    out: list[dict] = []
    prev_done = None
    for adm, done, start, end, rows, max_lat in trace["batches"]:
        pending = [PendingDataset(s, ds[s][0], ds[s][1]) for s in range(start, min(end, len(ds)))]
        if not pending:
            continue
        t = max(prev_done if prev_done is not None else adm, max(d.arrival for d in pending))
        first, polls = t, 0
        while not policy.admit(t, pending):
            if t - first > give_up:
                break
            t = round(t + (after_gap if polls == 0 and after_gap > 0 else poll), 9)
            polls += 1
        est = policy.estimate_max_latency(t, pending)
        out.append(
            {
                "admit_delay": round(t - adm, 4),
                "polls": polls,
                "est_max_latency": None if est is None else round(est, 4),
                "est_proc": None if est is None else round(est - (t - min(d.arrival for d in pending)), 4),
                "proc": round(done - adm, 4),
                "max_latency": max_lat,
            }
        )
        policy.on_batch_complete(BatchOutcome(rows, adm, done, max_lat))
        prev_done = done
    return out
