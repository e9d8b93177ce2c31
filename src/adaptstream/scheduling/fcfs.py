"""``fcfs``: first come, first served (Klink Sec. 6.1.3): the query whose oldest waiting data arrived first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adaptstream.scheduling.base import QueryState, SchedulerConfig, SchedulerPolicy, by_oldest


@dataclass(frozen=True)
class FcfsConfig(SchedulerConfig):
    def build(self) -> FcfsPolicy:
        return FcfsPolicy(self)


class FcfsPolicy(SchedulerPolicy):
    name = "fcfs"

    def order(self, now: float, ready: Sequence[QueryState]) -> list[str]:
        return [q.name for q in sorted(ready, key=by_oldest)]
