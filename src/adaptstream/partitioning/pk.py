"""Partial key grouping, PK-d (Nasir et al. [28,29] as described in holistic
Sec. 2.4 and Prompt Sec. 2.2.4): d candidates per key, least tuple count wins. pk2 and pk5 are d=2 and d=5."""

from __future__ import annotations

from dataclasses import dataclass

from adaptstream.partitioning._online import MODE_PK, OnlinePartitioner
from adaptstream.partitioning.base import Partitioner


@dataclass(frozen=True)
class PKConfig:
    """choices = number of candidate blocks (hash functions) per key."""

    choices: int = 2

    def build(self) -> Partitioner:
        return OnlinePartitioner(f"pk{self.choices}", MODE_PK, self.choices)
