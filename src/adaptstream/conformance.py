"""The policy contract, as a check anyone can run: the drivers that play the engine's side of a seeded synthetic
trace for each policy family, and :func:`check_policy`, which runs a policy through them the way every built-in
policy is checked (tests/unit/test_conformance.py): it builds from its config, snapshots to JSON, resumes the same
decisions after a kill and restart at any point, is deterministic for a seed, and keeps its state bounded.

A policy of one's own package is checked by name (``package.module:ConfigClass``, see docs/extending.md)::

    from adaptstream.conformance import check_policy
    check_policy("admission", "mypkg.policies:EveryOtherConfig")
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from adaptstream.admission import ADMISSION, BatchOutcome, PendingDataset, build_admission
from adaptstream.allocation import ALLOCATORS, build_allocator
from adaptstream.devices import DEVICE_MAPPERS, TABLE_II, DeviceOutcome, OpNode, build_device_mapper
from adaptstream.elasticity import ELASTICITY, BatchStats, build_elasticity
from adaptstream.errors import AdaptstreamError
from adaptstream.partitioning import PARTITIONERS, build_partitioner
from adaptstream.policy import ManualClock, Policy
from adaptstream.registry import Registry
from adaptstream.scheduling import SCHEDULERS, build_scheduler


class ConformanceError(AdaptstreamError, AssertionError):
    """A policy breaks the contract; the message says which part and how."""


class Driver(Protocol):
    """The engine around a policy: owns the clock and the trace, so a restarted policy sees the same world."""

    clock: ManualClock

    def step(self, policy: Any) -> Any:
        """Feed the policy one step of the trace; return what it decided (comparable with ==)."""

    def settle(self, policy: Any) -> None:
        """Bring the policy to a point where its size is comparable: a window boundary, the same engine settings."""


class AdmissionDriver:
    """Spark's polling loop: datasets arrive at random, the policy is polled, admitted batches run and report back."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.clock = ManualClock(1_700_000_000.0)  # epoch-like seconds, as the source passes time.time()
        self.pending: list[PendingDataset] = []
        self.seq = 0

    def step(self, policy: Any) -> Any:
        now = self.clock.advance(float(self.rng.choice([0.02, 0.02, 0.05, 0.3, 1.5])))
        if self.rng.random() < 0.3:
            self.pending.append(
                PendingDataset(self.seq, now - float(self.rng.uniform(0, 0.02)), int(self.rng.integers(1, 5000)))
            )
            self.seq += 1
        est = policy.estimate_max_latency(now, self.pending)
        admitted = policy.admit(now, self.pending)
        if admitted:
            rows = sum(d.rows for d in self.pending)
            proc = 0.05 + rows / 20_000.0 * float(self.rng.uniform(0.8, 1.5))
            done = now + proc
            max_lat = max((done - d.arrival for d in self.pending), default=0.0)
            policy.on_batch_complete(BatchOutcome(rows, now, done, max_lat, est))
            self.clock.advance(proc)
            self.pending = []
        return admitted, est, policy.state()

    def settle(self, policy: Any) -> None:
        pass  # admission has no windows; its state must not grow at all


