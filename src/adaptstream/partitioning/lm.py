"""Hybrid imbalance minimisation, LM (holistic Alg. 5, Eq. 7-9)."""

from __future__ import annotations

from dataclasses import dataclass

from adaptstream.partitioning._online import MODE_LM, OnlinePartitioner
from adaptstream.partitioning.base import Partitioner


@dataclass(frozen=True)
class LMConfig:
    """choices: candidates per key; cardinality: "exact" (naive sets) or "hll" (HyperLogLog, Sec. 3.2.2);
    window: "batch" resets statistics every batch, "explicit" only on on_window_boundary()."""

    choices: int = 2
    cardinality: str = "exact"
    window: str = "batch"
    p: float = 0.5

    def build(self) -> Partitioner:
        suffix = "-hll" if self.cardinality == "hll" else ""
        return OnlinePartitioner(
            f"lm{suffix}", MODE_LM, self.choices, cardinality=self.cardinality, window=self.window, p=self.p
        )
