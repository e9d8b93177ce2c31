"""LMStream's latency-bounded dynamic batching (Algorithm 1 with Eq. 2-6 of the LMStream paper).

EstMaxLat_i = max buffering age of the pending datasets + Proc(pending rows)                 (Eq. 6)
AvgThPut_i  = all rows processed / all processing time so far                               (Eq. 4)
Sliding window (SlideTime > 0): admit when EstMaxLat_i >= SlideTime                          (Eq. 2)
Tumbling window (SlideTime = 0): admit when EstMaxLat_i >= mean of past MaxLat                (Eq. 3)

The paper estimates Proc(rows) = rows / AvgThPut_{i-1}. Under load that estimate is wrong on Spark (see
docs/lmstream.md, "Why lmstream missed the bound under load"), so by default (``estimator="regression"``,
``lookahead=True``) four documented deviations apply; ``estimator="avgthput", lookahead=False, margin=0,
warmup_batches=0`` is the paper's rule exactly.

* **Processing time tracks the load:** Proc(rows) = a + b * rows, least squares over the last ``history``
  completed batches (the paper's online regression idea of Eq. 10, applied to the processing time). Eq. 4 is
  cumulative over the whole run and has no per-batch cost, so it under-estimates big batches after small ones and
  lags when the cost per row changes (window state filling up, other work on the machine). Equal batch sizes
  (constant traffic) cannot identify the intercept; then it is the measured no-data batch (a batch of zero rows,
  see below), so the small batch at the end of a burst is not estimated as a proportional share of a big one.
* **The next chance to admit:** a decision not to admit now is a decision to wait until the next poll. Spark
  polls every ``poll_interval``, except that after each data batch of a stateful query it runs a *no-data batch*
  (the watermark moved) before it polls again. The policy admits now when waiting until then would break the
  target: EstMaxLat at the next poll = age + gap + Proc(rows + rate * gap), with the arrival rate of recent
  datasets. The gap after the first poll following a batch has a prior from the start: a no-data batch is a batch
  of zero rows, Proc(0) = a; observed gaps replace it.
* **The time the next batch waits for this one:** the data arriving while this batch runs waits for it, so the
  next batch cannot have a MaxLat below Proc(this batch) + Proc(rate * Proc(this batch)). The policy admits
  once that lower bound reaches the target: it never grows a batch so far that the next one must miss.
* **A margin that adapts to the estimation error** (``margin="auto"``). Sliding windows have a hard bound
  (Eq. 2): a batch admitted at EstMaxLat = slide - margin misses it exactly when Proc_actual - Proc_estimated
  exceeds the margin, so the margin is the *largest* recent error: the last ``history`` errors of past estimates
  and the residuals of the current fit on the batches it was fitted to, and at least ``margin_floor`` x slide.
  The largest of about a dozen errors is only their ~92nd percentile, short of a 95 % target, so the margin is
  also at least mean + ``margin_z`` (2) x sd of the under-estimates (over-estimates count as 0).
  Without the floor, a margin learned from a few accurate batches (0.05 s) let the next 0.2 s of noise break the
  bound, and early in a run there is no error record at all. Tumbling windows have a soft target
  (Eq. 3, the running mean of MaxLat) that a large margin would drag down batch after batch, so there the margin
  is the 90th percentile of the past estimates' errors. Both shrink again when estimates are good. A number
  gives a fixed margin in seconds.

* **A guard where the bound cannot be held** (``guard``, sliding windows). Near a query's capacity the processing
  time of a batch varies by more than any margin can cover (on local[2], LR1S at 4000 rows/s: 8000-row batches took
  1.6-3.2 s), and a policy that buffers turns that noise into misses while Spark's default, which admits whatever
  waits as soon as it can, stays within the bound (docs/lmstream.md, "Near capacity"). So a data batch whose MaxLat
  exceeds the slide switches the policy to admitting at every chance, as Spark's default does, for ``guard``
  batches; a miss within ``2 x guard`` batches of the last stay doubles the next stay (up to 8 x guard). The
  estimates keep learning meanwhile. ``guard=0`` turns it off.

Other additions: until a batch has completed there is nothing to estimate with, so the policy admits at once
(Spark runs batch 0 anyway); the first ``warmup_batches`` completed batches pay Spark's code generation and are
not learned from. Bounded state: Eq. 4 and the tumbling target (Eq. 3, the mean of *all* past MaxLat) are running
sums; everything else lives in ring buffers of ``history`` entries.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptstream.admission.base import AdmissionPolicy, BatchOutcome, PendingDataset
from adaptstream.errors import ConfigError
from adaptstream.policy import finite_or_none

ESTIMATORS = ("regression", "avgthput")


@dataclass(frozen=True)
class LMStreamConfig:
    slide: float = 10.0  # SlideTime in seconds; 0 means a tumbling window
    margin: float | str = "auto"
    poll_interval: float = 0.02  # how late the next decision can come (Spark's pollingDelay)
    history: int = 12  # completed batches (and poll gaps, datasets) remembered
    warmup_batches: int = 1  # first completed batches not learned from (0 = the paper's Eq. 4 exactly)
    estimator: str = "regression"  # Proc(rows): "regression" (a + b*rows, recent batches) or "avgthput" (Eq. 6)
    lookahead: bool = True  # decide for the next poll and the next batch (False: the paper's rule)
    margin_floor: float = 0.1  # sliding windows, margin="auto": the margin is at least this x slide
    margin_z: float = 2.0  # sliding windows, margin="auto": ... and at least mean + z x sd of recent errors
    guard: int = 12  # sliding windows: batches admitted at once after a miss (doubling on repeats; 0 = off)

    def build(self) -> LMStreamPolicy:
        if self.slide < 0:
            msg = f"lmstream slide must be >= 0 seconds (0 = tumbling), got {self.slide}"
            raise ConfigError(msg)
        if not (self.margin == "auto" or (isinstance(self.margin, int | float) and self.margin >= 0)):
            msg = f"lmstream margin must be 'auto' or a non-negative number of seconds, got {self.margin!r}"
            raise ConfigError(msg)
        if not 0 <= self.margin_floor < 1:
            msg = f"lmstream margin_floor must be a fraction of the slide in [0, 1), got {self.margin_floor!r}"
            raise ConfigError(msg)
        if not 0 <= self.margin_z <= 10:
            msg = f"lmstream margin_z must be a number of standard deviations in [0, 10], got {self.margin_z!r}"
            raise ConfigError(msg)
        if self.history < 2 or self.warmup_batches < 0 or self.poll_interval < 0 or self.guard < 0:
            msg = (
                "lmstream needs history >= 2, warmup_batches >= 0, poll_interval >= 0 and guard >= 0, got "
                f"history={self.history}, warmup_batches={self.warmup_batches}, poll_interval={self.poll_interval}, "
                f"guard={self.guard}"
            )
            raise ConfigError(msg)
        if self.estimator not in ESTIMATORS:
            msg = f"lmstream estimator must be one of {', '.join(ESTIMATORS)}, got {self.estimator!r}"
            raise ConfigError(msg)
        return LMStreamPolicy(self)


def fit_proc(obs: Sequence[tuple[float, float]], a0: float = 0.0) -> tuple[float, float] | None:
    """(a, b) of proc = a + b * rows by least squares, with a >= 0 and b >= 0. When the batch sizes hardly differ
    (constant traffic) the intercept cannot be told apart from the slope: then a is the prior ``a0`` (the measured
    cost of a zero-row batch, at most the cheapest batch seen) and b fits what remains."""
    if not obs:
        return None
    r = np.array([o[0] for o in obs], dtype=float)
    p = np.array([o[1] for o in obs], dtype=float)
    if r.sum() <= 0:
        return float(p.mean()), 0.0
    if len(r) >= 3 and r.std() >= 0.1 * r.mean():
        b, a = np.polyfit(r, p, 1)
        if a >= 0 and b >= 0:
            return float(a), float(b)
        if b < 0:
            return float(p.mean()), 0.0
    a = min(max(a0, 0.0), float(p.min()))
    return a, float((r * (p - a)).sum() / (r * r).sum())


def p90(xs: Sequence[float]) -> float:
    """The 90th percentile (numpy's linear rule) of a short list, without numpy's per-call cost."""
    v = sorted(xs)
    pos = 0.9 * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


class LMStreamPolicy(AdmissionPolicy):
    name = "lmstream"

    def __init__(self, config: LMStreamConfig) -> None:
        self.config = config
        h = config.history
        self.rows_done = 0
        self.proc_time_done = 0.0
        self.batches_seen = 0
        self.max_lat_sum = 0.0  # Eq. 3 target: sum and count of every past MaxLat (O(1), not a list)
        self.max_lat_count = 0
        self._obs: deque[tuple[float, float]] = deque(maxlen=h)  # (rows, processing time) of recent batches
        self._proc_errors: deque[float] = deque(maxlen=h)  # actual - estimated processing time
        self._poll_gaps: deque[float] = deque(maxlen=h)  # gaps between ordinary polls
        self._after_gaps: deque[float] = deque(maxlen=h)  # gap after the first poll that follows a batch
        self._arrivals: deque[tuple[float, int]] = deque(maxlen=h)  # (arrival, rows) of recent datasets
        self._last_seq = -1
        self._last_poll: float | None = None
        self._polls_after_batch = 0
        self._last_est_proc: float | None = None
        self._decision: dict[str, float] = {}  # what the last admission acted on (logged per batch)
        self._model: tuple[float, float] | None = None  # fit of _obs, derived (not part of the snapshot)
        self._guard_left = 0  # batches still admitted at once after a miss
        self._guard_stay = config.guard  # the next stay's length (doubles on repeated misses)
        self._since_guard = 0  # completed batches since the last stay ended
        self.guard_stays = 0  # how often the guard took over (logged)

    # -- learned quantities -------------------------------------------------------------------------------
    @property
    def avg_throughput(self) -> float | None:
        """AvgThPut (Eq. 4), rows per second of processing time; None before any batch completed."""
        if self.proc_time_done <= 0 or self.rows_done <= 0:
            return None
        return self.rows_done / self.proc_time_done

    @property
    def target(self) -> float | None:
        """The latency the policy holds MaxLat to: SlideTime, or the mean of past MaxLat when tumbling."""
        if self.config.slide > 0:
            return self.config.slide
        return self.max_lat_sum / self.max_lat_count if self.max_lat_count else None

    def proc_model(self) -> tuple[float, float] | None:
        """(a, b) of the processing-time estimate a + b * rows; None before anything was learned."""
        if self.config.estimator == "avgthput":
            thput = self.avg_throughput
            return None if thput is None else (0.0, 1.0 / thput)
        if self._model is None and self._obs:
            self._model = fit_proc(self._obs, self.zero_row_cost())  # refitted only when a batch completed
        return self._model

    def zero_row_cost(self) -> float:
        """The intercept's prior: Spark's no-data batch after each data batch of a stateful query is a batch of
        zero rows, so the median gap it leaves between polls (less the poll interval) is Proc(0). About 0 for
        stateless queries, which run no such batch."""
        if not self._after_gaps:
            return 0.0
        return max(float(np.median(self._after_gaps)) - self.config.poll_interval, 0.0)

    def estimate_proc(self, rows: float) -> float | None:
        model = self.proc_model()
        return None if model is None else model[0] + model[1] * rows

    def margin(self) -> float:
        if self.config.margin != "auto":
            return float(self.config.margin)
        err = self.error_margin()
        return err if self.config.lookahead else err + self.decision_gap()

    def error_margin(self) -> float:
        """The automatic margin (module docstring): for sliding windows the largest recent error, at least
        mean + z x sd of the under-estimates and margin_floor x slide; the p90 of errors for tumbling windows."""
        errs = list(self._proc_errors)
        if self.config.slide <= 0:
            return max(p90(errs), 0.0) if errs else 0.0
        model = self.proc_model()
        if model is not None:
            errs += [p - (model[0] + model[1] * r) for r, p in self._obs]
        under = np.maximum(errs, 0.0)  # over-estimates cannot break the bound: they count as 0, not as spread
        spread = float(under.mean() + self.config.margin_z * under.std()) if len(errs) >= 3 else 0.0
        return max(max(errs, default=0.0), spread, self.config.margin_floor * self.config.slide)

    def decision_gap(self) -> float:
        """How late the next chance to admit comes if the policy does not admit now: after the first poll that
        follows a batch, Spark runs a no-data batch of a stateful query first (prior: Proc(0 rows) until seen);
        otherwise the 90th percentile of recent gaps between polls, at least the poll interval."""
        if self._polls_after_batch == 0 and self.config.lookahead:
            if self._after_gaps:
                return max(self.config.poll_interval, p90(self._after_gaps))
            return max(self.config.poll_interval, self.estimate_proc(0) or 0.0)
        if not self._poll_gaps:
            return self.config.poll_interval
        return max(self.config.poll_interval, p90(self._poll_gaps))

    def arrival_rate(self, pending: Sequence[PendingDataset]) -> float:
        """Rows per second over the recent datasets (admitted and pending); 0 with fewer than two."""
        seen = list(self._arrivals) + [(d.arrival, d.rows) for d in pending if d.seq > self._last_seq]
        seen = seen[-self.config.history :]
        if len(seen) < 2:
            return 0.0
        span = seen[-1][0] - seen[0][0]
        return sum(r for _, r in seen[1:]) / span if span > 0 else 0.0

    # -- decisions ------------------------------------------------------------------------------------------
    def estimate_max_latency(self, now: float, pending: Sequence[PendingDataset]) -> float | None:
        """Eq. 6 with the processing-time estimate: oldest dataset's age + Proc(pending rows)."""
        if not pending:
            return None
        proc = self.estimate_proc(sum(d.rows for d in pending))
        if proc is None:
            return None
        return max(now - min(d.arrival for d in pending), 0.0) + proc

    def admit(self, now: float, pending: Sequence[PendingDataset]) -> bool:
        if self._last_poll is not None and self.batches_seen > 0:  # start-up gaps (Spark's batch 0) not counted
            gaps = self._after_gaps if self._polls_after_batch == 1 else self._poll_gaps
            gaps.append(now - self._last_poll)
            if gaps is self._after_gaps:
                self._model = None  # the intercept's prior changed: the fit is a function of the state alone
        admitted = bool(pending) and self._decide(now, pending)
        self._polls_after_batch += 1
        self._last_poll = None if admitted else now  # after an admission the gap is the batch, not a delay
        return admitted

    def _decide(self, now: float, pending: Sequence[PendingDataset]) -> bool:
        rows = sum(d.rows for d in pending)
        target, proc = self.target, self.estimate_proc(rows)
        if target is None or proc is None:  # nothing learned yet: admit, as batch 0 would run anyway
            return self._admitted(pending, None, {})
        if self._guard_left > 0:  # the bound was missed lately: admit at every chance, as Spark's default
            return self._admitted(pending, proc, {"est_proc": proc, "guard": float(self._guard_left)})
        age = max(now - min(d.arrival for d in pending), 0.0)
        margin = self.margin()
        decision = {"est_proc": proc, "margin": margin, "polls": float(self._polls_after_batch)}
        if self.config.lookahead:
            gap, rate = self.decision_gap(), self.arrival_rate(pending)
            wait = age + gap + (self.estimate_proc(rows + rate * gap) or 0.0)  # EstMaxLat at the next chance
            nxt = proc + (self.estimate_proc(rate * proc) or 0.0)  # the next batch's data waits for this one
            decision.update(gap=gap, rate=rate, est_wait=wait, est_next=nxt)
            admit = max(wait, nxt) + margin >= target
        else:
            admit = age + proc + margin >= target
        return admit and self._admitted(pending, proc, decision)

    def _admitted(self, pending: Sequence[PendingDataset], est_proc: float | None, decision: dict) -> bool:
        self._last_est_proc = est_proc
        self._decision = decision
        self._arrivals.extend((d.arrival, d.rows) for d in pending if d.seq > self._last_seq)
        self._last_seq = max(self._last_seq, max(d.seq for d in pending))
        return True

    def on_batch_complete(self, outcome: BatchOutcome) -> None:
        self.batches_seen += 1
        self._polls_after_batch = 0
        self.max_lat_sum += outcome.max_latency
        self.max_lat_count += 1
        est, self._last_est_proc = self._last_est_proc, None
        if self.batches_seen <= self.config.warmup_batches:
            return  # the first batch pays Spark's code generation: not representative of throughput
        if est is not None:
            self._proc_errors.append(outcome.processing_time - est)
        self._update_guard(outcome.max_latency)
        self._obs.append((float(outcome.rows), outcome.processing_time))
        self._model = None
        self.rows_done += outcome.rows
        self.proc_time_done += outcome.processing_time

    def _update_guard(self, max_latency: float) -> None:
        """A miss of the sliding bound hands admission to the at-once rule for a stay that doubles when misses
        follow each other (module docstring); stays end batch by batch."""
        cfg = self.config
        if cfg.guard <= 0 or cfg.slide <= 0:
            return
        if self._guard_left > 0:
            self._guard_left -= 1
            self._since_guard = 0
            return
        self._since_guard += 1
        if max_latency <= cfg.slide:
            if self._since_guard > 2 * cfg.guard:
                self._guard_stay = cfg.guard  # a long on-time stretch: the next miss starts over
            return
        self._guard_left = self._guard_stay
        self._guard_stay = min(2 * self._guard_stay, 8 * cfg.guard)
        self.guard_stays += 1

    def state(self) -> dict[str, float | int | None]:
        model = self.proc_model()
        out: dict[str, float | int | None] = {"avg_thput": self.avg_throughput, "target": self.target}
        if self.guard_stays:
            out["guard_stays"] = self.guard_stays
        if model is not None:
            out.update(proc_a=model[0], proc_b=model[1])
        return {**out, "margin": self.margin(), **self._decision}

    def _state(self) -> dict[str, Any]:
        return {
            "rows_done": self.rows_done,
            "proc_time_done": self.proc_time_done,
            "batches_seen": self.batches_seen,
            "max_lat_sum": self.max_lat_sum,
            "max_lat_count": self.max_lat_count,
            "obs": [list(o) for o in self._obs],
            "proc_errors": list(self._proc_errors),
            "poll_gaps": list(self._poll_gaps),
            "after_gaps": list(self._after_gaps),
            "arrivals": [list(a) for a in self._arrivals],
            "last_seq": self._last_seq,
            "last_poll": finite_or_none(self._last_poll),
            "polls_after_batch": self._polls_after_batch,
            "last_est_proc": finite_or_none(self._last_est_proc),
            "decision": dict(self._decision),
            "guard": [self._guard_left, self._guard_stay, self._since_guard, self.guard_stays],
        }

    def _load_state(self, state: Mapping[str, Any]) -> None:
        h = self.config.history
        self.rows_done = int(state["rows_done"])
        self.proc_time_done = float(state["proc_time_done"])
        self.batches_seen = int(state["batches_seen"])
        self.max_lat_sum = float(state["max_lat_sum"])
        self.max_lat_count = int(state["max_lat_count"])
        self._obs = deque(((float(r), float(p)) for r, p in state["obs"]), maxlen=h)
        self._model = None
        self._proc_errors = deque((float(x) for x in state["proc_errors"]), maxlen=h)
        self._poll_gaps = deque((float(x) for x in state["poll_gaps"]), maxlen=h)
        self._after_gaps = deque((float(x) for x in state["after_gaps"]), maxlen=h)
        self._arrivals = deque(((float(t), int(r)) for t, r in state["arrivals"]), maxlen=h)
        self._last_seq = int(state["last_seq"])
        lp, le = state["last_poll"], state["last_est_proc"]
        self._last_poll = None if lp is None else float(lp)
        self._polls_after_batch = int(state["polls_after_batch"])
        self._last_est_proc = None if le is None else float(le)
        self._decision = {k: float(v) for k, v in state["decision"].items()}
        g = state.get("guard", [0, self.config.guard, 0, 0])  # snapshots from before the guard had none
        self._guard_left, self._guard_stay, self._since_guard, self.guard_stays = (int(x) for x in g)
