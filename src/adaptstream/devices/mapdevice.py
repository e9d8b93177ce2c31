"""LMStream's MapDevice (Alg. 2, Eq. 7-10): a device per operator from the data partition size, and an inflection
point re-estimated after every micro-batch.

Eq. 7/8: CPU(o) = baseCost_o * Part / InfPT, GPU(o) = baseCost_o * InfPT / Part (Table II base costs).
Eq. 9: Trans(o) = baseTransCost * Part / InfPT (initial baseTransCost 0.1), added to the GPU's cost for the first
and last operator and after a CPU operator (the data must move to the GPU), to the CPU's cost otherwise. Alg. 2
starts from every operator on the GPU and moves an operator to the CPU when its GPU cost is higher.

Eq. 10: InfPT = b0 + b1 * throughput + b2 * latency, fitted by least squares over a bounded history of
(throughput, max latency, InfPT used) per batch and evaluated at the target throughput (the highest seen) and the
target latency (the window slide for sliding windows, Eq. 2, else the mean latency seen, Eq. 3).

Deviations, each needed to make the paper's loop work, measured on an H100 (docs/mapdevice.md):
* The paper does not say how ties are broken; an exact tie goes to the operator's Table II preference (Alg. 2's
  strict ``GPU > CPU`` test sends neutral operators to the GPU).
* With one InfPT in the whole history the regression has nothing to fit and never moves, and small variations of
  InfPT far from the partition size change no mapping, so the history holds no signal. Some batches therefore
  run with InfPT on the other side of their own partition size (size x or / ``explore_factor``), so the history
  holds batches of both mappings at the sizes the query really sees. Exploring costs a batch on the slower side,
  so after one try per size regime it happens only near the estimate (size within ``explore_range``x of it) and
  backs off exponentially (batches ``explore_every`` - 1, then 2x, 4x ... apart) until the partition size moves
  by ``explore_factor``.
* Throughput and latency of a batch are strongly correlated, so the target pair must be one the history could
  produce: when the highest-throughput batch already meets the latency target (the slide, or the mean for
  tumbling windows), the target latency is that batch's own; and the prediction stays within the InfPT values
  tried. Evaluated at
  (max throughput, slide) the fit extrapolated far outside its data and sent the estimate off by orders of
  magnitude in the first measured run.
* A prediction moves the estimate at most by ``max_step`` (x or /) per batch and stays within
  [``min_inflection``, ``max_inflection``]: one noisy batch must not flip every operator.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptstream.devices.base import CPU, GPU, DeviceMapper, DeviceOutcome, OpNode, op_kind
from adaptstream.errors import ConfigError


def device_costs(kind: str, part: float, infpt: float) -> tuple[float, float]:
    """(CPU cost, GPU cost) of one operator before transitions: Eq. 7 and Eq. 8."""
    base = op_kind(kind).base_cost
    if part <= 0:
        return 0.0, float("inf")
    return base * part / infpt, base * infpt / part


def map_plan(plan: list[OpNode], part: float, infpt: float, base_trans: float) -> tuple[list[str], list[dict]]:
    """Alg. 2 over the operator chain; returns the devices and, per operator, the costs it compared."""
    devices = [GPU] * len(plan)
    detail = []
    for i, op in enumerate(plan):
        cpu, gpu = device_costs(op.kind, part, infpt)
        trans = base_trans * part / infpt  # Eq. 9
        if i == 0 or i == len(plan) - 1 or devices[i - 1] == CPU:
            gpu += trans
        else:
            cpu += trans
        if gpu > cpu or (gpu == cpu and op_kind(op.kind).preference == CPU):
            devices[i] = CPU
        detail.append({"op": op.name, "cpu": cpu, "gpu": gpu, "device": devices[i]})
    return devices, detail


class MapDevice(DeviceMapper):
    name = "mapdevice"

    def __init__(self, cfg: MapDeviceConfig) -> None:
        self.cfg = cfg
        self._infpt = float(cfg.initial_inflection)
        self._batches = 0
        self._history: deque[tuple[float, float, float]] = deque(maxlen=cfg.history)
        self._used: float | None = None  # the InfPT the batch in flight was mapped with
        self._regime_size: float | None = None  # the partition size the exploration back-off counts for
        self._explored = 0
        self._next_explore = 0
        self.last_detail: list[dict] = []

    @property
    def inflection_point(self) -> float:
        return self._infpt

    def exploring(self, partition_bytes: float) -> bool:
        cfg = self.cfg
        if cfg.explore_every <= 0 or partition_bytes <= 0:
            return False
        ratio = max(partition_bytes / self._infpt, self._infpt / partition_bytes)
        near = ratio <= cfg.explore_range or self._explored == 0  # a new size regime is tried once, near or far
        return near and self._batches >= self._next_explore

    def _regime(self, partition_bytes: float) -> None:
        """A partition size far from the last explored one starts the exploration back-off again."""
        r, f = self._regime_size, self.cfg.explore_factor
        if partition_bytes > 0 and (r is None or max(partition_bytes / r, r / partition_bytes) > f):
            self._regime_size, self._explored = partition_bytes, 0
            self._next_explore = self._batches + self.cfg.explore_every - 1

    def map(self, plan: list[OpNode], partition_bytes: float) -> list[str]:
        self._regime(partition_bytes)
        self._used = self._infpt
        if self.exploring(partition_bytes):  # InfPT on the other side of this batch's own size
            self._explored += 1
            self._next_explore = self._batches + self.cfg.explore_every * 2**self._explored
            f = self.cfg.explore_factor
            self._used = partition_bytes * f if self._infpt <= partition_bytes else partition_bytes / f
        devices, self.last_detail = map_plan(plan, partition_bytes, self._used, self.cfg.base_trans_cost)
        return devices

    def on_batch(self, outcome: DeviceOutcome) -> None:
        used = self._used if self._used is not None else self._infpt
        self._used = None
        self._history.append((outcome.throughput, outcome.max_latency, used))
        self._batches += 1
        pred = self.regress()
        if pred is not None:
            lo, hi = self._infpt / self.cfg.max_step, self._infpt * self.cfg.max_step
            self._infpt = float(np.clip(pred, max(lo, self.cfg.min_inflection), min(hi, self.cfg.max_inflection)))

    def regress(self) -> float | None:
        """Eq. 10 over the history, evaluated at the target throughput and latency; None while it cannot be fit."""
        if len(self._history) < self.cfg.min_history:
            return None
        h = np.asarray(self._history, float)
        thr, lat, ipt = h[:, 0], h[:, 1], h[:, 2]
        if np.ptp(ipt) == 0:
            return None
        best = int(np.argmax(thr))
        # sliding: the window slide (Eq. 2); tumbling: the running mean (Eq. 3). Where the highest-throughput batch
        # already meets it, the bound does not bind and that batch's own latency is the consistent target.
        target_lat = self.cfg.slide if self.cfg.slide > 0 else float(lat.mean())
        target_lat = min(target_lat, float(lat[best]))
        x = np.column_stack([thr, lat])
        mu, sd = x.mean(axis=0), x.std(axis=0)
        sd[sd == 0] = 1.0
        design = np.column_stack([np.ones(len(h)), (x - mu) / sd])
        beta, *_ = np.linalg.lstsq(design, ipt, rcond=None)
        at = np.array([1.0, *((np.array([thr.max(), target_lat]) - mu) / sd)])
        pred = float(np.clip(at @ beta, ipt.min(), ipt.max()))  # never beyond the InfPT values tried
        return pred if np.isfinite(pred) and pred > 0 else None

    def _state(self) -> dict[str, Any]:
        return {
            "infpt": self._infpt,
            "batches": self._batches,
            "used": self._used,
            "regime": self._regime_size,
            "explored": self._explored,
            "next_explore": self._next_explore,
            "history": [list(x) for x in self._history],
        }

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._infpt = float(state["infpt"])
        self._batches = int(state["batches"])
        self._used = None if state["used"] is None else float(state["used"])
        self._regime_size = None if state["regime"] is None else float(state["regime"])
        self._explored, self._next_explore = int(state["explored"]), int(state["next_explore"])
        self._history = deque((tuple(map(float, x)) for x in state["history"]), maxlen=self.cfg.history)  # type: ignore[misc]


@dataclass(frozen=True)
class MapDeviceConfig:
    """MapDevice's parameters; the defaults are the paper's where it gives one."""

    initial_inflection: float = 150_000.0  # bytes per partition (the paper's 150 KB)
    base_trans_cost: float = 0.1  # Eq. 9's initial baseTransCost
    slide: float = 0.0  # seconds: target latency of a sliding window (Eq. 2); 0 = tumbling, the mean (Eq. 3)
    history: int = 64  # batches the regression keeps (bounded: the paper notes it must not grow forever)
    min_history: int = 6
    explore_every: int = 4  # the first exploring batch of a size regime; then 2x, 4x ... apart (0: never)
    explore_factor: float = 2.0
    explore_range: float = 4.0  # explore only while the partition size is within this factor of the estimate
    max_step: float = 2.0
    min_inflection: float = 1_000.0
    max_inflection: float = 1e9

    def __post_init__(self) -> None:
        checks = (
            (self.initial_inflection > 0, "initial_inflection must be > 0 bytes"),
            (self.base_trans_cost >= 0, "base_trans_cost must be >= 0"),
            (self.slide >= 0, "slide must be >= 0 seconds"),
            (self.history >= 3 and 3 <= self.min_history <= self.history, "need 3 <= min_history <= history"),
            (self.explore_every >= 0 and self.explore_factor > 1, "need explore_every >= 0 and explore_factor > 1"),
            (self.explore_range >= self.explore_factor, "explore_range must be >= explore_factor"),
            (self.max_step > 1, "max_step must be > 1"),
            (
                0 < self.min_inflection <= self.initial_inflection <= self.max_inflection,
                "need 0 < min_inflection <= initial_inflection <= max_inflection",
            ),
        )
        for ok, msg in checks:
            if not ok:
                raise ConfigError(f"mapdevice: {msg}")

    def build(self) -> MapDevice:
        return MapDevice(self)
