"""A rate-based controller in the manner of DS2 (Kalavri et al., "Three steps is all you need: fast, accurate,
automatic scaling decisions for distributed streaming dataflows", OSDI 2018): the modern anchor the elasticity
benchmark compares Prompt's Alg. 4 with.

DS2 measures each operator's *true* processing rate (records per second of useful time per instance) and sets the
parallelism that lets the observed input rate be processed at a target utilisation, in one step rather than by
trial: pi = ceil(input rate / (true rate per instance x target utilisation)). In a micro-batch engine the batch is
the operator: its rows arrived over one batch interval (input rate = rows / interval) and were processed by the
current executors within the batch's processing time (true rate per executor = rows / (processing time x
executors)), so the rule becomes executors' = ceil(executors x mean W / target_utilisation) with W = processing
time / batch interval, averaged over ``window`` batches. After a decision DS2 waits for the new configuration to
warm up before it measures again: here ``activation`` batches, whose statistics are dropped.

Deviations, stated: the executor count in the rule is the plan's, not a count of live executors (BatchStats does
not carry it; executors requested but still starting make W look higher, so the controller may overshoot by what
start-up costs); a batch is one operator, so there is no per-operator graph. Map tasks and reduce buckets follow the
executors (one wave of tasks, ``cores_per_executor`` per executor).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adaptstream.elasticity.base import LOG_LIMIT, BatchStats, ElasticityPolicy, ExecutionPlan
from adaptstream.errors import ConfigError


class DS2Elasticity(ElasticityPolicy):
    name = "ds2"

    def __init__(self, cfg: DS2Config) -> None:
        self.cfg = cfg
        self._executors = cfg.initial_executors
        self._loads: deque[float] = deque(maxlen=cfg.window)
        self._wait = 0  # batches of the activation period still to skip
        self._batches = 0
        self._log: deque[dict[str, Any]] = deque(maxlen=LOG_LIMIT)

    @property
    def plan(self) -> ExecutionPlan:
        tasks = self._executors * self.cfg.cores_per_executor
        return ExecutionPlan(tasks, tasks, self._executors)

    def target(self, mean_load: float) -> int:
        """The executors that process the observed rate at the target utilisation, within bounds."""
        c = self.cfg
        need = math.ceil(self._executors * mean_load / c.target_utilization - 1e-9)
        return max(c.min_executors, min(c.max_executors, need))

    def on_batch(self, stats: BatchStats) -> ExecutionPlan:
        self._batches += 1
        if self._wait > 0:
            self._wait -= 1
            return self.plan
        self._loads.append(stats.load)
        if len(self._loads) < self.cfg.window:
            return self.plan
        mean = sum(self._loads) / len(self._loads)
        new = self.target(mean)
        if new != self._executors:
            self._log.append(
                {"batch": self._batches, "w": mean, "from": self._executors, "to": new,
                 "direction": "out" if new > self._executors else "in"}
            )  # fmt: skip
            self._executors = new
            self._loads.clear()
            self._wait = self.cfg.activation
        return self.plan

    def decision_log(self) -> list[dict[str, Any]]:
        return list(self._log)

    def _state(self) -> dict[str, Any]:
        return {"executors": self._executors, "loads": list(self._loads), "wait": self._wait,
                "batches": self._batches}  # fmt: skip

    def _load_state(self, state: Mapping[str, Any]) -> None:
        c = self.cfg
        executors = int(state["executors"])
        if not c.min_executors <= executors <= c.max_executors:
            msg = f"ds2: saved executors {executors} outside [{c.min_executors}, {c.max_executors}]"
            raise ConfigError(msg)
        self._executors = executors
        self._loads = deque((float(x) for x in state["loads"]), maxlen=c.window)
        self._wait, self._batches = int(state["wait"]), int(state["batches"])


@dataclass(frozen=True)
class DS2Config:
    """target_utilization: the share of each batch interval the executors should be busy (DS2's target rate
    ratio, inverted); window: batches averaged per decision; activation: batches skipped after a decision while new
    executors start; executors start at initial_executors and stay within their bounds."""

    target_utilization: float = 0.8
    window: int = 3
    activation: int = 2
    initial_executors: int = 2
    min_executors: int = 1
    max_executors: int = 4
    cores_per_executor: int = 1

    def __post_init__(self) -> None:
        if not 0 < self.target_utilization <= 1:
            msg = f"target_utilization must be in (0, 1], got {self.target_utilization}"
            raise ConfigError(msg)
        if self.window < 1 or self.activation < 0 or self.cores_per_executor < 1:
            msg = (
                f"need window >= 1, activation >= 0 and cores_per_executor >= 1, got {self.window}, "
                f"{self.activation}, {self.cores_per_executor}"
            )
            raise ConfigError(msg)
        if not 1 <= self.min_executors <= self.initial_executors <= self.max_executors:
            msg = (
                "need 1 <= min_executors <= initial_executors <= max_executors, got "
                f"{self.min_executors}, {self.initial_executors}, {self.max_executors}"
            )
            raise ConfigError(msg)

    def build(self) -> ElasticityPolicy:
        return DS2Elasticity(self)
