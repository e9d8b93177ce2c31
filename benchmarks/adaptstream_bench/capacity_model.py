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
* **N queries under Spark's default scheduling** share the machine (processor sharing: each batch runs N times
  slower): P = N a / (1 - N b r), with a and b the queries' means. A window's output latency (Klink Sec. 6.1.2) is
  the watermark delay d plus the one-second dataset that carries the watermark (``input``), half a batch waiting
  for the running one (``wait``), its own batch, and the next batch that emits it: L = d + 1 + 2.5 P. The deadline
  L <= S breaks at **N* = Pmax / (a + Pmax b r)** with Pmax = (S - d - 1) / 2.5.
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


def queries_per_driver(fits: list[Fit], rate: float, slide: float, watermark_delay: float) -> float | None:
    """N* for queries of these fits (mixed in equal shares), each at ``rate`` rows/s, with a deadline of ``slide``."""
    if not fits:
        return None
    a = max(float(np.mean([f.a for f in fits])), 0.0)
    b = max(float(np.mean([f.b for f in fits])), 0.0)
    pmax = deadline_batch(slide, watermark_delay)
    denom = a + pmax * b * rate
    return pmax / denom if denom > 0 else None


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
    fits: list[Fit], rate: float, slide: float, watermark_delay: float, driver_cores: int, executors: int,
    calibration_cores: int = 2,
) -> float | None:  # fmt: skip
    """N* on a driver of ``driver_cores`` with ``executors`` one-core executors, **a projection**: it assumes the
    per-batch cost a shrinks with driver cores and the per-row cost b with executor cores, both linearly from the
    calibration machine's cores (local mode: driver and executors share them). No run here checks it."""
    scaled = [
        Fit(f.a * calibration_cores / driver_cores, f.b * calibration_cores / executors, f.r2, f.batches,
            f.rows_min, f.rows_max)
        for f in fits
    ]  # fmt: skip
    return queries_per_driver(scaled, rate, slide, watermark_delay)
