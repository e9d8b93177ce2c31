"""One Python handle on ``scripts/cluster.sh`` for every benchmark and the cluster tier of the tests: a standalone
master and N one-core workers on 127.0.0.1, optionally capped (each worker in its own cgroup v1 with a CPU quota
and a memory limit, so that capacity grows with the executor count on a two-core machine; docs/cluster.md).

The script owns starting and stopping (by PID, cgroups removed); this class only passes its settings, turns a
failed start into one :class:`~adaptstream.errors.EnvironmentProblem` line, always stops what it started, and reads
the script's per-worker CPU accounting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: benchmarks/adaptstream_bench/<file>
SCRIPT = ROOT / "scripts" / "cluster.sh"


@dataclass(frozen=True)
class WorkerUsage:
    """One capped worker's cgroup counters (cumulative since its cgroup was made)."""

    cpu_s: float
    throttled: int
    throttled_s: float


class LocalCluster:
    """``with LocalCluster(3, work) as url:`` - a cluster whose files (PIDs, logs, work directories, cgroup names)
    live under ``work``; ``cpu`` (% of one core) and ``mem`` (MB) cap each worker (root, cgroup v1)."""

    def __init__(
        self,
        workers: int,
        work: str | Path,
        port: int = 7077,
        *,
        cpu: float | None = None,
        mem: int | None = None,
        worker_memory: str | None = None,
        timeout: float = 300.0,
    ) -> None:
        self.workers, self.cpu, self.mem, self.timeout = workers, cpu, mem, timeout
        self.env = {
            **os.environ,
            "ADAPTSTREAM_CLUSTER_DIR": str(work),
            "ADAPTSTREAM_MASTER_PORT": str(port),
            "PYTHON": sys.executable,
        }
        # the script's own wait for the workers to register ends before ours, so its clean-up runs
        self.env.setdefault("ADAPTSTREAM_CLUSTER_TIMEOUT", str(max(30, int(timeout) - 30)))
        if worker_memory:
            self.env["ADAPTSTREAM_WORKER_MEMORY"] = worker_memory
        self.url: str | None = None

    @property
    def capped(self) -> bool:
        return self.cpu is not None or self.mem is not None

    def _script(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        from adaptstream.errors import EnvironmentProblem

        if not SCRIPT.exists():
            msg = f"{SCRIPT} not found: a local cluster is started from a source checkout"
            raise EnvironmentProblem(msg)
        cmd = ["bash", str(SCRIPT), *args]
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)

    def start(self) -> str:
        """Start the master and the workers; the master URL. A failed start leaves nothing running."""
        from adaptstream.errors import EnvironmentProblem

        args = ["start", str(self.workers)]
        if self.cpu is not None:
            args += ["--cpu", f"{self.cpu:g}"]
        if self.mem is not None:
            args += ["--mem", str(self.mem)]
        try:
            res = self._script(*args, timeout=self.timeout)
        except BaseException:
            self.stop()
            raise
        if res.returncode != 0:
            self.stop()
            why = (res.stderr or res.stdout).strip().splitlines()
            msg = f"the standalone cluster did not start: {why[-1] if why else f'exit {res.returncode}'}"
            raise EnvironmentProblem(msg)
        self.url = res.stdout.strip().splitlines()[-1]
        return self.url

    def stop(self) -> None:
        self._script("stop", timeout=120)
        self.url = None

    def usage(self) -> dict[str, WorkerUsage]:
        """Per capped worker (cgroup name): CPU-seconds, times throttled, seconds throttled; {} uncapped."""
        if not self.capped:
            return {}
        res = self._script("usage", timeout=30)
        out = {}
        for line in res.stdout.splitlines():
            parts = line.split()
            if len(parts) == 4:
                out[parts[0]] = WorkerUsage(float(parts[1]), int(parts[2]), float(parts[3]))
        return out

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def executor_conf(memory: str = "512m") -> dict[str, str]:
    """Single-core executors whose Python workers import the adaptstream this process runs (a source checkout need
    not be installed where the workers look)."""
    import adaptstream

    pkg_parent = str(Path(adaptstream.__file__).resolve().parents[1])
    return {
        "spark.executor.memory": memory,
        "spark.executor.cores": "1",
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(x for x in (pkg_parent, os.environ.get("PYTHONPATH")) if x),
    }


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def stop_on_sigterm() -> None:
    """A benchmark killed with SIGTERM unwinds (its finally blocks stop the cluster) instead of dying on the spot."""
    signal.signal(signal.SIGTERM, _exit_on_term)