class PartitionerDriver:
    """The source's batch loop: keys arrive in chunks (observe), maybe an early release, the cut (assign), and
    now and then a window boundary."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.clock = ManualClock(0.0)
        self.blocks = 4

    def step(self, policy: Any) -> Any:
        rng = self.rng
        if rng.random() < 0.05:
            self.blocks = int(rng.choice([1, 2, 3, 4, 7], p=[0.05, 0.2, 0.25, 0.25, 0.25]))
        n = int(rng.integers(0, 200))
        universe = 3 if rng.random() < 0.2 else 200  # now and then a batch of few groups (auto's other branch)
        keys = (rng.zipf(1.3, n) % universe).astype(np.int64) * 7919
        cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, 3))))
        release: Any = getattr(policy, "release", None)
        early = release is not None and rng.random() < 0.5
        for i, chunk in enumerate(np.split(keys, cuts)):
            self.clock.advance(float(rng.uniform(0.0, 0.3)))
            if early and i == len(cuts):  # the last chunk arrives after the early release
                release(self.blocks)
            if len(chunk):
                policy.observe(chunk)
        self.clock.advance(0.01)
        out = np.asarray(policy.assign(keys, self.blocks))
        if rng.random() < 0.1:
            policy.on_window_boundary()
        return self.blocks, out.tolist()

    def settle(self, policy: Any) -> None:
        policy.assign(np.zeros(0, np.int64), 4)  # sketches are per block: compare at the same block count
        policy.on_window_boundary()


class SchedulerDriver:
    """The controller's side: two queries (one reading two joined streams) get datasets with random network delays,
    poll for grants at random, and report granted batches complete a little later."""

    STREAMS: ClassVar[dict] = {"q1": {"main": (1.0, 0.5)}, "q2": {"a": (1.2, 0.3), "b": (1.2, 0.3)}}

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.clock = ManualClock(1_700_000_000.0)
        self.origin = self.clock.now
        self.seq = {"q1": 0, "q2": 0}
        self.pending = {"q1": 0, "q2": 0}
        self.running: dict[str, int] = {}
        self.registered = False

    def step(self, policy: Any) -> Any:
        rng = self.rng
        if not self.registered:  # the engine registers once; a restarted policy learns it from its snapshot
            for q, streams in self.STREAMS.items():
                policy.register(q, streams, now=self.clock.now)
            self.registered = True
        now = self.clock.advance(float(rng.choice([0.05, 0.2, 0.5, 1.0])))
        for q, streams in self.STREAMS.items():
            if rng.random() < 0.7:
                for s in streams:
                    d = float(rng.uniform(0.0, 0.8))
                    policy.progress(q, s, self.seq[q], now, now - d, self.origin, 3, 3 * d, 3 * d * d + 0.01)
                self.seq[q] += 1
                self.pending[q] += int(rng.integers(1, 1000))
        for q in list(self.running):
            if rng.random() < 0.5:
                end = self.running.pop(q)
                policy.complete(q, now, end, int(rng.integers(1, 3000)), float(rng.uniform(0.1, 2.0)))
        policy.memory(now, float(rng.uniform(0.3, 0.95)))
        q = str(rng.choice(["q1", "q2"]))
        if q in self.running:  # Spark asks a source for offsets only between its micro-batches
            return q, None, tuple(policy.current_order())
        want = self.pending[q] > 0 and rng.random() < 0.9
        granted = policy.poll(q, now, want, self.pending[q], now - 1.0)
        if granted and policy.gates:
            self.running[q] = self.seq[q]
        if granted:
            self.pending[q] = 0
        return q, granted, tuple(policy.current_order())

    def settle(self, policy: Any) -> None:
        pass  # per-stream history is a ring of h epochs; nothing else grows


class AllocatorDriver:
    """One map task per step: its key clusters (Zipf sizes), the block's split flags, the job's bucket count."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.clock = ManualClock(0.0)

    def step(self, policy: Any) -> Any:
        rng = self.rng
        n = int(rng.integers(0, 300))
        keys = rng.choice(1 << 40, n, replace=False).astype(np.int64)
        sizes = rng.zipf(1.5, n).astype(np.int64)
        split = rng.random(n) < 0.2
        buckets = int(rng.choice([1, 2, 3, 4, 7]))
        return buckets, policy.allocate(keys, sizes, split, buckets).tolist()

    def settle(self, policy: Any) -> None:
        pass  # allocators keep nothing across batches


class ElasticityDriver:
    """A micro-batch engine whose processing time follows the plan: rows and keys swing (sinusoid + noise), the
    map stage costs rows / map tasks, the reduce stage keys / reduce buckets."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.clock = ManualClock(0.0)
        self.t = 0

    def step(self, policy: Any) -> Any:
        rng, plan = self.rng, policy.plan
        self.t += 1
        rows = int(4000 * (1.2 + np.sin(self.t / 9.0)) * rng.uniform(0.9, 1.1))
        keys = int(300 * (1.2 + np.cos(self.t / 13.0)) * rng.uniform(0.9, 1.1))
        pt = 0.05 + rows / 5000.0 / plan.map_tasks + keys / 400.0 / plan.reduce_buckets
        self.clock.advance(1.0)
        return round(pt, 9), policy.on_batch(BatchStats(pt, 1.0, rows, keys)).as_tuple()

    def settle(self, policy: Any) -> None:
        pass


class DeviceDriver:
    """A query whose operator chain and partition size change per batch; throughput grows with the share of
    operators on the GPU when partitions are large and falls when they are small (noise on both)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.clock = ManualClock(0.0)
        self.kinds = sorted(TABLE_II)

    def step(self, policy: Any) -> Any:
        rng = self.rng
        plan = [OpNode(f"op{i}", str(rng.choice(self.kinds))) for i in range(int(rng.integers(1, 7)))]
        part = float(rng.lognormal(np.log(150_000), 1.5))
        devices = policy.map(plan, part)
        gpu_share = sum(d == "gpu" for d in devices) / len(devices)
        speedup = 1 + gpu_share * np.tanh(np.log(part / 150_000))
        self.clock.advance(1.0)
        policy.on_batch(DeviceOutcome(1e5 * speedup * rng.uniform(0.9, 1.1), float(rng.uniform(0.5, 2.0)), part))
        return round(part), tuple(devices)

    def settle(self, policy: Any) -> None:
        pass  # the regression's history is a ring buffer


