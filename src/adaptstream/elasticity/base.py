"""Elasticity: how many map tasks, reduce buckets and executors the next micro-batch gets (Prompt Sec. 6).

The engine reports every completed batch (:class:`BatchStats`: processing time, batch interval, rows, distinct
keys) and applies the returned :class:`ExecutionPlan` to the next batch: map tasks are the input blocks the source
plans, reduce buckets the reduce stage's partitions, executors what the cluster manager is asked for
(``SparkContext.requestExecutors`` / ``killExecutors``). Pure Python: decisions are tested on traces without Spark.
Snapshot/restore, bounded state and the injected clock follow :mod:`adaptstream.policy`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from adaptstream.errors import ConfigError
from adaptstream.policy import Policy

#: decision-log entries a policy keeps (a ring buffer: the log is for people, not for decisions)
LOG_LIMIT = 128


@dataclass(frozen=True)
class BatchStats:
    """One completed micro-batch as the engine measured it."""

    processing_time: float  # seconds from the batch's start to its completion
    batch_interval: float  # seconds: the latency bound the batch had to meet (Prompt's heartbeat)
    rows: int  # data rate: tuples in the batch
    keys: int  # data distribution: distinct keys in the batch
    span: float | None = None  # seconds of arrivals the batch holds (since the previous data batch started), if known

    def __post_init__(self) -> None:
        if not self.batch_interval > 0 or self.processing_time < 0 or self.rows < 0 or self.keys < 0:
            msg = f"bad batch statistics {self}: need batch_interval > 0 and non-negative times and counts"
            raise ConfigError(msg)
        if self.span is not None and not self.span > 0:
            msg = f"bad batch statistics {self}: span must be > 0 seconds when given"
            raise ConfigError(msg)

    @property
    def load(self) -> float:
        """Prompt's W = processing time / batch interval (<= 1: the batch was on time)."""
        return self.processing_time / self.batch_interval


@dataclass(frozen=True)
class ExecutionPlan:
    map_tasks: int
    reduce_buckets: int
    executors: int

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.map_tasks, self.reduce_buckets, self.executors)


def executors_for(map_tasks: int, reduce_buckets: int, cores_per_executor: int, lo: int, hi: int) -> int:
    """Executors that run the wider stage in one wave, within [lo, hi]."""
    need = math.ceil(max(map_tasks, reduce_buckets) / max(1, cores_per_executor))
    return max(lo, min(hi, need))


class ElasticityPolicy(Policy, ABC):
    """Stateful parallelism logic; one instance per streaming query."""

    name: str = "base"

    @property
    @abstractmethod
    def plan(self) -> ExecutionPlan:
        """The plan for the next batch."""

    @abstractmethod
    def on_batch(self, stats: BatchStats) -> ExecutionPlan:
        """Learn from a completed batch; return the plan for the next one."""

    def decision_log(self) -> list[dict[str, Any]]:
        """Scaling decisions worth showing to a user; the last LOG_LIMIT."""
        return []
