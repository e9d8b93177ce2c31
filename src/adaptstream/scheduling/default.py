"""``default``: Spark as it is. Every query's micro-batch loop runs freely (FIFO job scheduling in one pool)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adaptstream.scheduling.base import QueryState, SchedulerConfig, SchedulerPolicy, by_oldest


@dataclass(frozen=True)
class DefaultConfig(SchedulerConfig):
    def build(self) -> DefaultPolicy:
        return DefaultPolicy(self)


class DefaultPolicy(SchedulerPolicy):
    name = "default"
    gates = False

    def order(self, now: float, ready: Sequence[QueryState]) -> list[str]:
        return [q.name for q in sorted(ready, key=by_oldest)]
