"""Output latency as Klink measures it (Sec. 6.1.2): for each window result, the wall time at which the sink wrote
it minus the event time of the sweeping watermark that closed the window.

In Spark a window ``[start, end)`` is closed by the first watermark at or past ``end``; the event time of that
sweeping watermark is ``end`` (to within the input's granularity of one-second datasets), so the latency of a
window is ``written - wall(end)``. The write time of a micro-batch's results is the modification time of the
``_SUCCESS`` marker Spark's Parquet writer leaves in ``results/batch_id=N/``. Two clocks map event time to wall
time:

* ``generator`` (generated input): the clock of the generator that produced the run's input (dataset ``k``, i.e.
  event second ``k``, is due at ``origin + k + 1``), so ``wall(end) = origin + end``. It includes the watermark
  delay, as Klink's does (a watermark of time ``end`` exists once events up to ``end + delay`` were generated).
  In a drained run, windows reaching past the generated data (the last sliding windows) are closed by the
  end-of-input marker: their ``wall(end)`` is the marker's arrival when that is earlier.
* ``ingestion`` (``--input`` files, which carry no generator clock): ``wall(end)`` is the arrival at the
  connector of the first dataset holding an event at or past ``end`` (datasets in manifest order, event times
  read back from the input files); windows that only the end-of-input marker closes take the marker's arrival.
  A replay whose files were all present at the start measures the backlog too: every window waits for the
  datasets before it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from adaptstream.workloads.lmstream_queries import RUN_EPOCH_S

_BATCH = re.compile(r"^batch_id=(\d+)$")


def generator_origin(run_dir: str) -> float | None:
    """Wall time of event time 0 of a generated run (dataset 0 was written at origin + 1), or None."""
    first = os.path.join(run_dir, "input", "00000000.csv")
    return os.path.getmtime(first) - 1.0 if os.path.exists(first) else None


def _workload(run_dir: str):
    import json

    from adaptstream.workloads import WORKLOADS

    with open(os.path.join(run_dir, "run.json")) as f:
        return WORKLOADS.get(json.load(f)["spec"]["workload"])


def _jsonl(path: str) -> list[dict]:
    import json

    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _manifest(run_dir: str) -> list[dict]:
    return _jsonl(os.path.join(run_dir, "metrics", "source", "manifest.jsonl"))


def end_marker_arrival(run_dir: str) -> float | None:
    """When the end-of-input marker (``--drain``) reached the connector, or None."""
    return next((float(r["arrival"]) for r in _manifest(run_dir) if r.get("sentinel")), None)


def ingestion_clock(run_dir: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """``wall(end)`` for a run on input files: the arrival of the first dataset holding event time >= ``end``
    (absolute seconds, as in the results). None when the run has no files manifest (or a Redis input)."""
    import pyarrow.csv as pacsv

    refs = _manifest(run_dir)
    if not refs or not os.path.exists(os.path.join(run_dir, "run.json")):
        return None
    from adaptstream.workloads import GENERATORS

    workload = _workload(run_dir)
    gen = GENERATORS.get(workload.generator)().build()
    col, scale = workload.event_time_column, workload.event_seconds()
    newest, arrivals, end_marker = [], [], None
    for ref in refs:
        if ref.get("sentinel"):
            end_marker = float(ref["arrival"]) if end_marker is None else end_marker
            continue
        if int(ref.get("entries", -1)) >= 0 or not os.path.isfile(ref["path"]):
            return None  # a Redis stream: no files to read the event times back from
        with open(ref["path"], "rb") as f:
            f.seek(int(ref.get("start", 0)))
            data = f.read(int(ref["bytes"]))
        opts = pacsv.ReadOptions(column_names=None if gen.csv_header() else gen.arrow_schema.names)
        conv = pacsv.ConvertOptions(column_types={col: gen.arrow_schema.field(col).type}, include_columns=[col])
        times = pacsv.read_csv(pa.BufferReader(data), read_options=opts, convert_options=conv).column(col)
        if len(times) == 0 or times.null_count == len(times):
            continue
        newest.append(RUN_EPOCH_S + float(pc.max(times).as_py()) * scale)
        arrivals.append(float(ref["arrival"]))
    if not arrivals:
        return None
    reach = np.maximum.accumulate(np.asarray(newest))  # event time the input has reached by each dataset
    arr = np.asarray(arrivals)
    last = end_marker if end_marker is not None else arr[-1]

    def wall(ends: np.ndarray) -> np.ndarray:
        i = np.searchsorted(reach, ends, side="left")
        return np.where(i < len(arr), arr[np.minimum(i, len(arr) - 1)], last)

    return wall


def event_clock(run_dir: str) -> tuple[str, Callable[[np.ndarray], np.ndarray]] | None:
    """The clock mapping absolute event seconds to wall time for this run, with its name (module docstring)."""
    origin = generator_origin(run_dir)
    if origin is not None:
        marker = end_marker_arrival(run_dir)  # a drained run: windows past the data close with the marker
        cap = np.inf if marker is None else marker
        return "generator", lambda ends: np.minimum(origin + (ends - RUN_EPOCH_S), cap)
    wall = ingestion_clock(run_dir)
    return None if wall is None else ("ingestion", wall)


def written_windows(run_dir: str) -> list[tuple[float, float]]:
    """(window end in absolute event seconds, wall time its result was written) for every window closed, in the
    order of the micro-batches that wrote them."""
    import pyarrow.parquet as pq

    results = os.path.join(run_dir, "results")
    if not os.path.isdir(results):
        return []
    out: list[tuple[float, float]] = []
    for name in sorted(os.listdir(results), key=lambda n: int(m.group(1)) if (m := _BATCH.match(n)) else -1):
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
        written = os.path.getmtime(marker)
        out += [(float(e) / 1e6, written) for e in np.unique(col.to_numpy())]
    return out


def window_latencies(
    run_dir: str,
    clock: tuple[str, Callable[[np.ndarray], np.ndarray]] | None = None,
    windows: list[tuple[float, float]] | None = None,
) -> list[float]:
    """One latency (seconds) per window closed, over every micro-batch that wrote results (``windows``: what
    :func:`written_windows` returned, when the caller has read it already)."""
    clock = clock or event_clock(run_dir)
    if clock is None:
        return []
    wins = written_windows(run_dir) if windows is None else windows
    if not wins:
        return []
    ends = np.asarray([e for e, _ in wins])
    return [float(w - x) for (_, w), x in zip(wins, clock[1](ends), strict=True)]


BREAKDOWN = ("input", "wait", "batch", "emit")


def latency_breakdown(run_dir: str, windows: list[tuple[float, float]] | None = None) -> list[dict[str, float]]:
    """Where each window's output latency goes, for generated input (one dataset per event second), windows
    closed by a watermark mid-run only (not by the end-of-input marker):

    * ``input``: arrival of its sweeping watermark's dataset minus the window's end (the workload's share: the
      watermark delay and the one-second datasets);
    * ``wait``: that dataset's admission into a micro-batch minus its arrival (admission and scheduling);
    * ``batch``: that micro-batch, admission to completion;
    * ``emit``: the window's write minus that completion (Spark's next micro-batch, usually a no-data one, emits
      a window once the watermark passed its end).

    The sweeping watermark's dataset is event second ``end + watermark delay``: the first whose events move the
    watermark (newest event minus the delay) to ``end``. Empty when the run is not generated input. ``windows``:
    what :func:`written_windows` returned, when the caller has read it already."""
    origin = generator_origin(run_dir)
    datasets = _jsonl(os.path.join(run_dir, "metrics", "datasets.jsonl"))
    if origin is None or not datasets:
        return []
    delay = float(_workload(run_dir).watermark_delay_s)
    by_second: dict[int, dict] = {}
    for d in datasets:
        second = os.path.basename(str(d["path"])).split(".")[0]  # generated input: dataset k is event second k
        if not d.get("sentinel") and second.isdigit():
            by_second[int(second)] = d
    out = []
    for end, written in written_windows(run_dir) if windows is None else windows:
        rel = end - RUN_EPOCH_S
        swm = by_second.get(round(rel + delay))
        if swm is None or not swm.get("completed_at"):
            continue
        out.append(
            {
                "input": swm["arrival"] - (origin + rel),
                "wait": swm["admitted_at"] - swm["arrival"],
                "batch": swm["completed_at"] - swm["admitted_at"],
                "emit": written - swm["completed_at"],
            }
        )
    return out


def summarize_breakdown(parts: list[dict[str, float]]) -> dict[str, float | int | None]:
    """Mean of each part over the windows, and how many windows."""
    if not parts:
        return {"windows": 0, **dict.fromkeys(BREAKDOWN)}
    return {"windows": len(parts), **{k: float(np.mean([p[k] for p in parts])) for k in BREAKDOWN}}


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
    """Mean, median and p99 output latency of one run directory (``windows`` 0 when not measurable), and the
    clock used (``generator`` or ``ingestion``, None when not measurable)."""
    clock = event_clock(run_dir)
    return {**summarize(window_latencies(run_dir, clock)), "clock": clock[0] if clock else None}
