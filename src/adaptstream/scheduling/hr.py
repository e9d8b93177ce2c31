"""``hr``: highest rate (Sharaf et al., Klink Sec. 6.1.3): the query with the highest output rate per second of
processing, selectivity / cost per row, first. A query never measured yet goes first (its rate is unknown)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from adaptstream.scheduling.base import QueryState, SchedulerConfig, SchedulerPolicy, by_oldest


@dataclass(frozen=True)
class HighestRateConfig(SchedulerConfig):
    def build(self) -> HighestRatePolicy:
        return HighestRatePolicy(self)


class HighestRatePolicy(SchedulerPolicy):
    name = "hr"

    def order(self, now: float, ready: Sequence[QueryState]) -> list[str]:
        def rate(q: QueryState) -> float:
            if q.batches == 0:
                return math.inf
            return q.selectivity / (q.per_row + self.config.fixed_cost / max(q.pending_rows, 1))

        return [q.name for q in sorted(ready, key=lambda q: (-rate(q), *by_oldest(q)))]
