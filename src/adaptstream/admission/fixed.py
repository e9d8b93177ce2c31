"""Spark's ProcessingTime(T) trigger, emulated: batches start on the T grid, or at once when one overran.

Spark's ProcessingTimeExecutor wakes at multiples of the interval; a batch that takes longer than T is followed
immediately by the next. The LMStream paper's Baseline is this trigger with T = 10 s (Sec. V-A).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adaptstream.admission.base import AdmissionPolicy, PendingDataset
from adaptstream.errors import ConfigError


@dataclass(frozen=True)
class FixedConfig:
    trigger: float = 10.0  # seconds

    def build(self) -> FixedPolicy:
        if self.trigger <= 0:
            msg = f"fixed admission needs a positive trigger interval, got {self.trigger}"
            raise ConfigError(msg)
        return FixedPolicy(self.trigger)


class FixedPolicy(AdmissionPolicy):
    name = "fixed"

    def __init__(self, trigger: float) -> None:
        self.trigger = trigger
        self._next_fire: float | None = None

    def _grid_after(self, t: float) -> float:
        return (math.floor(t / self.trigger) + 1) * self.trigger

    def admit(self, now: float, pending: Sequence[PendingDataset]) -> bool:
        if self._next_fire is None:  # the query started: first trigger on the next grid point
            self._next_fire = self._grid_after(now)
        if now < self._next_fire:
            return False
        # A trigger point passed: Spark runs a batch only if data is there, and plans the next point either way.
        self._next_fire = self._grid_after(now)
        return len(pending) > 0

    def state(self) -> dict[str, float | int | None]:
        return {"next_fire": self._next_fire}

    def _state(self) -> dict[str, Any]:
        return {"next_fire": self._next_fire}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        nf = state["next_fire"]
        self._next_fire = None if nf is None else float(nf)
