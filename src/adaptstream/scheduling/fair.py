"""``fair``: Spark's FAIR scheduler, one pool per query with equal weights; micro-batches are not gated.

The pool is the ``spark.scheduler.pool`` local property of the thread that starts the query (captured at start);
``spark.scheduler.mode=FAIR`` must be set before the SparkContext starts (the multi-query runner does both)."""

from __future__ import annotations

from dataclasses import dataclass

from adaptstream.scheduling.base import SchedulerConfig
from adaptstream.scheduling.default import DefaultPolicy


@dataclass(frozen=True)
class FairConfig(SchedulerConfig):
    def build(self) -> FairPolicy:
        return FairPolicy(self)


class FairPolicy(DefaultPolicy):
    name = "fair"

    def pool_weights(self) -> dict[str, float] | None:
        return {q: 1.0 for q in self.queries}
