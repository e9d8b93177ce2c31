"""Linear Road position reports from a vehicle simulation (input format of Arasu et al., VLDB 2004).

Rows have the benchmark's 15 integer fields ``Type, Time, VID, Spd, XWay, Lane, Dir, Seg, Pos, QID, Sinit,
Send, DOW, TOD, Day``; fields a row type does not use are -1, as in the benchmark's data files. The
simulation is our own (simulated traffic, not the benchmark's MITSIM-generated files):

* vehicles enter on an entrance ramp (first report in lane 0), drive in travel lanes 1-3 and leave at their
  exit segment with a last report in lane 4; each vehicle reports every 30 s from its entry second on;
* speed = the vehicle's preferred free-flow speed slowed by the number of vehicles in its segment, plus
  noise; simulated accidents slow the accident segment and the 4 segments upstream of it for 5-20 minutes;
* the number of rows in second ``t`` is exactly the requested ``n_rows``: the vehicles due to report in
  ``t`` are those that entered at a second congruent to ``t`` mod 30; missing reports are filled by new
  vehicles entering, surplus vehicles leave the simulated road silently (they just stop reporting, with no
  final exit report);
* a small share of rows are query requests (Type 2 balance, 3 daily expenditure, 4 travel time) by vehicles
  that report in the same second.

With ``xways=None`` the number of expressways grows with the rate (one per ``reports_per_xway`` rows/s, as
the benchmark scales with its L rating) so that congestion per segment stays in a realistic band.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from adaptstream.errors import WorkloadError
from adaptstream.workloads.base import GENERATORS, DatasetGenerator

FIELDS = (
    "Type",
    "Time",
    "VID",
    "Spd",
    "XWay",
    "Lane",
    "Dir",
    "Seg",
    "Pos",
    "QID",
    "Sinit",
    "Send",
    "DOW",
    "TOD",
    "Day",
)
SEGMENT_FT = 5280
N_SEGMENTS = 100
MAX_POS = SEGMENT_FT * N_SEGMENTS - 1  # 527999
REPORT_INTERVAL_S = 30
FT_PER_MPH_30S = SEGMENT_FT * REPORT_INTERVAL_S / 3600.0  # feet covered in 30 s at 1 mph (44 ft)
SENTINEL_TYPE = -1

ARROW_SCHEMA = pa.schema([pa.field(f, pa.int32(), nullable=False) for f in FIELDS])
SPARK_DDL = ", ".join(f"{f} INT" for f in FIELDS)

_VEH = ("vid", "xway", "dir", "lane", "pos", "spd", "dest", "pref")  # per-vehicle state columns


def _empty_bucket() -> dict[str, np.ndarray]:
    return {k: np.empty(0, dtype=np.int64) for k in _VEH}


@dataclass(frozen=True)
class LinearRoadGeneratorConfig:
    seed: int = 0
    xways: int | None = None  # fixed number of expressways; None = grow with the rate
    reports_per_xway: int = 400  # rows/s per expressway when ``xways`` is None
    max_xways: int = 256
    segment_capacity: float = 80.0  # vehicles per segment and direction at which speed halves
    accident_rate_per_hour: float = 2.0  # simulated accidents per expressway direction and hour
    request_share: float = 0.01  # share of rows that are Type 2/3/4 query requests
    max_trip_segments: int = 60
    generator_cls: ClassVar[type[DatasetGenerator]]

    def build(self) -> LinearRoadGenerator:
        if self.xways is not None and not 1 <= self.xways <= self.max_xways:
            msg = f"xways must be in 1..{self.max_xways}, got {self.xways}"
            raise WorkloadError(msg)
        if not 0.0 <= self.request_share < 1.0 or self.segment_capacity <= 0 or self.reports_per_xway <= 0:
            msg = f"bad Linear Road generator options: {self}"
            raise WorkloadError(msg)
        return LinearRoadGenerator(self)


class LinearRoadGenerator(DatasetGenerator):
    """Simulated expressway traffic emitting Linear Road position reports and a few query requests."""

    name = "linear_road"
    arrow_schema = ARROW_SCHEMA
    spark_schema_ddl = SPARK_DDL

    def __init__(self, config: LinearRoadGeneratorConfig) -> None:
        super().__init__(config.seed)
        self.config = config
        # one bucket of vehicles per report phase (entry second mod 30): only one bucket moves per second
        self.buckets = [_empty_bucket() for _ in range(REPORT_INTERVAL_S)]
        self.counts = np.zeros((config.max_xways, 2, N_SEGMENTS), dtype=np.int64)  # vehicles per segment
        self.accidents = np.empty((0, 5), dtype=np.int64)  # xway, dir, seg, start, end
        self.next_vid = 0
        self.next_qid = 0
        self.active_xways = 1 if config.xways is None else config.xways

    # -- state ---------------------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            "buckets": [{k: v.copy() for k, v in b.items()} for b in self.buckets],
            "counts": self.counts.copy(),
            "accidents": self.accidents.copy(),
            "next_vid": self.next_vid,
            "next_qid": self.next_qid,
            "active_xways": self.active_xways,
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self.buckets = [{k: np.array(v, dtype=np.int64) for k, v in b.items()} for b in state["buckets"]]
        self.counts = np.asarray(state["counts"], dtype=np.int64).copy()
        self.accidents = np.asarray(state["accidents"], dtype=np.int64).reshape(-1, 5).copy()
        self.next_vid = int(state["next_vid"])
        self.next_qid = int(state["next_qid"])
        self.active_xways = int(state["active_xways"])

    @property
    def active_vehicles(self) -> int:
        return sum(len(b["vid"]) for b in self.buckets)

    # -- one simulated second ------------------------------------------------------------------------------
    def _step(self, second: int, n_rows: int, materialise: bool) -> pa.Table | None:
        cfg = self.config
        rng = self.rng(second)
        if cfg.xways is None:  # the road network only grows, so vehicles never sit on a removed expressway
            wanted = int(np.ceil(max(n_rows, 1) / cfg.reports_per_xway))
            self.active_xways = max(self.active_xways, min(cfg.max_xways, wanted))
        self._update_accidents(second, rng)
        n_req = int(rng.binomial(n_rows, cfg.request_share)) if n_rows > 0 else 0
        n_rep = n_rows - n_req

        phase = second % REPORT_INTERVAL_S
        old = self.buckets[phase]
        self._count(old, -1)
        moved, exiting = self._move(old)
        n_old = len(moved["vid"])
        if n_old > n_rep:  # surplus: some vehicles leave the observed road without reporting again
            keep = np.sort(rng.choice(n_old, size=n_rep, replace=False))
            moved = {k: v[keep] for k, v in moved.items()}
            exiting = exiting[keep]
        new = self._spawn(n_rep - len(moved["vid"]), rng)
        cars = {k: np.concatenate([moved[k], new[k]]) for k in _VEH}
        exiting = np.concatenate([exiting, np.zeros(len(new["vid"]), dtype=bool)])
        is_new = np.zeros(len(cars["vid"]), dtype=bool)
        is_new[len(moved["vid"]) :] = True

        seg = cars["pos"] // SEGMENT_FT
        np.add.at(self.counts, (cars["xway"][~exiting], cars["dir"][~exiting], seg[~exiting]), 1)
        cars["spd"] = self._speeds(cars, seg, second, rng)
        lanes = rng.integers(1, 4, size=len(cars["vid"]))
        lanes[is_new] = 0
        lanes[exiting] = 4
        cars["lane"] = lanes
        self.buckets[phase] = {k: v[~exiting] for k, v in cars.items()}

        requests = self._requests(n_req, cars, second, rng)
        if not materialise:
            return None
        return self._table(second, cars, seg, requests, rng)

    def _count(self, bucket: dict[str, np.ndarray], delta: int) -> None:
        if len(bucket["vid"]):
            np.add.at(self.counts, (bucket["xway"], bucket["dir"], bucket["pos"] // SEGMENT_FT), delta)

    def _move(self, b: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Advance each vehicle by 30 s at its last reported speed; those reaching their exit segment exit."""
        sign = 1 - 2 * b["dir"]
        pos = b["pos"] + sign * np.floor(b["spd"] * FT_PER_MPH_30S).astype(np.int64)
        new_seg = pos // SEGMENT_FT
        exiting = np.where(b["dir"] == 0, new_seg >= b["dest"], new_seg <= b["dest"])
        # an exiting vehicle reports from inside its exit segment (it does not overshoot the ramp)
        last_ft = b["dest"] * SEGMENT_FT + SEGMENT_FT - 1
        pos = np.where(exiting & (b["dir"] == 0), np.minimum(pos, last_ft), pos)
        pos = np.where(exiting & (b["dir"] == 1), np.maximum(pos, b["dest"] * SEGMENT_FT), pos)
        moved = dict(b)
        moved["pos"] = np.clip(pos, 0, MAX_POS)
        return moved, exiting

    def _spawn(self, k: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        cfg = self.config
        k = max(int(k), 0)
        xway = rng.integers(0, self.active_xways, size=k)
        direction = rng.integers(0, 2, size=k)
        entry = rng.integers(0, N_SEGMENTS - 1, size=k)  # 0..98 counted along the direction of travel
        trip = rng.integers(1, cfg.max_trip_segments + 1, size=k)
        dest_along = np.minimum(entry + trip, N_SEGMENTS - 1)
        offset = rng.integers(0, SEGMENT_FT // 4, size=k)  # the ramp joins in the segment's first quarter
        pos_along = entry * SEGMENT_FT + offset
        pos = np.where(direction == 0, pos_along, MAX_POS - pos_along)
        dest = np.where(direction == 0, dest_along, N_SEGMENTS - 1 - dest_along)
        pref = np.clip(np.rint(rng.normal(62.0, 9.0, size=k)), 40, 95).astype(np.int64)
        vid = np.arange(self.next_vid, self.next_vid + k, dtype=np.int64)
        self.next_vid += k
        zeros = np.zeros(k, dtype=np.int64)
        return {
            "vid": vid,
            "xway": xway.astype(np.int64),
            "dir": direction.astype(np.int64),
            "lane": zeros,
            "pos": pos.astype(np.int64),
            "spd": zeros.copy(),
            "dest": dest.astype(np.int64),
            "pref": pref,
        }

    def _speeds(
        self, cars: dict[str, np.ndarray], seg: np.ndarray, second: int, rng: np.random.Generator
    ) -> np.ndarray:
        density = self.counts[cars["xway"], cars["dir"], seg].astype(np.float64)
        spd = cars["pref"] / (1.0 + (density / self.config.segment_capacity) ** 2)
        spd = spd + rng.normal(0.0, 3.0, size=len(spd))
        zone = self._accident_zones()[cars["xway"], cars["dir"], seg]  # 0 none, 1 upstream, 2 accident
        crawl = rng.uniform(0.0, 15.0, size=len(spd)) * np.where(zone == 2, 0.3, 1.0)
        spd = np.where(zone > 0, np.minimum(spd, crawl), spd)
        return np.clip(np.rint(spd), 0, 100).astype(np.int64)

    def _accident_zones(self) -> np.ndarray:
        zones = np.zeros(self.counts.shape, dtype=np.int8)
        for xw, d, aseg, _start, _end in self.accidents:
            lo, hi = (aseg - 4, aseg) if d == 0 else (aseg, aseg + 4)  # upstream = against the traffic
            zones[xw, d, max(lo, 0) : min(hi, N_SEGMENTS - 1) + 1] = np.maximum(
                zones[xw, d, max(lo, 0) : min(hi, N_SEGMENTS - 1) + 1], 1
            )
        for xw, d, aseg, _start, _end in self.accidents:
            zones[xw, d, aseg] = 2
        return zones

    def _update_accidents(self, second: int, rng: np.random.Generator) -> None:
        acc = self.accidents
        self.accidents = acc[acc[:, 4] > second] if len(acc) else acc
        lanes = self.active_xways * 2
        p = self.config.accident_rate_per_hour / 3600.0
        start = np.flatnonzero(rng.random(lanes) < p)
        segs = rng.integers(0, N_SEGMENTS, size=len(start))
        dur = rng.integers(300, 1201, size=len(start))
        if len(start):
            rows = np.stack([start // 2, start % 2, segs, np.full(len(start), second), second + dur], axis=1)
            self.accidents = np.concatenate([self.accidents, rows.astype(np.int64)])

    def _requests(
        self, n_req: int, cars: dict[str, np.ndarray], second: int, rng: np.random.Generator
    ) -> dict[str, np.ndarray]:
        pick = rng.integers(0, max(len(cars["vid"]), 1), size=n_req)
        kind = rng.choice(np.array([2, 3, 4]), size=n_req, p=[0.5, 0.4, 0.1])
        qid = np.arange(self.next_qid, self.next_qid + n_req, dtype=np.int64)
        self.next_qid += n_req
        sa = rng.integers(0, N_SEGMENTS, size=n_req)
        sb = rng.integers(0, N_SEGMENTS, size=n_req)
        extra = {
            "Day": rng.integers(1, 70, size=n_req),
            "DOW": rng.integers(1, 8, size=n_req),
            "TOD": rng.integers(1, 1441, size=n_req),
        }
        if n_req and not len(cars["vid"]):
            msg = "query requests need reporting vehicles"  # unreachable: n_req <= n_rows * share < n_rows
            raise WorkloadError(msg)
        vid = cars["vid"][pick] if n_req else np.empty(0, dtype=np.int64)
        xway = cars["xway"][pick] if n_req else np.empty(0, dtype=np.int64)
        return {
            "kind": kind,
            "qid": qid,
            "vid": vid,
            "xway": xway,
            "sinit": np.minimum(sa, sb),
            "send": np.maximum(sa, sb),
            **extra,
        }

    def _table(
        self,
        second: int,
        cars: dict[str, np.ndarray],
        seg: np.ndarray,
        req: dict[str, np.ndarray],
        rng: np.random.Generator,
    ) -> pa.Table:
        n_rep, n_req = len(cars["vid"]), len(req["qid"])
        n = n_rep + n_req
        out = {f: np.full(n, -1, dtype=np.int32) for f in FIELDS}
        out["Type"][n_rep:] = req["kind"]
        out["Type"][:n_rep] = 0
        out["Time"][:] = second
        out["VID"][:n_rep] = cars["vid"]
        out["VID"][n_rep:] = req["vid"]
        for f, key in (("Spd", "spd"), ("XWay", "xway"), ("Lane", "lane"), ("Dir", "dir"), ("Pos", "pos")):
            out[f][:n_rep] = cars[key]
        out["Seg"][:n_rep] = seg
        out["QID"][n_rep:] = req["qid"]
        k = req["kind"]
        t34 = n_rep + np.flatnonzero(k != 2)
        out["XWay"][t34] = req["xway"][k != 2]
        t3, t4 = n_rep + np.flatnonzero(k == 3), n_rep + np.flatnonzero(k == 4)
        out["Day"][t3] = req["Day"][k == 3]
        for f, key in (("Sinit", "sinit"), ("Send", "send"), ("DOW", "DOW"), ("TOD", "TOD")):
            out[f][t4] = req[key][k == 4]
        order = rng.permutation(n)  # reports and requests arrive interleaved
        return pa.table({f: pa.array(out[f][order], type=pa.int32()) for f in FIELDS}, schema=ARROW_SCHEMA)

    @classmethod
    def sentinel_table(cls, time_s: int) -> pa.Table:
        row = {f: [-1] for f in FIELDS}
        row["Time"] = [int(time_s)]
        row["Type"] = [SENTINEL_TYPE]
        return pa.table({f: pa.array(v, type=pa.int32()) for f, v in row.items()}, schema=ARROW_SCHEMA)


LinearRoadGeneratorConfig.generator_cls = LinearRoadGenerator
GENERATORS.register("linear_road")(LinearRoadGeneratorConfig)
