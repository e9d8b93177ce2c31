"""`auto`: the holistic paper's partitioner selection rule (Katsipoulakis et al., Sec. 7), applied per batch.

"If the number of groups in a stateful operation are expected to be constant and significantly less than
the average number of tuples assigned to a worker on each window, then SH must be used. Otherwise, AM and
cAM will offer the best trade-off between imbalance and aggregation cost."

Per batch we count the groups G (exact, or HyperLogLog with cardinality="hll") and the tuples per block
N/P; G * ratio <= N/P picks `few_groups` (shuffle), else `many_groups` (cam by default). "Significantly
less" is the `ratio` parameter (default 10; the paper gives no number). Every choice is logged (the last
LOG_LIMIT batches are kept).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptstream.errors import PartitioningError
from adaptstream.partitioning.base import LOG_LIMIT, Partitioner, check_args
from adaptstream.partitioning.hll import hll_count
from adaptstream.policy import Clock


class AutoPartitioner(Partitioner):
    name = "auto"

    def __init__(self, few: Partitioner, many: Partitioner, ratio: float, cardinality: str) -> None:
        if cardinality not in ("exact", "hll"):
            msg = f"cardinality must be 'exact' or 'hll', got {cardinality!r}"
            raise PartitioningError(msg)
        self.few, self.many, self.ratio, self.cardinality = few, many, float(ratio), cardinality
        self._log: deque[dict[str, Any]] = deque(maxlen=LOG_LIMIT)
        self._batches = 0

    def observe(self, keys: np.ndarray) -> None:
        self.many.observe(keys)

    def assign(self, keys: np.ndarray, num_blocks: int) -> np.ndarray:
        keys = check_args(keys, num_blocks)
        groups = float(len(np.unique(keys))) if self.cardinality == "exact" else hll_count(keys)
        per_block = len(keys) / num_blocks
        few = groups * self.ratio <= per_block
        chosen = self.few if few else self.many
        self._log.append(
            {
                "batch": self._batches,
                "rows": len(keys),
                "groups": groups,
                "tuples_per_block": per_block,
                "choice": chosen.name,
                "rule": f"groups*{self.ratio:g} {'<=' if few else '>'} tuples/block",
            }
        )
        self._batches += 1
        return chosen.assign(keys, num_blocks)

    def on_window_boundary(self) -> None:
        self.few.on_window_boundary()
        self.many.on_window_boundary()

    def decision_log(self) -> list[dict[str, Any]]:
        return list(self._log)

    def memory_bytes(self) -> int:
        return self.few.memory_bytes() + self.many.memory_bytes()

    def set_clock(self, clock: Clock) -> Partitioner:
        self.clock = clock
        self.few.set_clock(clock)
        self.many.set_clock(clock)
        return self

    def _state(self) -> dict[str, Any]:
        return {"batches": self._batches, "few": self.few.state_dict(), "many": self.many.state_dict()}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._batches = int(state["batches"])
        self.few.load_state_dict(state["few"])
        self.many.load_state_dict(state["many"])


@dataclass(frozen=True)
class AutoConfig:
    few_groups: str = "shuffle"
    many_groups: str = "cam"
    ratio: float = 10.0
    cardinality: str = "exact"

    def build(self) -> Partitioner:
        from adaptstream.partitioning import build_partitioner

        return AutoPartitioner(
            build_partitioner(self.few_groups),
            build_partitioner(self.many_groups),
            self.ratio,
            self.cardinality,
        )
