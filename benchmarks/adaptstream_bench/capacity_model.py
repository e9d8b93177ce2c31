"""A capacity model of one Spark driver and its executors (issue #56 item 6): fitted per query from calibration
batches, it predicts where an experiment breaks, and the report sets that beside where the experiment broke.

The model, and why each part:

* **A micro-batch of n rows takes P(n) = a + b n** seconds on the machine it was calibrated on (local[2] here):
  ``a`` is the per-batch cost (driver planning, task launch, state-store commit, the sink's commit), ``b`` the
  per-row executor cost. Fitted by least squares on every calibration batch of the query (asap at a low rate gives
  small batches, a fixed trigger large ones).
* **One query under Spark's default (asap)** starts a batch when the previous one ends, so in steady state a batch
  holds the rows of its own processing time: P = a + b r P, i.e. P = a / (1 - b r). Its oldest row waited one
  batch and is done after the next, MaxLat ~ 2 P. A sliding window's bound MaxLat <= slide S breaks at
  **r* = (1 - 2 a / S) / b**; a tumbling window is judged against its own history, so it breaks where the backlog
  grows without bound, **r* = 1 / b**.
* **N queries under Spark's default scheduling** share the machine's C cores. Each also costs CPU: c_b per batch
  and c_r per row (CPU-seconds of the driver, executors, Python workers and generators, fitted from three
  calibration runs' CPU totals), so N queries whose batches take P each need N (c_b + c_r r P) CPU-seconds per P:
  P = max(a / (1 - b r), N c_b / (C - N c_r r)) (alone, or sharing the cores). A window's output latency (Klink
  Sec. 6.1.2) is the watermark delay d plus the one-second dataset that carries the watermark (``input``), half a
  batch waiting for the running one (``wait``), its own batch, and the next batch that emits it: L = d + 1 + 2.5 P.
  The deadline L <= S breaks at **N* = C Pmax / (c_b + Pmax c_r r)** with Pmax = (S - d - 1) / 2.5 (none when a
  query alone already takes longer than Pmax).
* **Per-query driver memory**: the slope of the driver's JVM heap in use against the number of running queries.

A measured breaking point is a bracket: the largest setting that held and the smallest that broke. The rule
(fixed before any run): a prediction p is **met** when it is within 25 % of every point of the bracket
(0.75 x broke <= p <= 1.25 x held), **missed** when it is within 25 % of none (p > 1.25 x broke or p < 0.75 x
held), **undecided** otherwise (the bracket is too coarse to tell, or one side was never reached).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

TOLERANCE = 0.25
EMIT_BATCHES = 2.5  # wait (half a batch) + the batch + the emitting batch
DATASET_S = 1.0  # generated input arrives in one-second datasets


@dataclass(frozen=True)
class Fit:
    """P(n) = a + b n for one query on the calibration machine."""

    a: float  # seconds per batch
    b: float  # seconds per row
    r2: float
    batches: int
    rows_min: int
    rows_max: int

    def as_dict(self) -> dict:
        return asdict(self)


def fit_batches(rows: list[int] | np.ndarray, seconds: list[float] | np.ndarray) -> Fit:
    """Least squares of processing time on batch rows; refuses fewer than 3 batches or a single batch size."""
    n, p = np.asarray(rows, dtype=float), np.asarray(seconds, dtype=float)
    if len(n) < 3 or n.min() == n.max():
        msg = f"a fit needs at least 3 batches of at least two sizes, got {len(n)} batches"
        raise ValueError(msg)
    design = np.column_stack([np.ones_like(n), n])
    (a, b), *_ = np.linalg.lstsq(design, p, rcond=None)
    resid = p - design @ np.array([a, b])
    total = float(((p - p.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if total > 0 else 0.0
    return Fit(float(a), float(b), r2, len(n), int(n.min()), int(n.max()))


def single_query_rate(fit: Fit, slide: float) -> float | None:
    """Rows/s at which one asap query breaks its bound (slide 0: a tumbling window, backlog growth); None when the
    fit has no positive per-row cost, 0 when its per-batch cost alone breaks the bound."""
    if fit.b <= 0:
        return None
    if slide <= 0:
        return 1.0 / fit.b
    return max(0.0, 1.0 - 2.0 * max(fit.a, 0.0) / slide) / fit.b


def deadline_batch(slide: float, watermark_delay: float) -> float:
    """The longest batch whose windows still meet a deadline of one slide (see the module's latency terms)."""
    return max(0.0, (slide - watermark_delay - DATASET_S) / EMIT_BATCHES)


@dataclass(frozen=True)
class CpuFit:
    """CPU-seconds of a run = c_run + c_batch x batches + c_row x rows (driver, executors, workers, generator)."""

    c_run: float
    c_batch: float
    c_row: float

    def as_dict(self) -> dict:
        return asdict(self)


def fit_cpu(runs: list[tuple[int, int, float]]) -> CpuFit:
    """(batches, rows, CPU-seconds) of at least three runs whose batches and rows vary independently."""
    x = np.array([[1.0, b, r] for b, r, _ in runs], dtype=float)
    if len(runs) < 3 or np.linalg.matrix_rank(x) < 3:
        msg = "a CPU fit needs three runs whose batch and row counts vary independently"
        raise ValueError(msg)
    (c0, cb, cr), *_ = np.linalg.lstsq(x, np.array([c for *_, c in runs], dtype=float), rcond=None)
    return CpuFit(float(c0), float(cb), float(cr))


def queries_per_driver(
    fits: list[Fit], cpus: list[CpuFit], rate: float, slide: float, watermark_delay: float, cores: float
) -> float | None:
    """N* for queries of these fits (mixed in equal shares), each at ``rate`` rows/s, with a deadline of ``slide``,
    on ``cores`` cores; 0 when a query alone misses it."""
    if not fits or not cpus:
        return None
    pmax = deadline_batch(slide, watermark_delay)
    a = max(float(np.mean([f.a for f in fits])), 0.0)
    b = max(float(np.mean([f.b for f in fits])), 0.0)
    if b * rate >= 1 or a / (1 - b * rate) > pmax:
        return 0.0
    cb = max(float(np.mean([c.c_batch for c in cpus])), 0.0)
    cr = max(float(np.mean([c.c_row for c in cpus])), 0.0)
    denom = cb + pmax * cr * rate
    return cores * pmax / denom if denom > 0 else None


def bracket(settings: list[tuple[float, bool]]) -> tuple[float | None, float | None, bool]:
    """(largest setting held below the smallest that broke, that smallest broken, monotone?) of (setting, held)
    pairs; None where a side was never reached."""
    broke = sorted(x for x, held in settings if not held)
    hi = broke[0] if broke else None
    held_below = [x for x, held in settings if held and (hi is None or x < hi)]
    lo = max(held_below) if held_below else None
    monotone = not any(held and hi is not None and x > hi for x, held in settings)
    return lo, hi, monotone


def verdict(predicted: float | None, lo: float | None, hi: float | None) -> bool | None:
    """The module's rule: met / missed / None (undecided)."""
    if predicted is None:
        return None
    if (hi is not None and predicted > (1 + TOLERANCE) * hi) or (lo is not None and predicted < (1 - TOLERANCE) * lo):
        return False
    if lo is not None and hi is not None and (1 - TOLERANCE) * hi <= predicted <= (1 + TOLERANCE) * lo:
        return True
    return None


def memory_per_query(counts: list[int], heap_mb: list[float]) -> tuple[float, float] | None:
    """(MB per query, MB at zero queries) from the driver heap in use at each query count; None with < 2 counts."""
    if len(set(counts)) < 2:
        return None
    slope, intercept = np.polyfit(np.asarray(counts, float), np.asarray(heap_mb, float), 1)
    return float(slope), float(intercept)


def projection(
    fits: list[Fit], cpus: list[CpuFit], rate: float, slide: float, watermark_delay: float, driver_cores: int,
    executors: int,
) -> float | None:  # fmt: skip
    """N* on a driver of ``driver_cores`` with ``executors`` one-core executors, **a projection**: it treats the
    driver's and the executors' cores as one pool of CPU, as local mode does, and keeps each query's latency floor
    (its wall-time fit alone). No run here checks it."""
    return queries_per_driver(fits, cpus, rate, slide, watermark_delay, driver_cores + executors)
