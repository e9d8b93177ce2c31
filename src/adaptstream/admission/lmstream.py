"""LMStream's latency-bounded dynamic batching (Algorithm 1 with Eq. 4-6 of the LMStream paper).

EstMaxLat_i = max buffering age of the pending datasets + pending rows / AvgThPut_{i-1}     (Eq. 6)
AvgThPut_i  = all rows processed / all processing time so far                               (Eq. 4)
Sliding window (SlideTime > 0): admit when EstMaxLat_i >= SlideTime                          (Eq. 2)
Tumbling window (SlideTime = 0): admit when EstMaxLat_i >= mean of past MaxLat                (Eq. 3)

Documented additions of ours; ``margin=0, warmup_batches=0`` gives the paper's rule exactly:
* ``margin`` (seconds, or "auto"): admit when EstMaxLat + margin >= SlideTime. The paper's rule admits once the
  estimate *reaches* the deadline, so any estimation error or poll delay pushes MaxLat over it; "auto" uses the
  90th percentile of recent under-estimates of the processing time plus the 90th percentile of recent gaps
  between polls (at least the poll interval): Spark runs no-data batches of stateful queries between polls,
  which delays the next decision by up to a second or more.
* Until a batch has completed there is no AvgThPut, so the policy admits at once (Spark runs batch 0 anyway).
* ``warmup_batches`` (default 1): the first completed data batch pays Spark's code generation (seconds), so it is
  left out of AvgThPut; with 0 the throughput is Eq. 4 exactly.

Bounded state: Eq. 4 is two running sums (rows, processing time) and the tumbling target (Eq. 3, the mean of *all*
past MaxLat) a running sum and count, so both keep the paper's cumulative semantics in O(1) memory; the auto margin
reads ring buffers of the last ``history`` batches and polls.
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


@dataclass(frozen=True)
class LMStreamConfig:
    slide: float = 10.0  # SlideTime in seconds; 0 means a tumbling window
    margin: float | str = "auto"
    poll_interval: float = 0.02  # how late the next decision can come (Spark's pollingDelay)
    history: int = 20  # completed batches remembered for the auto margin
    warmup_batches: int = 1  # first completed batches not used for AvgThPut (0 = the paper's Eq. 4 exactly)

    def build(self) -> LMStreamPolicy:
        if self.slide < 0:
            msg = f"lmstream slide must be >= 0 seconds (0 = tumbling), got {self.slide}"
            raise ConfigError(msg)
        if not (self.margin == "auto" or (isinstance(self.margin, int | float) and self.margin >= 0)):
            msg = f"lmstream margin must be 'auto' or a non-negative number of seconds, got {self.margin!r}"
            raise ConfigError(msg)
        if self.history < 1 or self.warmup_batches < 0 or self.poll_interval < 0:
            msg = (
                "lmstream needs history >= 1, warmup_batches >= 0 and poll_interval >= 0, got "
                f"history={self.history}, warmup_batches={self.warmup_batches}, poll_interval={self.poll_interval}"
            )
            raise ConfigError(msg)
        return LMStreamPolicy(self)


class LMStreamPolicy(AdmissionPolicy):
    name = "lmstream"

    def __init__(self, config: LMStreamConfig) -> None:
        self.config = config
        self.rows_done = 0
        self.proc_time_done = 0.0
        self.batches_seen = 0
        self.max_lat_sum = 0.0  # Eq. 3 target: sum and count of every past MaxLat (O(1), not a list)
        self.max_lat_count = 0
        self._proc_errors: deque[float] = deque(maxlen=config.history)
        self._poll_gaps: deque[float] = deque(maxlen=config.history)
        self._last_poll: float | None = None
        self._last_est_proc: float | None = None

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

    def margin(self) -> float:
        if self.config.margin != "auto":
            return float(self.config.margin)
        under = [e for e in self._proc_errors if e > 0]
        err = float(np.percentile(under, 90)) if under else 0.0
        return err + self.decision_gap()

    def decision_gap(self) -> float:
        """How late the next chance to admit may come: the polling interval, or longer when the engine runs
        no-data batches (watermark moves of stateful queries) between polls; 90th percentile of recent gaps."""
        if not self._poll_gaps:
            return self.config.poll_interval
        return max(self.config.poll_interval, float(np.percentile(list(self._poll_gaps), 90)))

    # -- decisions ------------------------------------------------------------------------------------------
    def estimate_max_latency(self, now: float, pending: Sequence[PendingDataset]) -> float | None:
        thput = self.avg_throughput
        if not pending or thput is None:
            return None
        oldest = min(d.arrival for d in pending)
        rows = sum(d.rows for d in pending)
        return max(now - oldest, 0.0) + rows / thput

    def admit(self, now: float, pending: Sequence[PendingDataset]) -> bool:
        if self._last_poll is not None and self.config.margin == "auto" and self.batches_seen > 0:
            self._poll_gaps.append(now - self._last_poll)  # start-up gaps (Spark's batch 0) are not counted
        self._last_poll = now
        if not pending:
            return False
        est = self.estimate_max_latency(now, pending)
        target = self.target
        if est is None or target is None:  # nothing learned yet: admit, as batch 0 would run anyway
            admit, self._last_est_proc = True, None
        else:
            admit = est + self.margin() >= target
            if admit:
                self._last_est_proc = sum(d.rows for d in pending) / (self.avg_throughput or 1.0)
        if admit:
            self._last_poll = None  # the gap until the next poll is the batch itself, not a decision delay
        return admit

    def on_batch_complete(self, outcome: BatchOutcome) -> None:
        self.batches_seen += 1
        if self._last_est_proc is not None:
            self._proc_errors.append(outcome.processing_time - self._last_est_proc)
        self._last_est_proc = None
        self.max_lat_sum += outcome.max_latency
        self.max_lat_count += 1
        if self.batches_seen <= self.config.warmup_batches:
            return  # the first batch pays Spark's code generation: not representative of throughput
        self.rows_done += outcome.rows
        self.proc_time_done += outcome.processing_time

    def state(self) -> dict[str, float | int | None]:
        return {"avg_thput": self.avg_throughput, "target": self.target, "margin": self.margin()}

    def _state(self) -> dict[str, Any]:
        return {
            "rows_done": self.rows_done,
            "proc_time_done": self.proc_time_done,
            "batches_seen": self.batches_seen,
            "max_lat_sum": self.max_lat_sum,
            "max_lat_count": self.max_lat_count,
            "proc_errors": list(self._proc_errors),
            "poll_gaps": list(self._poll_gaps),
            "last_poll": finite_or_none(self._last_poll),
            "last_est_proc": finite_or_none(self._last_est_proc),
        }

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self.rows_done = int(state["rows_done"])
        self.proc_time_done = float(state["proc_time_done"])
        self.batches_seen = int(state["batches_seen"])
        self.max_lat_sum = float(state["max_lat_sum"])
        self.max_lat_count = int(state["max_lat_count"])
        self._proc_errors = deque((float(x) for x in state["proc_errors"]), maxlen=self.config.history)
        self._poll_gaps = deque((float(x) for x in state["poll_gaps"]), maxlen=self.config.history)
        lp, le = state["last_poll"], state["last_est_proc"]
        self._last_poll = None if lp is None else float(lp)
        self._last_est_proc = None if le is None else float(le)
