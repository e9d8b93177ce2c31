"""Shuffle (round-robin) partitioning, SH (Prompt Sec. 2.2.2, holistic Sec. 2.4): equal block sizes, no key
locality, so aggregation cost up to V * ||S|| (holistic Prop. 1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptstream.partitioning.base import Partitioner, check_args


class ShufflePartitioner(Partitioner):
    """Row i of the batch goes to block (offset + i) mod P; the offset carries over between batches."""

    name = "shuffle"

    def __init__(self) -> None:
        self._offset = 0

    def assign(self, keys: np.ndarray, num_blocks: int) -> np.ndarray:
        keys = check_args(keys, num_blocks)
        out = ((np.arange(len(keys), dtype=np.int64) + self._offset) % num_blocks).astype(np.int32)
        self._offset = (self._offset + len(keys)) % num_blocks
        return out

    def _state(self) -> dict[str, Any]:
        return {"offset": self._offset}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._offset = int(state["offset"])


@dataclass(frozen=True)
class ShuffleConfig:
    def build(self) -> Partitioner:
        return ShufflePartitioner()
