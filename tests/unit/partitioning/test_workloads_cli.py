"""Partitioning workloads (readers, generators) and the CLI's list command."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from adaptstream.errors import WorkloadError
from adaptstream.partitioning.cli import app
from adaptstream.workloads.partition_workloads import (
    WORKLOADS,
    get_workload,
    lineitem,
    read_lineitem,
    read_rides,
    read_task_events,
    zipf_keys,
)


def test_real_files_parse():
    li = read_lineitem()
    assert len(li) == 10_000 and set(li["returnflag"]) <= {"A", "N", "R"}
    assert len(read_rides()) == 10_000 and len(read_task_events()) == 20_000
    assert read_task_events()["scheduling_class"].between(0, 3).all()


def test_zipf_skew_grows_with_exponent():
    top = [np.bincount(zipf_keys(50_000, z, 1000, seed=0)).max() for z in (0.1, 1.0, 2.0)]
    assert top[0] < top[1] < top[2]
    assert zipf_keys(10, 1.0, 5, seed=1).max() < 5
    with pytest.raises(WorkloadError):
        zipf_keys(10, 1.0, 0)


def test_generators_scale_and_keep_group_structure():
    big = lineitem(30_000, seed=1)
    assert len(big) == 30_000 and big["orderkey"].nunique() > 5000
    assert set(zip(big["returnflag"], big["linestatus"], strict=True)) <= {
        ("A", "F"),
        ("N", "F"),
        ("N", "O"),
        ("R", "F"),
    }
    for name, w in WORKLOADS.items():
        df = w.generate(25_000)
        assert len(df) == 25_000 and "ts" in df and set(w.key_columns) <= set(df.columns), name
        assert df["ts"].is_monotonic_increasing
        assert f"GROUP BY window(ts, '{w.window}', '{w.slide}')" in w.oracle_sql("v")
    with pytest.raises(WorkloadError, match="valid choices"):
        get_workload("nope")


def test_cli_list_shows_every_partitioner():
    out = CliRunner().invoke(app, ["list"])
    assert out.exit_code == 0
    for name in ("time", "prompt", "cam-hll", "auto"):
        assert f"\n{name} " in "\n" + out.output
