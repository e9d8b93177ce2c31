"""Smoke test of ``adaptstream bench prompt-elastic`` at tiny sizes: it starts and stops its own standalone cluster,
runs an Alg. 4 policy, a static one and Spark's dynamic allocation, and writes a report whose figures come from
Spark's executor list. Runs in a subprocess (a process holds one SparkContext; the suite shares a local one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_bench_prompt_elastic_smoke(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "TMPDIR": str(tmp_path),  # the bench's cluster and work directories
    }
    out = tmp_path / "report"
    args = [
        *("--out", str(out), "--workers", "2", "--port", "7181", "--rate", "300", "--duration", "14"),
        *("--warmup", "4", "--app-warmup", "4", "--period", "8", "--trigger", "2", "--patterns", "step"),
        *("--policies", "prompt,static_mean,dynamic_allocation", "--size-by", "rule"),
    ]
    res = subprocess.run(
        [sys.executable, "-m", "adaptstream.cli", "bench", "prompt-elastic", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads((out / "prompt_elastic.json").read_text())
    assert set(doc["policies"]) == {"prompt", "static_mean", "dynamic_allocation"}
    for run in doc["runs"]:
        assert "error" not in run, run.get("error")
        assert run["batches"] and run["executors"], run["policy"]
    for name, p in doc["policies"].items():
        assert p["batches"] > 0 and p["executor_seconds"] > 0, name
        assert 0 <= p["on_time_share"] <= 1
    static = doc["policies"]["static_mean"]
    # 2 executors for the whole window, as Spark listed them
    assert static["mean_executors"] == pytest.approx(2.0, abs=0.05)
    assert (out / "prompt_elastic.md").exists() and (out / "prompt_elastic-step.png").exists()
    assert len(doc["meta"]["load_samples"]) >= 2
