"""Time-based partitioning (Prompt Sec. 2.2.1): the batch interval is cut into P equal block intervals and
the tuples that arrived in each form one block; Spark Streaming's receiver default."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adaptstream.partitioning.base import Partitioner, check_args
from adaptstream.policy import Clock


class TimePartitioner(Partitioner):
    """Blocks are consecutive equal-length arrival-time periods of the batch interval.

    Arrival times come from `observe` calls (the injected clock at each call, one time per observed chunk), or
    from `set_arrival_times` (benchmarks that replay a rate profile). With neither, rows are taken as arriving
    at a constant rate, which makes blocks equal contiguous ranges. Nothing carries over between batches.
    """

    name = "time"

    def __init__(self, clock: Clock | None = None) -> None:
        if clock is not None:
            self.clock = clock
        self._chunks: list[tuple[float, int]] = []
        self._times: np.ndarray | None = None
        self._span: tuple[float, float] | None = None
        self._start = self.clock()

    def set_clock(self, clock: Clock) -> Partitioner:
        """The batch interval starts now on the new clock (readings of different clocks do not compare)."""
        self.clock = clock
        self._start = clock()
        return self

    def observe(self, keys: np.ndarray) -> None:
        self._chunks.append((self.clock(), len(keys)))

    def set_arrival_times(self, times: np.ndarray, start: float, end: float) -> None:
        """Arrival time per row of the next batch and the batch interval [start, end)."""
        self._times = np.asarray(times, dtype=np.float64)
        self._span = (float(start), float(end))

    def _arrival(self, n: int) -> tuple[np.ndarray, float, float]:
        if self._times is not None and self._span is not None and len(self._times) == n:
            return self._times, self._span[0], self._span[1]
        if self._chunks and sum(c for _, c in self._chunks) == n:
            times = np.repeat([t for t, _ in self._chunks], [c for _, c in self._chunks])
            return times, self._start, self.clock()
        return np.arange(n, dtype=np.float64), 0.0, float(n)

    def assign(self, keys: np.ndarray, num_blocks: int) -> np.ndarray:
        keys = check_args(keys, num_blocks)
        times, start, end = self._arrival(len(keys))
        span = max(end - start, 1e-12)
        blocks = np.floor((times - start) / span * num_blocks).astype(np.int64)
        out = np.clip(blocks, 0, num_blocks - 1).astype(np.int32)
        self._chunks, self._times, self._span = [], None, None
        self._start = self.clock()
        return out


@dataclass(frozen=True)
class TimeConfig:
    """No parameters: the batch interval is whatever the source's cut defines."""

    def build(self) -> Partitioner:
        return TimePartitioner()
