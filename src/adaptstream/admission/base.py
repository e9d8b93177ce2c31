"""Admission: decides when the buffered datasets are cut into a micro-batch.

Policies are pure Python so they can be tested on traces without Spark. The streaming source calls
``admit`` on every poll (Spark's ``latestOffset``) and ``on_batch_complete`` once a batch has finished; times are
the ``now`` it passes. Snapshot/restore and bounded state follow :mod:`adaptstream.policy`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from adaptstream.policy import Policy


@dataclass(frozen=True)
class PendingDataset:
    """A dataset waiting in the buffer: when it arrived and how big it is."""

    seq: int
    arrival: float  # seconds (epoch) when it entered the system
    rows: int
    bytes: int = 0


@dataclass(frozen=True)
class BatchOutcome:
    """What a completed micro-batch looked like, fed back to the policy."""

    rows: int
    admitted_at: float
    completed_at: float
    max_latency: float  # LMStream MaxLat_i (Eq. 5)
    est_max_latency: float | None = None

    @property
    def processing_time(self) -> float:
        return max(self.completed_at - self.admitted_at, 0.0)


class AdmissionPolicy(Policy, ABC):
    """Stateful admission logic; one instance per streaming query."""

    name: str = "base"

    @abstractmethod
    def admit(self, now: float, pending: Sequence[PendingDataset]) -> bool:
        """True to cut a micro-batch of all ``pending`` datasets now."""

    def on_batch_complete(self, outcome: BatchOutcome) -> None:
        """Learn from a completed batch (default: nothing to learn)."""

    def estimate_max_latency(self, now: float, pending: Sequence[PendingDataset]) -> float | None:
        """The policy's estimate of MaxLat if it admitted now (None when it makes no estimate)."""
        return None

    def state(self) -> dict[str, float | int | None]:
        """Numbers worth logging per decision."""
        return {}
