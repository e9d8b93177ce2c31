"""Spark's default trigger (ProcessingTime 0): run a batch whenever anything is available."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adaptstream.admission.base import AdmissionPolicy, PendingDataset


@dataclass(frozen=True)
class AsapConfig:
    def build(self) -> AsapPolicy:
        return AsapPolicy()


class AsapPolicy(AdmissionPolicy):
    name = "asap"

    def admit(self, now: float, pending: Sequence[PendingDataset]) -> bool:
        return len(pending) > 0
