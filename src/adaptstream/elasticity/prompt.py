"""Prompt's latency-aware auto-scaler (Abdelhamid et al., Prompt, Sec. 6, Alg. 4).

W = processing time / batch interval of each batch. Zones (Fig. 9b): W > thres (zone 3) for d consecutive batches
triggers a scale-out; W <= thres - step (zone 1) for d consecutive batches a scale-in; in between (zone 2) nothing
changes. The direction of a change follows the statistics of the last d batches against those at the previous
decision: more tuples (data rate) -> one more map task; more distinct keys (data distribution) -> one more reduce
bucket; both -> both; scale-in removes by the same criteria. After a decision a grace period (d batches) allows
no reverse decision. Executors follow the wider stage: ceil(max(p, r) / cores_per_executor) within bounds.

Deviations, both to keep the loop stable, both stated here: (1) when W stays high although neither statistic grew
(the work per tuple rose), one map task and one reduce bucket are added, since the paper repeats scale-out "until
W <= thres"; at a flat rate with low W both shrink. (2) Scale-in removes a task only if the proportional
prediction W * p / (p - 1) (resp. r / (r - 1)) stays <= thres, so a flat rate does not oscillate between a
scale-in and the scale-out it would cause.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adaptstream.elasticity.base import (
    LOG_LIMIT,
    BatchStats,
    ElasticityPolicy,
    ExecutionPlan,
    executors_for,
)
from adaptstream.errors import ConfigError


class PromptElasticity(ElasticityPolicy):
    name = "prompt"

    def __init__(self, cfg: PromptElasticityConfig) -> None:
        self.cfg = cfg
        self._p = cfg.initial_map_tasks
        self._r = cfg.initial_reduce_buckets
        self._recent: deque[tuple[float, int, int]] = deque(maxlen=cfg.d)  # (W, rows, keys)
        self._high = 0
        self._low = 0
        self._grace = 0
        self._grace_dir = 0  # +1 after a scale-out, -1 after a scale-in
        self._ref: tuple[float, float] | None = None  # mean (rows, keys) at the last decision
        self._batches = 0
        self._log: deque[dict[str, Any]] = deque(maxlen=LOG_LIMIT)

    @property
    def plan(self) -> ExecutionPlan:
        c = self.cfg
        return ExecutionPlan(
            self._p, self._r, executors_for(self._p, self._r, c.cores_per_executor, c.min_executors, c.max_executors)
        )

    def _means(self) -> tuple[float, float, float]:
        n = len(self._recent)
        return (
            sum(x[0] for x in self._recent) / n,
            sum(x[1] for x in self._recent) / n,
            sum(x[2] for x in self._recent) / n,
        )

    def on_batch(self, stats: BatchStats) -> ExecutionPlan:
        c = self.cfg
        w = stats.load
        self._batches += 1
        self._recent.append((w, int(stats.rows), int(stats.keys)))
        if self._ref is None:
            self._ref = (float(stats.rows), float(stats.keys))
        grace = self._grace
        before = (self._p, self._r)
        if w > c.thres:
            self._high, self._low = self._high + 1, 0
        elif w <= c.thres - c.step:
            self._high, self._low = 0, self._low + 1
        else:
            self._high = self._low = 0
        if self._high >= c.d and not (grace > 0 and self._grace_dir < 0):
            self._scale(+1)
        elif self._low >= c.d and not (grace > 0 and self._grace_dir > 0):
            self._scale(-1)
        if (self._p, self._r) == before and grace > 0:  # no decision: a batch of the grace period passed
            self._grace -= 1
        return self.plan

    def _scale(self, direction: int) -> None:
        c = self.cfg
        w, rows, keys = self._means()
        ref_rows, ref_keys = self._ref or (rows, keys)
        if direction > 0:
            more_rows, more_keys = rows > ref_rows * (1 + c.tolerance), keys > ref_keys * (1 + c.tolerance)
            if not (more_rows or more_keys):
                more_rows = more_keys = True  # deviation (1)
            p = min(c.max_tasks, self._p + c.increment) if more_rows else self._p
            r = min(c.max_tasks, self._r + c.increment) if more_keys else self._r
            self._high = 0
        else:
            fewer_rows, fewer_keys = rows < ref_rows * (1 - c.tolerance), keys < ref_keys * (1 - c.tolerance)
            if not (fewer_rows or fewer_keys):
                fewer_rows = fewer_keys = True
            p, r = self._p, self._r
            if fewer_rows and self._p > c.min_tasks:
                cand = max(c.min_tasks, self._p - c.increment)
                p = cand if w * self._p / cand <= c.thres else self._p  # deviation (2)
            if fewer_keys and self._r > c.min_tasks:
                cand = max(c.min_tasks, self._r - c.increment)
                r = cand if w * self._r / cand <= c.thres else self._r
            self._low = 0
        if (p, r) == (self._p, self._r):
            return  # at a bound, or the prediction forbids it: no decision, no grace period
        self._log.append(
            {
                "batch": self._batches,
                "w": w,
                "rows": rows,
                "keys": keys,
                "from": [self._p, self._r],
                "to": [p, r],
                "direction": "out" if direction > 0 else "in",
            }
        )
        self._p, self._r = p, r
        self._ref = (rows, keys)
        self._grace, self._grace_dir = c.grace, direction

    def decision_log(self) -> list[dict[str, Any]]:
        return list(self._log)

    def _state(self) -> dict[str, Any]:
        return {
            "p": self._p,
            "r": self._r,
            "recent": [list(x) for x in self._recent],
            "high": self._high,
            "low": self._low,
            "grace": self._grace,
            "grace_dir": self._grace_dir,
            "ref": None if self._ref is None else list(self._ref),
            "batches": self._batches,
        }

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._p, self._r = int(state["p"]), int(state["r"])
        self._recent = deque(((float(w), int(n), int(k)) for w, n, k in state["recent"]), maxlen=self.cfg.d)
        self._high, self._low = int(state["high"]), int(state["low"])
        self._grace, self._grace_dir = int(state["grace"]), int(state["grace_dir"])
        self._ref = None if state["ref"] is None else (float(state["ref"][0]), float(state["ref"][1]))
        self._batches = int(state["batches"])


@dataclass(frozen=True)
class PromptElasticityConfig:
    """d: consecutive batches; grace: batches after a decision without a reverse one (the paper uses d);
    thres: upper load threshold of W (90 %); step: width of the
    stable zone below it (10 %); tolerance: relative change of rows/keys that counts as an increase/decrease;
    tasks and executors start at the initial values and stay within their bounds."""

    d: int = 3
    grace: int = 3
    thres: float = 0.9
    step: float = 0.1
    tolerance: float = 0.05
    increment: int = 1
    initial_map_tasks: int = 2
    initial_reduce_buckets: int = 2
    min_tasks: int = 1
    max_tasks: int = 16
    cores_per_executor: int = 1
    min_executors: int = 1
    max_executors: int = 4

    def __post_init__(self) -> None:
        if self.grace < 0:
            msg = f"grace must be >= 0 batches, got {self.grace}"
            raise ConfigError(msg)
        if self.d < 1 or self.increment < 1 or self.cores_per_executor < 1:
            msg = (
                f"d, increment and cores_per_executor must be >= 1, got {self.d}, {self.increment}, "
                f"{self.cores_per_executor}"
            )
            raise ConfigError(msg)
        if not (0 < self.step < self.thres) or not 0 <= self.tolerance < 1:
            msg = f"need 0 < step < thres and 0 <= tolerance < 1, got {self.step}, {self.thres}, {self.tolerance}"
            raise ConfigError(msg)
        if not (
            1 <= self.min_tasks <= min(self.initial_map_tasks, self.initial_reduce_buckets)
            and max(self.initial_map_tasks, self.initial_reduce_buckets) <= self.max_tasks
        ):
            msg = "need 1 <= min_tasks <= initial map tasks / reduce buckets <= max_tasks"
            raise ConfigError(msg)
        if not 1 <= self.min_executors <= self.max_executors:
            msg = f"need 1 <= min_executors <= max_executors, got {self.min_executors}, {self.max_executors}"
            raise ConfigError(msg)

    def build(self) -> ElasticityPolicy:
        return PromptElasticity(self)
