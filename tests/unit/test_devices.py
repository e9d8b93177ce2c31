"""Device mapping (LMStream Alg. 2, Eq. 7-10) without Spark, and the operator backends: golden decisions on
hand-built plans, the inflection-point regression on seeded histories, CPU operators against plain numpy, and
(marked ``gpu``, run where a CUDA GPU exists) GPU operators equal to the CPU ones."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from adaptstream.devices import DeviceOutcome, OpNode, build_device_mapper, transitions
from adaptstream.devices.mapdevice import MapDeviceConfig, map_plan
from adaptstream.devices.operators import Aggregate, Expand, Filter, Join, Project, Sort, gpu_available
from adaptstream.devices.pipeline import CHAINS, run_chain
from adaptstream.errors import ConfigError, UnknownNameError
from adaptstream.workloads import build_generator


def _data(gen: str, seconds: int, rate: int, seed: int = 1) -> pa.Table:
    g = build_generator(gen, seed=seed)
    return pa.concat_tables([g.generate(k, rate) for k in range(seconds)])


def _plan(*kinds: str) -> list[OpNode]:
    return [OpNode(f"{k}{i}", k) for i, k in enumerate(kinds)]


# -- Alg. 2 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("part", "want"),
    [
        (10, ["cpu", "cpu", "cpu"]),  # far below the inflection point: the CPU everywhere
        (100, ["cpu", "cpu", "cpu"]),  # at it: the first operator pays the copy to the GPU, then every next one
        (106, ["gpu", "gpu", "gpu"]),  # just above: the GPU's saving beats the copy
        (1000, ["gpu", "gpu", "gpu"]),
    ],
)
def test_alg2_golden_filter_project_aggregate(part, want):
    assert map_plan(_plan("filter", "project", "aggregate"), part, 100, 0.1)[0] == want


def test_alg2_last_operator_pays_the_copy_back():
    # filter (base 1.0) gains more than the copy at 1.06 x InfPT; sort (base 0.8), the last operator, does not
    assert map_plan(_plan("filter", "sort"), 106, 100, 0.1)[0] == ["gpu", "cpu"]
    devices, detail = map_plan(_plan("scan", "filter", "project", "join", "sort"), 106, 100, 0.1)
    assert devices == ["cpu", "gpu", "gpu", "gpu", "cpu"]  # cheap ends on the CPU, the middle on the GPU
    assert transitions(devices) == 2
    assert detail[2]["cpu"] == pytest.approx(0.9 * 1.06 + 0.1 * 1.06)  # a middle op after the GPU: copy on the CPU


def test_alg2_ties_go_to_the_table_ii_preference():
    # no copy cost and Part == InfPT: both devices cost the base cost
    assert map_plan(_plan("filter", "project", "sort"), 100, 100, 0.0)[0] == ["cpu", "gpu", "gpu"]


def test_empty_partition_maps_to_the_cpu():
    assert map_plan(_plan("filter", "sort"), 0, 100, 0.1)[0] == ["cpu", "cpu"]


def test_transitions_count_host_copies():
    assert transitions([]) == 0
    assert transitions(["cpu", "cpu"]) == 0
    assert transitions(["gpu"]) == 2
    assert transitions(["cpu", "gpu", "cpu", "gpu"]) == 4


# -- Eq. 10 -------------------------------------------------------------------------------------------------
PLAN4 = _plan("filter", "project", "expand", "aggregate")


def _world(devices: list[str], part: float) -> float:
    """Seconds a batch takes: per operator the CPU costs 4 ns/byte, the GPU 2 ms / 4 + 0.8 ns/byte (equal at
    625 KB partitions)."""
    return sum(4e-9 * part if d == "cpu" else 0.0005 + 0.8e-9 * part for d in devices)


def _feed(mapper, n: int, part: float, seed: int = 0) -> tuple[list[float], list[list[str]]]:
    rng = np.random.default_rng(seed)
    est, maps = [], []
    for _ in range(n):
        devices = mapper.map(PLAN4, part)
        t = _world(devices, part) * rng.uniform(0.95, 1.05)
        mapper.on_batch(DeviceOutcome(part / 60 / t, t, part))
        est.append(mapper.inflection_point)
        maps.append(devices)
    return est, maps


@pytest.mark.parametrize(
    ("part", "start", "want"),
    [
        (6e6, 20e6, "gpu"),  # large partitions, started on the CPU side: learns the GPU
        (60e3, 15e3, "cpu"),  # small partitions, started on the GPU side: learns the CPU
        (6e6, 150e3, "gpu"),  # already right: stays
        (60e3, 150e3, "cpu"),
    ],
)
def test_regression_learns_the_faster_side_of_the_partition_size(part, start, want):
    m = build_device_mapper("mapdevice", slide=10.0, initial_inflection=start)
    est, maps = _feed(m, 60, part)
    assert (est[-1] < part) == (want == "gpu")
    assert sum(mp != [want] * 4 for mp in maps[-20:]) <= 1  # at most one exploring batch late in the run


def test_exploring_batches_cross_the_partition_size_and_back_off():
    m = build_device_mapper("mapdevice", explore_every=4, explore_factor=2.0, initial_inflection=150e3, min_history=40)
    explored = []
    for i in range(30):
        m.map(PLAN4, 600e3)  # 4x the estimate: within explore_range, the GPU side
        if m._used != 150e3:
            assert m._used == 1.2e6  # the CPU side of this size
            explored.append(i)
        m.on_batch(DeviceOutcome(1.0, 0.1, 600e3))
    assert explored == [3, 11, 27]  # then 8, 16 batches apart
    m.map(PLAN4, 5e6)  # a new size regime, 33x the estimate: beyond explore_range, no exploring
    assert m._used == 150e3


def test_explore_restarts_when_the_size_moves():
    m = build_device_mapper("mapdevice", explore_every=2, min_history=40, explore_range=100.0)
    used = []
    for part in [1e6] * 6 + [100e3] * 3:
        m.map(PLAN4, part)
        used.append(m._used)
        m.on_batch(DeviceOutcome(1.0, 0.1, part))
    assert used == [150e3, 2e6, 150e3, 150e3, 150e3, 2e6, 150e3, 50e3, 150e3]  # 1, 1 + 2x2; new size: 7


def test_regression_waits_for_min_history_and_moves_at_most_max_step():
    m = build_device_mapper("mapdevice", slide=10.0, initial_inflection=20e6, min_history=6, max_step=2.0)
    est, _ = _feed(m, 5, 6e6)
    assert est == [20e6] * 5
    est, _ = _feed(m, 30, 6e6)
    steps = [b / a for a, b in zip([20e6, *est], est, strict=False)]
    assert min(steps) >= 0.5 - 1e-9 and max(steps) <= 2.0 + 1e-9
    assert est[-1] < 20e6


def test_inflection_point_converges_at_a_constant_rate():
    """A constant partition size: the estimate settles (< 10 % change over the last 20 batches)."""
    for part, start in ((6e6, 20e6), (60e3, 15e3), (6e6, 150e3)):
        m = build_device_mapper("mapdevice", slide=10.0, initial_inflection=start)
        est, _ = _feed(m, 100, part, seed=3)
        last = est[-20:]
        assert (max(last) - min(last)) / min(last) < 0.10, (part, start, last)


def test_history_is_bounded_and_restored():
    m = build_device_mapper("mapdevice", history=16, min_history=4)
    _feed(m, 500, 2e6)
    state = json.loads(json.dumps(m.state_dict()))
    assert len(state["state"]["history"]) == 16
    twin = build_device_mapper("mapdevice", history=16, min_history=4)
    twin.load_state_dict(state)
    assert _feed(twin, 10, 1e6, seed=9) == _feed(m, 10, 1e6, seed=9)


def test_bad_parameters_and_names():
    with pytest.raises(ConfigError, match="initial_inflection"):
        MapDeviceConfig(initial_inflection=0)
    with pytest.raises(ConfigError, match="explore_factor"):
        MapDeviceConfig(explore_factor=1.0)
    with pytest.raises(ConfigError, match="min_history"):
        MapDeviceConfig(history=4, min_history=5)
    with pytest.raises(UnknownNameError, match="valid choices: cpu, gpu, mapdevice"):
        build_device_mapper("fpga")
    with pytest.raises(ConfigError, match="unknown operator kind 'window'; valid choices: aggregate"):
        OpNode("w", "window")
    with pytest.raises(ConfigError, match="valid choices: <"):
        Filter("x", "!=", 1)


def test_gpu_refuses_non_numeric_columns_and_integer_nulls_before_any_copy():
    from adaptstream.devices.operators import to_gpu

    with pytest.raises(ConfigError, match=r"numeric columns only.*\['name'\]"):
        to_gpu(pa.table({"k": [1], "name": ["a"]}))
    with pytest.raises(ConfigError, match=r"nulls in integer columns.*\['k'\]"):
        to_gpu(pa.table({"k": pa.array([1, None], pa.int64())}))


def test_one_device_baselines():
    plan = _plan("filter", "sort", "join")
    assert build_device_mapper("cpu").map(plan, 1e9) == ["cpu"] * 3
    assert build_device_mapper("gpu").map(plan, 1.0) == ["gpu"] * 3


# -- CPU operators against plain numpy ------------------------------------------------------------------------
@pytest.fixture
def table() -> pa.Table:
    """Integer keys and a float value with some nulls (SQL's SUM and COUNT skip them)."""
    rng = np.random.default_rng(5)
    n = 2_000
    v = rng.normal(10, 3, n)
    return pa.table(
        {
            "k": rng.integers(0, 40, n).astype(np.int64),
            "g": rng.integers(0, 3, n).astype(np.int64),
            "ts": rng.integers(0, 100, n).astype(np.int64),
            "v": pa.array(v, mask=rng.random(n) < 0.02),
        }
    )


def test_cpu_filter_project_sort(table):
    v = table.column("v").to_numpy(zero_copy_only=False)  # nulls as NaN
    assert Filter("v", "<", 9.0).cpu(table).num_rows == int((v < 9.0).sum())
    p = Project(("k",), (("w", "v", 2.0, 1.0),)).cpu(table)
    assert p.column_names == ["k", "w"]
    np.testing.assert_allclose(p.column("w").to_numpy(zero_copy_only=False), 2 * v + 1)
    s = Sort("v", descending=True).cpu(table).column("v").drop_null().to_numpy()
    assert (np.diff(s) <= 0).all() and len(s) == table.num_rows - table.column("v").null_count


def test_cpu_expand_gives_every_window_of_each_row(table):
    out = Expand("ts", 30, 10).cpu(table)
    assert out.num_rows == 3 * table.num_rows
    ts, ws = out.column("ts").to_numpy(), out.column("window_start").to_numpy()
    assert ((ws <= ts) & (ts < ws + 30) & (ws % 10 == 0)).all()
    per_row = ws.reshape(table.num_rows, 3)  # a row's copies are adjacent: its three windows, all different
    assert (np.sort(per_row, axis=1)[:, 1:] > np.sort(per_row, axis=1)[:, :-1]).all()
    with pytest.raises(ConfigError, match="multiple of the slide"):
        Expand("ts", 30, 7)


def test_cpu_aggregate_and_join_match_numpy(table):
    agg = Aggregate(("k", "g"), "v").cpu(table).to_pylist()
    k, g, v = (table.column(c).to_numpy(zero_copy_only=False) for c in ("k", "g", "v"))
    for row in agg:
        sel = (k == row["k"]) & (g == row["g"]) & ~np.isnan(v)
        assert row["count"] == int(sel.sum())
        assert row["sum_v"] == pytest.approx(float(v[sel].sum()))
    assert sum(r["count"] for r in agg) == table.num_rows - table.column("v").null_count
    dim = pa.table({"k": np.arange(0, 40, 2, dtype=np.int64), "name": np.arange(20, dtype=np.int64) * 10})
    with pytest.raises(ConfigError, match="unique"):
        Join("k", pa.table({"k": [1, 1], "name": [1, 2]}))
    joined = Join("k", dim).cpu(table)
    assert joined.num_rows == int((k % 2 == 0).sum())
    assert (joined.column("name").to_numpy() == joined.column("k").to_numpy() * 5).all()


def test_chain_on_the_cpu_runs_every_table_iii_chain():
    for name, chain in CHAINS.items():
        data = chain.scan(_data(chain.generator, 60, 300))
        run = run_chain(data, chain.build(), ["cpu"] * len(chain.build()))
        assert run.result.num_rows > 0, name
        assert run.transitions == 0 and run.transfer_seconds == 0.0


# -- GPU == CPU (run where a CUDA GPU exists) -------------------------------------------------------------------
def _canon(t: pa.Table) -> list[tuple]:
    """Rows as a sorted multiset; floats rounded, null (or NaN) as None, so both backends compare exactly."""

    def cell(x):
        if isinstance(x, float):
            return None if np.isnan(x) else round(x, 6)
        return x

    cols = sorted(t.column_names)
    rows = zip(*(t.column(c).to_pylist() for c in cols), strict=True)
    return sorted((tuple(cell(x) for x in r) for r in rows), key=lambda r: tuple((x is None, x or 0) for x in r))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU with CuPy")
def test_gpu_operators_equal_cpu(table):
    from adaptstream.devices.operators import to_gpu, to_host

    dim = pa.table({"k": np.arange(0, 40, 2, dtype=np.int64), "name": np.arange(20, dtype=np.int64)})
    ops = [
        Filter("v", "<", 9.0),
        Project(("k", "ts"), (("w", "v", 2.0, 1.0),)),
        Expand("ts", 30, 10),
        Aggregate(("k", "g"), "v"),
        Join("k", dim),
        Sort("v", descending=True),
    ]
    for op in ops:
        assert _canon(to_host(op.gpu(to_gpu(table)))) == _canon(op.cpu(table)), op.name
        empty = table.slice(0, 0)
        assert _canon(to_host(op.gpu(to_gpu(empty)))) == _canon(op.cpu(empty)), f"{op.name} on no rows"
    s = to_host(Sort("v", descending=True).gpu(to_gpu(table))).column("v").drop_null().to_numpy()
    assert (np.diff(s) <= 0).all()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU with CuPy")
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_gpu_and_mixed_chains_equal_cpu(name):
    chain = CHAINS[name]
    data = chain.scan(_data(chain.generator, 60, 1_000, seed=2))
    ops = chain.build()
    want = _canon(run_chain(data, ops, ["cpu"] * len(ops)).result)
    assert _canon(run_chain(data, ops, ["gpu"] * len(ops)).result) == want
    mixed = ["gpu" if i % 2 else "cpu" for i in range(len(ops))]
    run = run_chain(data, ops, mixed)
    assert _canon(run.result) == want
    assert run.transitions == transitions(mixed) > 0


def test_bench_size_options_are_checked_before_anything_runs():
    from adaptstream_bench.mapdevice import positive_ints

    assert positive_ints("4, 64,1024", "--sizes-kb") == (4, 64, 1024)
    for bad in ("abc", "0", "", "4,-1"):
        with pytest.raises(ConfigError, match="--sizes-kb takes comma-separated positive integers"):
            positive_ints(bad, "--sizes-kb")


def test_the_recorded_mapdevice_report_holds_the_verdicts_its_report_code_computes(tmp_path):
    """docs/results/mapdevice.json's ``targets`` are what mapdevice_report.targets makes of its figures, and the
    Markdown rebuilt from the JSON alone is the committed one (nothing typed by hand)."""
    from pathlib import Path

    from adaptstream_bench.mapdevice_report import target_entries, write_report

    results = Path(__file__).resolve().parents[2] / "docs" / "results"
    doc = json.loads((results / "mapdevice.json").read_text())
    assert doc["targets"] == target_entries(doc) and [t["met"] for t in doc["targets"]] == [False, False, False]
    write_report(doc, tmp_path)
    assert (tmp_path / "mapdevice.md").read_text() == (results / "mapdevice.md").read_text()
    assert json.loads((tmp_path / "mapdevice.json").read_text())["targets"] == doc["targets"]
