"""Capped workers (scripts/cluster.sh start N --cpu PCT --mem MB): each worker and its executors in a cgroup v1 with a
CPU quota and a memory limit, so that capacity grows with the number of workers on a 2-core machine.

The quota is shown to act on the Spark task itself: a CPU-bound task's wall time is about its CPU time / quota (4x
at 25 %), the task's process is in the worker's cgroup, and the cgroup was throttled. Stop (and a failed start)
leaves no cgroup and no process behind.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CG = Path("/sys/fs/cgroup")
JOB = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(sys.argv[1]).config("spark.executor.memory", "512m")
             .config("spark.cores.max", "1").config("spark.driver.host", "127.0.0.1").getOrCreate())

    def burn(_):
        import os, time
        cpu, wall, x = time.process_time(), time.perf_counter(), 0
        for i in range(4_000_000):
            x += i * i
        cgroup = open("/proc/self/cgroup").read()
        return [(os.getpid(), time.process_time() - cpu, time.perf_counter() - wall, cgroup)]

    spark.sparkContext.parallelize([0], 1).mapPartitions(burn).collect()  # warm: worker start-up is not measured
    print("TASK", repr(spark.sparkContext.parallelize([0], 1).mapPartitions(burn).collect()[0]))
    spark.stop()
""")


def _needs_cgroups() -> None:
    if os.geteuid() != 0 or not (CG / "cpu" / "cgroup.procs").exists() or not (CG / "memory" / "cgroup.procs").exists():
        pytest.skip("capped workers need root and cgroup v1 cpu + memory")


def _cluster(args: list[str], directory: Path, port: int, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ADAPTSTREAM_CLUSTER_DIR": str(directory),
        "ADAPTSTREAM_MASTER_PORT": str(port),
        "PYTHON": sys.executable,
        **extra,
    }
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "cluster.sh"), *args], env=env, capture_output=True, text=True, timeout=300
    )


def _ours(directory: Path) -> list[Path]:
    """The cgroups this cluster directory would name (cluster.sh: adaptstream-<md5 of the dir>-w<i>)."""
    import hashlib

    tag = "adaptstream-" + hashlib.md5(str(directory).encode()).hexdigest()[:8]
    return [p for c in ("cpu", "memory", "cpuacct") for p in (CG / c).glob(tag + "-w*")]


@pytest.mark.alone  # a CPU share / rate measurement: nothing else beside it
def test_the_quota_slows_a_cpu_bound_task_and_stop_leaves_nothing_behind(tmp_path):
    _needs_cgroups()
    d = tmp_path / "cluster"
    try:
        started = _cluster(["start", "1", "--cpu", "25", "--mem", "1024"], d, 7491)
        assert started.returncode == 0, started.stderr
        assert len(_ours(d)) >= 2  # cpu and memory (and cpuacct where mounted)
        (tmp_path / "job.py").write_text(JOB)
        run = subprocess.run(
            [sys.executable, str(tmp_path / "job.py"), started.stdout.strip()],
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        line = next((x for x in run.stdout.splitlines() if x.startswith("TASK ")), None)
        assert line, run.stderr[-2000:]
        pid, cpu, wall, cgroup = eval(line[5:])  # our own job's repr of a tuple
        assert "adaptstream-" in cgroup and "-w1" in cgroup  # the task's process is in the worker's cgroup
        assert wall / cpu > 2.5, (cpu, wall)  # 25 % of a core: about 4x; an unconfined task is about 1x
        usage = _cluster(["usage"], d, 7491)
        _, cpu_s, throttled, _ = usage.stdout.split()
        assert usage.returncode == 0 and float(cpu_s) > cpu and int(throttled) > 0, usage.stdout
    finally:
        stopped = _cluster(["stop"], d, 7491)
    assert stopped.returncode == 0, stopped.stderr
    assert _ours(d) == []
    assert not Path(f"/proc/{pid}").exists()


def test_a_failed_start_stops_what_it_started_and_leaves_no_cgroup(tmp_path):
    _needs_cgroups()
    d = tmp_path / "cluster"
    with socket.socket() as taken:  # the master cannot bind its port: the worker never registers
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = _cluster(["start", "1", "--cpu", "30"], d, port, ADAPTSTREAM_CLUSTER_TIMEOUT="8")
    assert res.returncode == 1
    assert "did not come up within 8 s (stopped again)" in res.stderr
    assert _ours(d) == []
    pids = [int(f.read_text()) for f in (d / "pids").glob("*.pid")]
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]  # the master and worker it started are gone


@pytest.mark.parametrize(
    ("args", "extra", "rc", "message"),
    [
        (["--cpu", "5"], {}, 2, "--cpu 5 cannot host an executor; the minimum is 10"),
        (["--mem", "512"], {}, 2, "--mem 512 cannot host an executor; the minimum is 1024 (MB)"),
        (["--cpu", "lots"], {}, 2, "--cpu must be a number"),
        (["--cores", "2"], {}, 2, "unknown option --cores"),
        (["--cpu", "30"], {"ADAPTSTREAM_CGROUP_ROOT": "/nonexistent"}, 1, "need cgroup v1 'cpu' mounted at"),
    ],
)
def test_bad_caps_are_refused_in_one_line_before_anything_starts(tmp_path, args, extra, rc, message):
    _needs_cgroups()
    res = _cluster(["start", "1", *args], tmp_path / "cluster", 7492, **extra)
    assert (res.returncode, res.stdout) == (rc, "")
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "cluster" / "pids").exists()  # nothing was started