@dataclass(frozen=True)
class Family:
    name: str
    registry: Registry[Any]
    build: Callable[..., Any]
    driver: Callable[[int], Driver]


FAMILIES = [
    Family("admission", ADMISSION, build_admission, AdmissionDriver),
    Family("partitioner", PARTITIONERS, build_partitioner, PartitionerDriver),
    Family("scheduler", SCHEDULERS, build_scheduler, SchedulerDriver),
    Family("allocator", ALLOCATORS, build_allocator, AllocatorDriver),
    Family("elasticity", ELASTICITY, build_elasticity, ElasticityDriver),
    Family("device mapper", DEVICE_MAPPERS, build_device_mapper, DeviceDriver),
]
RESTART_POINTS = (1, 37, 150, 211)
MAX_STATE_BYTES = 64 * 1024


def family(name: str) -> Family:
    for f in FAMILIES:
        if f.name == name:
            return f
    msg = f"unknown policy family {name!r}; valid choices: {', '.join(f.name for f in FAMILIES)}"
    raise ConformanceError(msg)


def fresh(family: Family, name: str, params: dict[str, Any], driver: Driver) -> Any:
    return family.build(name, **params).set_clock(driver.clock)


def run_trace(
    family: Family,
    name: str,
    params: dict[str, Any],
    seed: int,
    steps: int,
    restart_at: int | None = None,
    restore: bool = True,
) -> list[Any]:
    """Decisions over `steps` steps; with restart_at, the policy is snapshotted there (through JSON), dropped, and
    a fresh one built from the same config carries on from the snapshot (restore=False: without it), as a killed
    and restarted query does."""
    driver = family.driver(seed)
    policy = fresh(family, name, params, driver)
    decisions = []
    for i in range(steps):
        if i == restart_at:
            saved = json.loads(json.dumps(policy.state_dict(), allow_nan=False))
            policy = fresh(family, name, params, driver)
            if restore:
                policy.load_state_dict(saved)
                if policy.state_dict() != saved:  # the round trip is exact
                    msg = f"{family.name} {name!r}: load_state_dict(state_dict()) does not give the same snapshot"
                    raise ConformanceError(msg)
        decisions.append(driver.step(policy))
    return decisions


def sizes(policy: Any) -> tuple[int, int]:
    """(JSON snapshot bytes, pickled object bytes): what must not grow."""
    return len(json.dumps(policy.state_dict())), len(pickle.dumps(policy))


def check_bounded(fam: Family, name: str, params: dict[str, Any], short: int, long: int) -> None:
    """Neither the snapshot nor the object grows from step ``short`` to step ``long`` (taken at a window boundary),
    and the snapshot stays under MAX_STATE_BYTES."""
    driver = fam.driver(3)
    policy = fresh(fam, name, params, driver)
    for _ in range(short):
        driver.step(policy)
    driver.settle(policy)
    json_a, obj_a = sizes(policy)
    for _ in range(long - short):
        driver.step(policy)
    driver.settle(policy)
    json_b, obj_b = sizes(policy)
    if not (json_b <= MAX_STATE_BYTES and json_b <= json_a * 1.05 + 256 and obj_b <= obj_a * 1.05 + 4096):
        msg = f"{fam.name} {name!r}: state grows (snapshot {json_a} -> {json_b} bytes, object {obj_a} -> {obj_b})"
        raise ConformanceError(msg)


def check_policy(family_name: str, name: str, params: dict[str, Any] | None = None, steps: int = 300) -> None:
    """Run ``name`` (a registered name or ``package.module:ConfigClass``) through the family's contract; raises
    ConformanceError naming the first part it breaks."""
    fam, params = family(family_name), dict(params or {})
    policy = fam.build(name, **params)
    if not isinstance(policy, Policy):
        msg = f"{family_name} {name!r} builds a {type(policy).__name__}, not an adaptstream Policy"
        raise ConformanceError(msg)
    state = policy.state_dict()
    if json.loads(json.dumps(state, allow_nan=False)) != state:
        msg = f"{family_name} {name!r}: its snapshot does not survive JSON"
        raise ConformanceError(msg)
    reference = run_trace(fam, name, params, seed=11, steps=steps)
    if run_trace(fam, name, params, seed=11, steps=steps) != reference:
        msg = f"{family_name} {name!r}: two runs of one seeded trace decide differently (not deterministic)"
        raise ConformanceError(msg)
    for at in (p for p in RESTART_POINTS if p < steps):
        if run_trace(fam, name, params, seed=11, steps=steps, restart_at=at) != reference:
            msg = f"{family_name} {name!r}: after a restart at step {at} from its snapshot it decides differently"
            raise ConformanceError(msg)
    check_bounded(fam, name, params, 1_500, 4_000)
