"""Device mapping: on which device (CPU or GPU) each operator of a query runs for the next micro-batch
(LMStream Sec. III-D/E, Alg. 2).

The engine describes the query as a chain of operators in execution order (:class:`OpNode`: an operator kind of
LMStream's Table II) and, per batch, the data partition size one core processes; a :class:`DeviceMapper` returns a
device per operator and learns from every completed batch (:meth:`DeviceMapper.on_batch`). Pure Python: the
decisions are tested on hand-built plans without Spark or a GPU. Snapshot/restore, bounded state and the injected
clock follow :mod:`adaptstream.policy`.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from dataclasses import dataclass

from adaptstream.errors import ConfigError
from adaptstream.policy import Policy

CPU, GPU = "cpu", "gpu"
DEVICES = (CPU, GPU)


@dataclass(frozen=True)
class OpKind:
    """One row of LMStream's Table II: the operator's base cost and its initial device preference."""

    name: str
    base_cost: float
    preference: str  # cpu | gpu | neutral


#: LMStream Table II (initial preference from the authors' prior work [14], base cost per operation)
TABLE_II: dict[str, OpKind] = {
    k.name: k
    for k in (
        OpKind("aggregate", 1.0, CPU),  # hash aggregation
        OpKind("filter", 1.0, CPU),
        OpKind("shuffle", 1.0, CPU),
        OpKind("project", 0.9, "neutral"),
        OpKind("join", 0.9, "neutral"),  # hash join
        OpKind("expand", 0.9, "neutral"),  # a row per sliding window it falls in
        OpKind("scan", 0.8, GPU),  # CSV file scan
        OpKind("sort", 0.8, GPU),
    )
}


def op_kind(name: str) -> OpKind:
    try:
        return TABLE_II[name]
    except KeyError:
        msg = f"unknown operator kind {name!r}; valid choices: {', '.join(sorted(TABLE_II))}"
        raise ConfigError(msg) from None


@dataclass(frozen=True)
class OpNode:
    """An operator of the query plan, in execution order (the chain a micro-batch's partition flows through)."""

    name: str
    kind: str

    def __post_init__(self) -> None:
        op_kind(self.kind)


@dataclass(frozen=True)
class DeviceOutcome:
    """What a completed micro-batch measured: the inputs of the inflection-point regression (Eq. 10)."""

    throughput: float  # this batch's rows per second of processing time (Eq. 10's "average throughput per batch")
    max_latency: float  # seconds: the batch's maximum dataset latency (Eq. 2/3)
    partition_bytes: float  # the data partition size the mapping was made for (recorded with the outcome)

    def __post_init__(self) -> None:
        if self.throughput < 0 or self.max_latency < 0 or self.partition_bytes < 0:
            msg = f"bad batch outcome {self}: throughput, latency and size must be >= 0"
            raise ConfigError(msg)


class DeviceMapper(Policy, ABC):
    """Stateful device-mapping logic; one instance per streaming query."""

    name: str = "base"

    @abstractmethod
    def map(self, plan: list[OpNode], partition_bytes: float) -> list[str]:
        """A device (``cpu`` or ``gpu``) per operator of ``plan`` for a batch whose partitions hold
        ``partition_bytes`` bytes each."""

    def on_batch(self, outcome: DeviceOutcome) -> None:
        """Learn from a completed batch (called off the critical path, between batches)."""

    @property
    def inflection_point(self) -> float | None:
        """The partition size (bytes) where the device preference turns, if the mapper has one."""
        return None


def transitions(devices: list[str]) -> int:
    """Host<->device copies a mapping costs: between neighbours on different devices, and at a GPU first or last
    operator (the data arrive and leave on the host)."""
    if not devices:
        return 0
    inner = sum(a != b for a, b in itertools.pairwise(devices))
    return inner + (devices[0] == GPU) + (devices[-1] == GPU)
