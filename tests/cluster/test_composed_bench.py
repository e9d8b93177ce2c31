"""Smoke test of ``adaptstream bench composed`` at tiny sizes: it starts and stops its own capped-worker cluster,
runs Spark as it is and the tuned application (LMStream + Klink + Alg. 4) on two concurrent queries, and writes a
report whose figures come from the sources' metrics and Spark's executor list. Needs root and cgroup v1 (the
capped workers), as the CI machine has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CG = Path("/sys/fs/cgroup")


def test_bench_composed_smoke(tmp_path):
    if os.geteuid() != 0 or not (CG / "cpu" / "cgroup.procs").exists():
        pytest.skip("capped workers need root and cgroup v1 cpu + memory")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")]),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "TMPDIR": str(tmp_path),  # the bench's cluster and work directories
    }
    out = tmp_path / "report"
    args = [
        *("--out", str(out), "--configs", "spark,tuned", "--queries", "LR1S,CM2S", "--rate", "200"),
        *("--duration", "8", "--warmup", "2", "--workers", "2", "--cpu", "100", "--port", "7186"),
    ]
    res = subprocess.run(
        [sys.executable, "-m", "adaptstream.cli", "bench", "composed", *args],
        env=env, capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads((out / "composed.json").read_text())
    assert [r["config"] for r in doc["runs"]] == ["spark", "tuned"]
    for run in doc["runs"]:
        assert "error" not in run, run.get("error")
        assert set(run["queries"]) == {"LR1S", "CM2S"} and run["executors"], run["config"]
        for name, q in run["queries"].items():
            assert q["batches"] and q["datasets"] and q["unfinished"] == 0, (run["config"], name)
            assert sum(d["rows"] for d in q["datasets"]) == 200 * 8, (run["config"], name)  # every row, once
    tuned = doc["runs"][1]
    assert tuned["controller"]["requests"] > 0  # Klink was asked before batches
    assert len(tuned["controller"]["registrations"]) == 2  # two queries to schedule, not one
    (t,) = doc["targets"]
    assert t["met"] in (True, False, None) and t["measured"]
    assert (out / "composed.md").exists() and (out / "composed.png").exists()
