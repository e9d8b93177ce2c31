"""``sbox``: StreamBox's policy as Klink evaluates it (Sec. 6.1.3): the query with the closest window deadline,
scheduled until its watermark has been processed, then the next closest."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adaptstream.policy import finite_or_none
from adaptstream.scheduling.base import QueryState, SchedulerConfig, SchedulerPolicy, by_oldest


@dataclass(frozen=True)
class SBoxConfig(SchedulerConfig):
    def build(self) -> SBoxPolicy:
        return SBoxPolicy(self)


class SBoxPolicy(SchedulerPolicy):
    name = "sbox"

    def __init__(self, config: SchedulerConfig) -> None:
        super().__init__(config)
        self.focus: str | None = None  # the query kept first until its deadline's watermark is processed
        self.focus_deadline: float | None = None

    @staticmethod
    def deadline(q: QueryState) -> float:
        return min((d for s in q.streams.values() if (d := s.next_deadline_time()) is not None), default=math.inf)

    def order(self, now: float, ready: Sequence[QueryState]) -> list[str]:
        f = self.queries.get(self.focus) if self.focus else None
        if f is None or finite_or_none(self.deadline(f)) != self.focus_deadline:  # its watermark passed
            cands = sorted(self.queries.values(), key=lambda q: (self.deadline(q), *by_oldest(q)))
            f = next((q for q in cands if q.pending_rows > 0 or q in ready), None)
            self.focus = f.name if f else None
            self.focus_deadline = finite_or_none(self.deadline(f)) if f else None
        rest = sorted(ready, key=lambda q: (self.deadline(q), *by_oldest(q)))
        first = [f.name] if f is not None and f in ready else []
        return first + [q.name for q in rest if q.name != self.focus]

    def _extra_state(self) -> dict[str, Any]:
        return {"focus": self.focus, "focus_deadline": self.focus_deadline}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        self.focus, self.focus_deadline = state["focus"], state["focus_deadline"]
