"""Group affinity with (tuple) imbalance minimisation, cAM (holistic Alg. 4)."""

from __future__ import annotations

from dataclasses import dataclass

from adaptstream.partitioning._online import MODE_CAM, OnlinePartitioner
from adaptstream.partitioning.base import Partitioner


@dataclass(frozen=True)
class CAMConfig:
    """choices: candidates per key; cardinality: "exact" (naive sets) or "hll" (HyperLogLog, Sec. 3.2.2);
    window: "batch" resets statistics every batch, "explicit" only on on_window_boundary()."""

    choices: int = 2
    cardinality: str = "exact"
    window: str = "batch"

    def build(self) -> Partitioner:
        suffix = "-hll" if self.cardinality == "hll" else ""
        return OnlinePartitioner(
            f"cam{suffix}", MODE_CAM, self.choices, cardinality=self.cardinality, window=self.window
        )
