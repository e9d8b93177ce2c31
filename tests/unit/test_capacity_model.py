"""The capacity model (benchmarks/adaptstream_bench/capacity_model.py): fit, predictions, bracket rule, and the
reading of committed reports' breaking points."""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from adaptstream_bench.capacity_model import (
    CpuFit,
    Fit,
    bracket,
    deadline_batch,
    fit_batches,
    fit_cpu,
    memory_per_query,
    projection,
    queries_per_driver,
    single_query_rate,
    verdict,
)
from adaptstream_bench.capacity_report import predict, recorded_experiments, targets

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def _fit(a: float, b: float) -> Fit:
    return Fit(a, b, 1.0, 10, 100, 10000)


def test_fit_recovers_a_line_through_noise():
    rng = np.random.default_rng(0)
    rows = rng.integers(1000, 50000, 200)
    secs = 0.4 + 80e-6 * rows + rng.normal(0, 0.02, 200)
    f = fit_batches(rows, secs)
    assert f.a == pytest.approx(0.4, abs=0.02)
    assert f.b == pytest.approx(80e-6, rel=0.03)
    assert f.r2 > 0.99 and f.batches == 200


@pytest.mark.parametrize("rows", [[1000, 2000], [500, 500, 500, 500]])
def test_fit_refuses_what_it_cannot_fit(rows):
    with pytest.raises(ValueError, match="at least 3 batches"):
        fit_batches(rows, [1.0] * len(rows))


def test_single_query_rate_sliding_and_tumbling():
    f = _fit(0.5, 100e-6)
    # P = a / (1 - b r); MaxLat = 2 P = S at r = (1 - 2a/S) / b
    r = single_query_rate(f, 5.0)
    assert r == pytest.approx(8000.0)
    p = f.a / (1 - f.b * r)
    assert 2 * p == pytest.approx(5.0)
    assert single_query_rate(f, 0.0) == pytest.approx(10000.0)  # tumbling: backlog bound 1/b
    assert single_query_rate(_fit(3.0, 1e-6), 5.0) == 0.0  # the per-batch cost alone breaks the bound
    assert single_query_rate(_fit(0.5, 0.0), 5.0) is None


def test_fit_cpu_separates_batches_rows_and_the_run():
    runs = [(30, 30000, 2.0 + 30 * 0.3 + 30000 * 20e-6), (6, 30000, 2.0 + 6 * 0.3 + 30000 * 20e-6),
            (6, 90000, 2.0 + 6 * 0.3 + 90000 * 20e-6)]  # fmt: skip
    c = fit_cpu(runs)
    assert (c.c_run, c.c_batch, c.c_row) == (pytest.approx(2.0), pytest.approx(0.3), pytest.approx(20e-6))
    with pytest.raises(ValueError, match="vary independently"):
        fit_cpu([(30, 30000, 1.0), (6, 30000, 1.0), (6, 30000, 1.2)])  # rows never vary


def test_queries_per_driver_meets_the_deadline_exactly():
    fits = [_fit(0.4, 50e-6), _fit(0.6, 150e-6)]
    cpus = [CpuFit(1.0, 0.2, 40e-6), CpuFit(1.0, 0.4, 60e-6)]
    n = queries_per_driver(fits, cpus, 300, 10.0, 2.0, cores=2)
    cb, cr = 0.3, 50e-6
    p = n * cb / (2 - n * cr * 300)  # N queries' CPU on 2 cores: P = N c_b / (C - N c_r r)
    assert 2.0 + 1.0 + 2.5 * p == pytest.approx(10.0)
    assert deadline_batch(10.0, 2.0) == pytest.approx(2.8)
    assert queries_per_driver([], cpus, 300, 10.0, 2.0, 2) is None
    assert queries_per_driver([_fit(3.0, 0.0)], cpus[:1], 300, 10.0, 2.0, 2) == 0.0  # alone already too slow


def test_projection_grows_with_the_pool_of_cores():
    fits, cpus = [_fit(0.5, 100e-6)], [CpuFit(1.0, 0.3, 50e-6)]
    base = queries_per_driver(fits, cpus, 300, 10.0, 2.0, 2)
    assert projection(fits, cpus, 300, 10.0, 2.0, driver_cores=1, executors=1) == pytest.approx(base)
    ns = [projection(fits, cpus, 300, 10.0, 2.0, 24, e) for e in (8, 16, 32, 64)]
    assert all(x < y for x, y in itertools.pairwise(ns)) and ns[0] > base


def test_bracket_sides_and_monotonicity():
    assert bracket([(4, True), (8, False), (12, False)]) == (4, 8, True)
    assert bracket([(4, True), (8, True)]) == (8, None, True)
    assert bracket([(4, False), (8, False)]) == (None, 4, True)
    assert bracket([(4, True), (8, False), (12, True)]) == (4, 8, False)


