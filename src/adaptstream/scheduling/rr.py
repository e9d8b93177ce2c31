"""``rr``: round robin over the registered queries (Klink Sec. 6.1.3): the next ready query after the one granted
last; no query starves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adaptstream.scheduling.base import QueryState, SchedulerConfig, SchedulerPolicy


@dataclass(frozen=True)
class RoundRobinConfig(SchedulerConfig):
    def build(self) -> RoundRobinPolicy:
        return RoundRobinPolicy(self)


class RoundRobinPolicy(SchedulerPolicy):
    name = "rr"

    def order(self, now: float, ready: Sequence[QueryState]) -> list[str]:
        # least recently granted first: a cycle over the queries in the order they were last served
        return [
            q.name
            for q in sorted(ready, key=lambda q: (q.granted_at if q.granted_at is not None else float("-inf"), q.name))
        ]
