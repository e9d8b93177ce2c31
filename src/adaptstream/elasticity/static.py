"""Static provisioning: the same plan for every batch (the baselines "static at the peak" and "static at the
mean" of the elasticity benchmark; also what Spark does without dynamic allocation)."""

from __future__ import annotations

from dataclasses import dataclass

from adaptstream.elasticity.base import BatchStats, ElasticityPolicy, ExecutionPlan
from adaptstream.errors import ConfigError


class StaticPolicy(ElasticityPolicy):
    name = "static"

    def __init__(self, plan: ExecutionPlan) -> None:
        if min(plan.as_tuple()) < 1:
            msg = f"every count of a static plan must be >= 1, got {plan}"
            raise ConfigError(msg)
        self._plan = plan

    @property
    def plan(self) -> ExecutionPlan:
        return self._plan

    def on_batch(self, stats: BatchStats) -> ExecutionPlan:
        return self._plan


@dataclass(frozen=True)
class StaticConfig:
    map_tasks: int = 2
    reduce_buckets: int = 2
    executors: int = 2

    def build(self) -> ElasticityPolicy:
        return StaticPolicy(ExecutionPlan(self.map_tasks, self.reduce_buckets, self.executors))
