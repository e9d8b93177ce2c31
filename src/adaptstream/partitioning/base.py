"""The partitioner interface the streaming source calls, and the stable key hash it feeds it.

A partitioner decides, for the rows of one micro-batch, which block (= Spark input partition = task) each
row goes to. Keys are int64 hashes of the partitioning columns (`key_hash`), so partitioners never see
Python objects and can run compiled per-tuple loops. Snapshot/restore (`state_dict`, taken between batches),
bounded state and the injected clock follow :mod:`adaptstream.policy`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from adaptstream.errors import PartitioningError
from adaptstream.policy import Policy

#: decision-log entries a partitioner keeps (a ring buffer: the log is for people, not for decisions)
LOG_LIMIT = 1024


class Partitioner(Policy, ABC):
    """Decides, for the rows of one micro-batch, which block (= Spark input partition = task) each row
    goes to."""

    name: str = "base"

    def observe(self, keys: np.ndarray) -> None:
        """int64 key hashes, called as tuples arrive while the batch still buffers (Prompt Alg. 1)."""

    @abstractmethod
    def assign(self, keys: np.ndarray, num_blocks: int) -> np.ndarray:
        """int64 key hashes of the batch rows in arrival order -> int32 block id per row in [0, P)."""

    def on_window_boundary(self) -> None:
        """Reset counts/cardinalities when a window expires (holistic Alg. 1 lines 3-5)."""

    def decision_log(self) -> list[dict[str, Any]]:
        """Decisions worth showing to a user (e.g. what `auto` picked per batch); the last LOG_LIMIT batches."""
        return []

    def memory_bytes(self) -> int:
        """Bytes held by the partitioner's statistics (holistic Table 4); 0 for stateless ones."""
        return 0


def check_args(keys: np.ndarray, num_blocks: int) -> np.ndarray:
    """Validate assign() arguments and return the keys as a contiguous int64 array."""
    if int(num_blocks) < 1:
        msg = f"num_blocks must be >= 1, got {num_blocks}"
        raise PartitioningError(msg)
    arr = np.asarray(keys)
    if arr.ndim != 1:
        msg = f"keys must be a 1-d array, got shape {arr.shape}"
        raise PartitioningError(msg)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        msg = f"keys must be integer key hashes (see key_hash), got dtype {arr.dtype}"
        raise PartitioningError(msg)
    return np.ascontiguousarray(arr, dtype=np.int64)


def key_hash(table: Any, key_columns: Sequence[str]) -> np.ndarray:
    """Stable int64 hash of the key columns of a pyarrow Table (or pandas DataFrame).

    Uses pandas' hash_pandas_object (SipHash with a fixed key), which is the same across processes and runs,
    unlike Python's salted hash(). Several columns are combined with pandas' own multi-column combiner.
    """
    import pandas as pd
    from pandas.util import hash_pandas_object

    cols = list(key_columns)
    if not cols:
        msg = "key_hash needs at least one key column"
        raise PartitioningError(msg)
    if isinstance(table, pd.DataFrame):
        frame = table
    else:
        missing = [c for c in cols if c not in table.column_names]
        if missing:
            msg = f"key columns {missing} not in table columns {table.column_names}"
            raise PartitioningError(msg)
        frame = table.select(cols).to_pandas()
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        msg = f"key columns {missing} not in columns {list(frame.columns)}"
        raise PartitioningError(msg)
    sub = frame[cols]
    hashed = hash_pandas_object(sub[cols[0]] if len(cols) == 1 else sub, index=False)
    return hashed.to_numpy(dtype=np.uint64).view(np.int64)
