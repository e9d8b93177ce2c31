"""Run an operator chain over one data partition with a device per operator, and the Table III queries as chains.

:func:`run_chain` moves the partition between host and GPU only where the mapping changes device (and back to the
host at the end), timing every operator and every transition; :class:`MappedQuery` asks a
:class:`~adaptstream.devices.base.DeviceMapper` for each batch's mapping and reports the batch back to it (the
inflection-point regression runs in a background thread between batches, off the critical path, as in LMStream).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa

from adaptstream.devices.base import CPU, GPU, DeviceMapper, DeviceOutcome, OpNode, transitions
from adaptstream.devices.operators import (
    Aggregate,
    Expand,
    Filter,
    Operator,
    Project,
    Sort,
    synchronize,
    to_gpu,
    to_host,
)
from adaptstream.errors import ConfigError


@dataclass
class ChainRun:
    result: pa.Table
    devices: list[str]
    op_seconds: list[float]
    transfer_seconds: float
    seconds: float

    @property
    def transitions(self) -> int:
        return transitions(self.devices)


def run_chain(t: pa.Table, ops: list[Operator], devices: list[str]) -> ChainRun:
    if len(ops) != len(devices):
        msg = f"{len(ops)} operators but {len(devices)} devices"
        raise ConfigError(msg)
    t0 = time.perf_counter()
    data, where, op_s, moved = t, CPU, [], 0.0
    for op, dev in zip(ops, devices, strict=True):
        if dev != where:
            m0 = time.perf_counter()
            data = to_gpu(data) if dev == GPU else to_host(data)
            if dev == GPU:
                synchronize()
            moved += time.perf_counter() - m0
            where = dev
        s0 = time.perf_counter()
        data = op.gpu(data) if dev == GPU else op.cpu(data)
        if dev == GPU:
            synchronize()
        op_s.append(time.perf_counter() - s0)
    if where == GPU:
        m0 = time.perf_counter()
        data = to_host(data)
        moved += time.perf_counter() - m0
    return ChainRun(data, list(devices), op_s, moved, time.perf_counter() - t0)


def plan_of(ops: list[Operator]) -> list[OpNode]:
    return [OpNode(op.name, op.kind) for op in ops]


@dataclass
class MappedQuery:
    """One query's operator chain under a device mapper, batch after batch."""

    ops: list[Operator]
    mapper: DeviceMapper
    _pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=1))
    _pending: Future | None = None

    def process(self, partition: pa.Table) -> ChainRun:
        if self._pending is not None:
            self._pending.result()  # the previous batch's regression (normally long done)
        devices = self.mapper.map(plan_of(self.ops), float(partition.nbytes))
        return run_chain(partition, self.ops, devices)

    def report(self, run: ChainRun, rows: int, max_latency: float, partition_bytes: float) -> None:
        outcome = DeviceOutcome(rows / run.seconds if run.seconds > 0 else 0.0, max_latency, partition_bytes)
        self._pending = self._pool.submit(self.mapper.on_batch, outcome)

    def close(self) -> None:
        if self._pending is not None:
            self._pending.result()
        self._pool.shutdown()


# -- the Table III queries (their per-batch part, over one partition) as operator chains --------------------
def lr2_chain(slide_s: int = 10, window_s: int = 30) -> list[Operator]:
    """LR2: position reports -> a row per window -> sum and count of speed per (window, XWay, Dir, Seg): a batch's
    partial aggregate (the HAVING on the average applies once the window's partials are combined)."""
    return [
        Filter("Type", "==", 0),
        Project(("Time", "XWay", "Dir", "Seg", "Spd")),
        Expand("Time", window_s, slide_s),
        Aggregate(("window_start", "XWay", "Dir", "Seg"), "Spd"),
    ]


def cm1_chain(slide_s: int, window_s: int = 60) -> list[Operator]:
    """CM1: CPU requested per (window, scheduling class), sorted by it."""
    us = 1_000_000
    return [
        Filter("event_type", ">=", 0),
        Project(("timestamp", "scheduling_class", "cpu_request")),
        Expand("timestamp", window_s * us, slide_s * us),
        Aggregate(("window_start", "scheduling_class"), "cpu_request"),
        Sort("sum_cpu_request"),
    ]


def cm2_chain(slide_s: int = 5, window_s: int = 60) -> list[Operator]:
    """CM2: CPU requested by SCHEDULE events (type 1) per (window, job)."""
    us = 1_000_000
    return [
        Filter("event_type", "==", 1),
        Project(("timestamp", "job_id", "cpu_request")),
        Expand("timestamp", window_s * us, slide_s * us),
        Aggregate(("window_start", "job_id"), "cpu_request"),
    ]


@dataclass(frozen=True)
class Chain:
    """A Table III query's per-batch operator chain: its generator and the columns its scan reads (Spark prunes
    the rest before the first operator, so they never cross to the GPU)."""

    generator: str
    columns: tuple[str, ...]
    build: Callable[[], list[Operator]]

    def scan(self, t: pa.Table) -> pa.Table:
        return t.select(list(self.columns))


_LR_COLS = ("Type", "Time", "XWay", "Dir", "Seg", "Spd")
_CM_COLS = ("event_type", "timestamp", "scheduling_class", "job_id", "cpu_request")
#: query -> chain; LR1S/LR1T (a window self-join) have no chain yet
CHAINS: dict[str, Chain] = {
    "LR2S": Chain("linear_road", _LR_COLS, lambda: lr2_chain(10)),
    "CM1S": Chain("task_events", _CM_COLS, lambda: cm1_chain(10)),
    "CM1T": Chain("task_events", _CM_COLS, lambda: cm1_chain(60)),
    "CM2S": Chain("task_events", _CM_COLS, lambda: cm2_chain(5)),
}
