"""The REAL heterogeneous testbed: a Spark standalone master on a bridge, one worker per host, each worker in
its own cgroup (cpu quota, memory limit) and network namespace (veth on the bridge, tc tbf both directions).

    with Testbed(parse_hosts("small,medium,large")) as tb:
        tb.master_url, tb.driver_host, tb.app_conf("h1")   # an application pinned to host h1's worker

Pinning: worker i advertises a custom resource `tbhost_<name>` (amount 1, a discovery script); an application
that asks `spark.executor.resource.tbhost_<name>.amount=1` can only get executors on that worker. Executors
and their Python workers are children of the worker, so they inherit its cgroup and namespace. Drivers run on
the host side of the bridge, unconfined (see docs/testbed.md).
"""

from __future__ import annotations

import math
import os
import secrets
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from adaptstream.costmodel.model import Host
from adaptstream.errors import EnvironmentProblem
from adaptstream_bench.costmodel.testbed import system
from adaptstream_bench.costmodel.testbed.hosts import HostSpec

EXECUTOR_MEMORY_MB = 512
DAEMON_MEMORY = "256m"


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


class Testbed:
    """Start with `start()` or `with`; `stop()` removes everything (also on SIGTERM/SIGHUP inside `with`)."""

    __test__ = False  # not a pytest class

    def __init__(
        self,
        hosts: list[HostSpec],
        workdir: Path | None = None,
        pythonpath: str | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        self.hosts = hosts
        self.prefix = "atb" + secrets.token_hex(3)
        self._own_dir = workdir is None
        self.dir = Path(workdir or tempfile.mkdtemp(prefix=f"adaptstream-{self.prefix}-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pythonpath = pythonpath if pythonpath is not None else os.environ.get("PYTHONPATH", "")
        self.start_timeout_s = start_timeout_s
        self.ledger = system.Ledger(self.dir / "ledger.json")
        self.net = ""
        self.master_url = ""
        self.addr: dict[str, str] = {}
        self.rtt_ms: dict[str, float] = {}
        self._old_handlers: dict[int, Any] = {}

    # -- lifecycle -----------------------------------------------------------------------------------------
    def start(self, spark: bool = True) -> Testbed:
        """Bridge, namespaces, cgroups; with `spark` also the master and one worker per host."""
        system.check_support()
        self.ledger.data["info"].update(prefix=self.prefix, dir=str(self.dir))
        self.net = system.free_subnet(int(self.prefix[3:], 16))
        self.driver_host = f"{self.net}.1"
        bridge = f"{self.prefix}b"
        system.make_bridge(self.ledger, bridge, self.driver_host)
        env = self._env(self.driver_host)
        port = _free_port(self.driver_host)
        self.master_url = f"spark://{self.driver_host}:{port}"
        logs = self.dir / "logs"
        logs.mkdir(exist_ok=True)
        if spark:
            system.spawn(
                self.ledger,
                [
                    f"{spark_home()}/bin/spark-class",
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    self.driver_host,
                    "--port",
                    str(port),
                    "--webui-port",
                    "0",
                ],
                logs / "master.log",
                env,
            )
        for i, h in enumerate(self.hosts):
            self._start_host(i, h, bridge, logs, spark)
        self.ledger.data["info"].update(master=self.master_url, addr=self.addr)
        self.ledger.save()
        if spark:
            self._wait_registered(logs)
        for h in self.hosts:
            self.rtt_ms[h.name] = self.measure_rtt_ms(h.name)
        return self

    def _start_host(self, i: int, h: HostSpec, bridge: str, logs: Path, spark: bool) -> None:
        ns, addr = f"{self.prefix}n{i}", f"{self.net}.{10 + i}"
        self.addr[h.name] = addr
        system.make_netns(
            self.ledger,
            ns,
            f"{self.prefix}h{i}",
            f"{self.prefix}c{i}",
            bridge,
            addr,
            self.driver_host,
            h.bandwidth_mbits,
        )
        cg = system.make_cgroup(self.ledger, f"{self.prefix}/{h.name}", h.cpu_pct, h.ram_mb)
        if not spark:
            return
        res = f"tbhost_{h.name}"
        disc = self.dir / f"discover_{h.name}.sh"
        disc.write_text(f'#!/bin/sh\necho \'{{"name": "{res}", "addresses": ["0"]}}\'\n')
        disc.chmod(0o755)
        work = self.dir / "work" / h.name
        work.mkdir(parents=True, exist_ok=True)
        env = self._env(addr)
        env["SPARK_WORKER_DIR"] = str(work)
        env["SPARK_DAEMON_JAVA_OPTS"] = jvm_opts(h)
        env["SPARK_WORKER_OPTS"] = (
            f"-Dspark.worker.resource.{res}.amount=1 -Dspark.worker.resource.{res}.discoveryScript={disc}"
        )
        cores = max(1, math.ceil(h.cpu_pct / 100))
        mem = max(EXECUTOR_MEMORY_MB, h.ram_mb - 512)
        system.spawn(
            self.ledger,
            [
                f"{spark_home()}/bin/spark-class",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                addr,
                "--port",
                "0",
                "--webui-port",
                "0",
                "--cores",
                str(cores),
                "--memory",
                f"{mem}m",
                "--work-dir",
                str(work),
                self.master_url,
            ],
            logs / f"worker_{h.name}.log",
            env,
            netns=ns,
            cgroup=cg,
        )

    def _env(self, local_ip: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
        env.update(
            SPARK_HOME=spark_home(),
            SPARK_LOCAL_IP=local_ip,
            SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=self.pythonpath,
            SPARK_LOG_DIR=str(self.dir / "logs"),
            SPARK_CONF_DIR=str(self.dir / "conf"),
        )
        return env

    def _wait_registered(self, logs: Path) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            ok = [
                h for h in self.hosts if "Successfully registered with master" in _read(logs / f"worker_{h.name}.log")
            ]
            if len(ok) == len(self.hosts):
                return
            time.sleep(0.5)
        msg = f"testbed workers did not register within {self.start_timeout_s:.0f} s; logs in {logs}"
        raise EnvironmentProblem(msg)

    def stop(self) -> list[str]:
        problems = system.teardown(self.ledger)
        if self._own_dir and not problems and not os.environ.get("ADAPTSTREAM_TESTBED_KEEP"):
            import shutil

            shutil.rmtree(self.dir, ignore_errors=True)
        return problems

    def __enter__(self) -> Testbed:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if threading.current_thread() is threading.main_thread():
                self._old_handlers[sig] = signal.signal(sig, _raise_exit)
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            for sig, old in self._old_handlers.items():
                signal.signal(sig, old)

    # -- use ---------------------------------------------------------------------------------------------------
    def spec(self, name: str) -> HostSpec:
        return next(h for h in self.hosts if h.name == name)

    def netns(self, name: str) -> str:
        return f"{self.prefix}n{self.hosts.index(self.spec(name))}"

    def cgroup(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def app_conf(self, name: str, executor_memory_mb: int = EXECUTOR_MEMORY_MB) -> dict[str, str]:
        """Spark conf of an application whose only executor runs on host `name` (driver on the bridge)."""
        h = self.spec(name)
        return {
            f"spark.executor.resource.tbhost_{name}.amount": "1",
            "spark.executor.cores": str(max(1, math.ceil(h.cpu_pct / 100))),
            "spark.cores.max": str(max(1, math.ceil(h.cpu_pct / 100))),
            "spark.executor.memory": f"{executor_memory_mb}m",
            "spark.driver.host": self.driver_host,
            "spark.driver.bindAddress": self.driver_host,
            "spark.executorEnv.PYTHONPATH": self.pythonpath,
            "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
            "spark.executor.extraJavaOptions": jvm_opts(h),
            # Python workers start slowly under a small quota and a loaded machine: 15 s handshakes time out
            "spark.python.authenticate.socketTimeout": "120s",
            "spark.executorEnv.SPARK_AUTH_SOCKET_TIMEOUT": "120",
        }

    def host_record(self, name: str) -> Host:
        """The trace's Host: Table I features as configured here (cpu in % of one core of this machine)."""
        h = self.spec(name)
        return Host(name, h.cpu_pct, float(h.ram_mb), h.bandwidth_mbits, self.rtt_ms.get(name, 0.0), h.category)

    def measure_rtt_ms(self, name: str, n: int = 20) -> float:
        """Median TCP round trip (1-byte echo) bridge <-> host namespace, in ms."""
        code = (
            "import socket,sys,time\ns=socket.create_connection((sys.argv[1],int(sys.argv[2])))\n"
            "s.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n"
            "while (b:=s.recv(1)): s.sendall(b)\n"
        )
        srv = socket.create_server((self.driver_host, 0))
        port = srv.getsockname()[1]
        import subprocess

        p = subprocess.Popen(
            ["ip", "netns", "exec", self.netns(name), sys.executable, "-c", code, self.driver_host, str(port)]
        )
        try:
            srv.settimeout(20)
            conn, _ = srv.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            times = []
            for _ in range(n):
                t = time.perf_counter()
                conn.sendall(b"x")
                conn.recv(1)
                times.append((time.perf_counter() - t) * 1000)
            conn.close()
            return round(statistics.median(times), 3)
        finally:
            srv.close()
            p.wait(timeout=10)


def jvm_opts(h: HostSpec) -> str:
    """JVM flags for a confined host: as many GC/compiler threads as the quota has cores, serial GC, C1 only
    (the JIT's start-up CPU under a 25 % quota otherwise costs tens of seconds); the same flags on every host."""
    cores = max(1, math.ceil(h.cpu_pct / 100))
    return f"-XX:ActiveProcessorCount={cores} -XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return int(s.getsockname()[1])


def _read(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)