@pytest.mark.parametrize(
    ("p", "lo", "hi", "met"),
    [
        (6500, 6000, 7000, True),  # within 25 % of every point
        (5000, 4000, 8000, None),  # a 2x bracket cannot be decided
        (11000, 6000, 8000, False),  # above 1.25 x broke
        (4000, 6000, 8000, False),  # below 0.75 x held
        (9000, 8000, None, None),  # never broke: only "missed" can be said
        (5000, 8000, None, False),
        (50, None, 32, False),
        (30, None, 32, None),
        (None, 4, 8, None),
    ],
)
def test_verdict_rule(p, lo, hi, met):
    assert verdict(p, lo, hi) is met


def test_memory_per_query_is_the_slope():
    slope, base = memory_per_query([1, 4, 8], [100.0, 130.0, 170.0])
    assert slope == pytest.approx(10.0, abs=0.2) and base == pytest.approx(90.0, abs=2)
    assert memory_per_query([4, 4], [1.0, 2.0]) is None


def test_recorded_experiments_read_the_committed_reports():
    exps = recorded_experiments(RESULTS)
    sources = {e["source"] for e in exps}
    assert {"lmstream_capacity.json", "lmstream_load.json", "klink.json"} <= sources
    klink = next(e for e in exps if e["source"] == "klink.json")
    assert klink["kind"] == "klink" and klink["rate"] == 300
    # klink.json of 2026-12-07 (git 13b1dee): default missed 27 % of deadlines already at N = 4, its smallest N
    assert bracket(klink["settings"])[:2] == (None, 4)
    cap = next(e for e in exps if e["source"] == "lmstream_capacity.json")
    assert bracket(cap["settings"])[:2] == (6000, 8000)


def test_a_break_the_generator_could_not_feed_is_not_the_querys():
    from adaptstream_bench.capacity_report import _lmstream_load

    runs = [
        {"policy": "asap", "traffic": "constant", "workload": "LR2S", "rate": 512000, "holds": True},
        {"policy": "asap", "traffic": "constant", "workload": "LR2S", "rate": 1024000, "holds": False,
         "generator_limited": True},
        {"policy": "asap", "traffic": "constant", "workload": "CM1T", "rate": 512000, "holds": True},
        {"policy": "asap", "traffic": "constant", "workload": "CM1T", "rate": 1024000, "holds": False},
        {"policy": "lmstream", "traffic": "constant", "workload": "CM1T", "rate": 128000, "holds": False},
        {"policy": "asap", "traffic": "random", "workload": "CM1T", "rate": 128000, "holds": False},
    ]  # fmt: skip
    exps = {e["query"]: e for e in _lmstream_load({"runs": runs})}
    assert bracket(exps["LR2S"]["settings"])[:2] == (512000, None)
    assert bracket(exps["CM1T"]["settings"])[:2] == (512000, 1024000)  # only asap under constant traffic counts


def test_targets_from_fits_and_checks(tmp_path):
    fits = {q: _fit(0.3, 40e-6) for q in ("LR1S", "YSB", "YSBZ")}
    cpu = CpuFit(1.0, 0.3, 40e-6)
    data = {
        "meta": {"cores": 2},
        "calibration": [{"query": q, "fit": f.__dict__, "cpu": cpu.__dict__} for q, f in fits.items()],
        "checks": {
            "single": {"query": "LR1S", "runs": [{"rate": 14000, "holds": True}, {"rate": 17000, "holds": False}]},
            "klink": {"workloads": ["YSB", "YSBZ"], "rate": 300, "runs": [{"queries": 2, "holds": True}]},
        },
        "recorded": [],
    }
    ts = targets(json.loads(json.dumps(data)))
    assert len(ts) == 2
    single = ts[0]
    assert single["predicted"] == pytest.approx((1 - 0.12) / 40e-6)  # 22,000 rows/s
    assert single["met"] is False and "this run" in single["target"]
    assert ts[1]["met"] is None  # held at 2, never broke: undecided unless the prediction is far below 2
    assert predict({"kind": "klink", "workloads": ["YSB", "DEBS"], "rate": 300}, fits, {}, 2) is None  # no fits


BUSY_CHILD = """
import sys, time
t = time.process_time()
while time.process_time() - t < 0.3:
    pass
print("busy done", flush=True)
sys.stdin.read()
"""


def test_tree_cpu_seconds_counts_this_process_and_its_children():
    import subprocess
    import sys

    from adaptstream_bench.capacity import tree_cpu_seconds

    before = tree_cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", BUSY_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"busy done\n"  # it burnt 0.3 s of CPU and lives on
        assert tree_cpu_seconds() - before >= 0.3
    finally:
        child.communicate(b"")
    assert tree_cpu_seconds() - before >= 0.3  # reaped: its CPU now counts as this process's children's


@pytest.mark.parametrize(("p", "ns"), [(4.2, [3, 4, 5, 6]), (1.0, [1, 2]), (20.0, [18, 19, 20, 21, 22]), (0.2, [1, 2])])
def test_the_n_query_check_runs_consecutive_counts_around_the_prediction(p, ns):
    from adaptstream_bench.capacity import klink_counts

    assert klink_counts(p) == ns
