"""The runner behind `adaptstream run`: generator and --input/--drain runs end with results equal to batch SQL."""

from __future__ import annotations

import json
import os

import pytest

from adaptstream.app.runner import RunSpec, run_workload
from adaptstream.workloads import WORKLOADS, LinearRoadGeneratorConfig, write_run
from adaptstream.workloads.oracle import compare_multisets, read_static

pytestmark = pytest.mark.spark


def _results_equal_oracle(spark, workload_name: str, run_dir: str, input_dir: str) -> int:
    w = WORKLOADS.get(workload_name)
    expected = w.batch_query(read_static(spark, w, input_dir))
    got = spark.read.parquet(os.path.join(run_dir, "results")).select(*expected.columns)
    rows, exp = [tuple(r) for r in got.collect()], [tuple(r) for r in expected.collect()]
    assert compare_multisets(rows, exp) == []
    return len(exp)


def test_run_input_dir_with_drain_equals_batch(spark, tmp_path):
    src = str(tmp_path / "lr")
    write_run(LinearRoadGeneratorConfig(seed=4, segment_capacity=15.0).build(), None, src, [250] * 40)
    run_dir = str(tmp_path / "run")
    res = run_workload(spark, RunSpec(workload="LR2S", input_dir=src, drain=True, admission="lmstream"), run_dir)
    assert res.unfinished == 0 and res.summary.datasets == 40
    assert _results_equal_oracle(spark, "LR2S", run_dir, src) > 0
    with open(os.path.join(run_dir, "summary.json")) as f:
        assert json.load(f)["datasets"] == 40


def test_run_generator_with_drain_equals_batch(spark, tmp_path):
    run_dir = str(tmp_path / "run")
    spec = RunSpec(workload="CM1T", admission="fixed", trigger=2.0, rate=200, duration=6, drain=True)
    res = run_workload(spark, spec, run_dir)
    assert res.unfinished == 0 and res.summary.datasets == 6 and res.summary.rows == 6 * 200
    assert res.summary.batches >= 2  # the 2 s trigger cut several batches
    assert _results_equal_oracle(spark, "CM1T", run_dir, os.path.join(run_dir, "input")) > 0


def test_cli_run_over_input_with_a_malformed_file_succeeds_and_counts_it(spark, tmp_path, capsys):
    """`adaptstream run --input DIR --drain` where one file holds only malformed rows: exit 0, exact results, every
    bad row in quarantine.jsonl and counted once in summary.json (the summary once read a column the quarantine
    no longer writes, and the command failed after the query had succeeded)."""
    from adaptstream import cli
    from adaptstream.workloads import TaskEventsGeneratorConfig

    good, src = str(tmp_path / "good"), str(tmp_path / "in")
    write_run(TaskEventsGeneratorConfig(seed=3).build(), None, good, [100] * 4)
    os.makedirs(src)
    for name in os.listdir(good):
        os.link(os.path.join(good, name), os.path.join(src, name))
    with open(os.path.join(src, "zz-bad.csv"), "w") as f:
        f.write("garbage\nmore,garbage\nx,y,z\nq\n")
    run_dir = str(tmp_path / "run")
    try:
        cli.main(["run", "--workload", "CM1T", "--input", src, "--drain", "--run-dir", run_dir])
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    assert code in (0, None), out.out + out.err
    with open(os.path.join(run_dir, "metrics", "quarantine.jsonl")) as f:
        bad = [json.loads(line) for line in f]
    assert sorted(r["raw"] for r in bad) == ["garbage", "more,garbage", "q", "x,y,z"]
    with open(os.path.join(run_dir, "summary.json")) as f:
        assert json.load(f)["quarantined"] == 4
    assert _results_equal_oracle(spark, "CM1T", run_dir, good) > 0
