"""Output latency as Klink measures it (Sec. 6.1.2): for each window result, the wall time at which the sink wrote
it minus the event time of the sweeping watermark that closed the window.

In Spark a window ``[start, end)`` is closed by the first watermark at or past ``end``; the event time of that
sweeping watermark is ``end`` (to within the input's granularity of one-second datasets), so the latency of a
window is ``written - wall(end)``, where ``wall`` maps event time to the wall clock of the generator that produced
the run's input (dataset ``k``, i.e. event second ``k``, is due at ``origin + k + 1``). The write time of a
micro-batch's results is the modification time of the ``_SUCCESS`` marker Spark's Parquet writer leaves in
``results/batch_id=N/``. It includes the watermark delay, as Klink's does (a watermark of time ``end`` exists once
events up to ``end + delay`` were generated). Runs on ``--input`` files have no generator clock: not measured.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pyarrow as pa

from adaptstream.workloads.lmstream_queries import RUN_EPOCH_S

_BATCH = re.compile(r"^batch_id=(\d+)$")


def generator_origin(run_dir: str) -> float | None:
    """Wall time of event time 0 of a generated run (dataset 0 was written at origin + 1), or None."""
    first = os.path.join(run_dir, "input", "00000000.csv")
    return os.path.getmtime(first) - 1.0 if os.path.exists(first) else None


def window_latencies(run_dir: str) -> list[float]:
    """One latency (seconds) per window closed, over every micro-batch that wrote results."""
    import pyarrow.parquet as pq

    origin = generator_origin(run_dir)
    results = os.path.join(run_dir, "results")
    if origin is None or not os.path.isdir(results):
        return []
    out: list[float] = []
    for name in sorted(os.listdir(results)):
        folder = os.path.join(results, name)
        marker = os.path.join(folder, "_SUCCESS")
        if not _BATCH.match(name) or not os.path.exists(marker):
            continue
        files = [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".parquet")]
        if not files:
            continue
        table = (
            pq.read_table(files, columns=["window_end"])
            if len(files) > 1
            else pq.read_table(files[0], columns=["window_end"])
        )
        if table.num_rows == 0:
            continue
        # Spark writes INT96 timestamps, which pyarrow reads as nanoseconds: normalise to microseconds
        col = table.column("window_end").cast(pa.timestamp("us"), safe=False).cast(pa.int64())
        ends = np.unique(col.to_numpy()) / 1e6
        written = os.path.getmtime(marker)
        out += [float(written - (origin + (e - RUN_EPOCH_S))) for e in ends]
    return out


def summarize(latencies: list[float]) -> dict:
    if not latencies:
        return {"windows": 0, "mean_s": None, "p50_s": None, "p99_s": None}
    a = np.asarray(latencies)
    return {
        "windows": len(a),
        "mean_s": float(a.mean()),
        "p50_s": float(np.percentile(a, 50)),
        "p99_s": float(np.percentile(a, 99)),
    }


def output_latency(run_dir: str) -> dict:
    """Mean, median and p99 output latency of one run directory (``windows`` 0 when not measurable)."""
    return summarize(window_latencies(run_dir))
