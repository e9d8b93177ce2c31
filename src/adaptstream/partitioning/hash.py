"""Hash (field) partitioning, FLD / key grouping (Prompt Sec. 2.2.3, holistic Sec. 2.4): keys stay whole,
aggregation cost minimal (||S||), block sizes follow the key skew."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adaptstream.partitioning._kernels import block_of
from adaptstream.partitioning.base import Partitioner, check_args


class HashPartitioner(Partitioner):
    """Block = H_seed(key) mod P (splitmix64 of the key hash)."""

    name = "hash"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def assign(self, keys: np.ndarray, num_blocks: int) -> np.ndarray:
        keys = check_args(keys, num_blocks)
        return block_of(keys, self.seed, num_blocks)


@dataclass(frozen=True)
class HashConfig:
    seed: int = 0

    def build(self) -> Partitioner:
        return HashPartitioner(self.seed)
