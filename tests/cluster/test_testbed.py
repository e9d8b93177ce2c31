"""The REAL testbed's limits hold: cpu quota, memory limit, tbf bandwidth; a pinned executor runs confined.

Needs root, cgroup v1 cpu+memory and iproute2 (the CI machine); skips with the reason elsewhere. Everything the
tests create (cgroups, namespaces, veths, processes) carries a unique prefix and is removed by Testbed.stop().
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adaptstream.errors import EnvironmentProblem
from adaptstream_bench.costmodel.testbed import system
from adaptstream_bench.costmodel.testbed.cluster import Testbed
from adaptstream_bench.costmodel.testbed.hosts import HostSpec, parse_hosts

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

try:
    system.check_support()
    SKIP = ""
except EnvironmentProblem as exc:
    SKIP = str(exc)
needs_root = pytest.mark.skipif(bool(SKIP), reason=f"testbed unavailable: {SKIP}")

SPIN = (
    "import time\nt=time.perf_counter()\nc=time.process_time()\nx=0\nfor i in range(6_000_000): x+=i*i\n"
    "print(time.process_time()-c, time.perf_counter()-t)"
)


def _leftovers(prefix: str) -> list[str]:
    out = [f"netns {n}" for n in system.run(["ip", "netns"]).stdout.split() if n.startswith(prefix)]
    out += [f"link {x}" for x in system.run(["ip", "-o", "link"]).stdout.split() if x.startswith(prefix)]
    out += [f"cgroup {c}/{prefix}" for c in system.CONTROLLERS if (system.CGROUP_ROOT / c / prefix).exists()]
    return out


@pytest.mark.alone  # a CPU share / rate measurement: nothing else beside it
@needs_root
def test_cpu_quota_and_memory_limit_hold(tmp_path: Path) -> None:
    hosts = [HostSpec("q10", "small", 10.0, 256, 100.0), HostSpec("q20", "small", 20.0, 96, 100.0)]
    tb = Testbed(hosts, workdir=tmp_path)
    try:
        tb.start(spark=False)
        env = dict(os.environ)
        procs = {
            h.name: system.spawn(
                tb.ledger, [sys.executable, "-c", SPIN], tmp_path / f"{h.name}.log", env, cgroup=tb.cgroup(h.name)
            )
            for h in hosts
        }
        for p in procs.values():
            assert p.wait(timeout=300) == 0
        cpu_wall = {n: [float(x) for x in (tmp_path / f"{n}.log").read_text().split()[-2:]] for n in procs}
        wall = {n: w for n, (_, w) in cpu_wall.items()}
        # the cap holds: no process got more CPU than its quota over its run (10 % slack for accounting)
        assert all(c / w <= h.cpu_pct / 100 * 1.1 for h in hosts for c, w in [cpu_wall[h.name]]), cpu_wall
        # the same work under half the quota takes longer, and each CPU second of it about twice as long. Per CPU
        # second, because the CPU time of the same loop varies by up to ~30 % on a shared machine (CI saw 0.54 vs
        # 0.80 s); a quota is a cap, not a reservation, so the smaller host may get less than its share: the upper
        # bound is loose
        assert wall["q10"] > wall["q20"], wall
        per_cpu = {n: w / c for n, (c, w) in cpu_wall.items()}
        assert 1.5 <= per_cpu["q10"] / per_cpu["q20"] <= 3.5, cpu_wall
        assert system.cgroup_stat(tb.cgroup("q10"))["cpu_nr_throttled"] > 0
        # 96 MB limit: allocating 300 MB gets the process killed by the cgroup's OOM killer
        hog = system.spawn(
            tb.ledger,
            [sys.executable, "-c", "b = bytearray(300 * 2**20); b[::4096] = b'x' * (len(b) // 4096)"],
            tmp_path / "hog.log",
            env,
            cgroup=tb.cgroup("q20"),
        )
        assert hog.wait(timeout=120) != 0
        assert system.cgroup_stat(tb.cgroup("q20"))["mem_failcnt"] > 0
    finally:
        assert tb.stop() == []
    assert _leftovers(tb.prefix) == []


def _transfer_mbits(tb: Testbed, host: str, upload: bool, nbytes: int) -> float:
    """Mbit/s of one TCP transfer between the bridge address and host `host`'s namespace."""
    srv = socket.create_server((tb.driver_host, 0))
    port = srv.getsockname()[1]
    peer = textwrap.dedent(f"""
        import socket, sys
        s = socket.create_connection(("{tb.driver_host}", {port}))
        if {upload}:
            s.sendall(b"x" * {nbytes}); s.shutdown(socket.SHUT_WR); s.recv(1)
        else:
            n = 0
            while n < {nbytes}:
                b = s.recv(1 << 16)
                if not b: break
                n += len(b)
            s.sendall(b"k")
    """)
    p = subprocess.Popen(["ip", "netns", "exec", tb.netns(host), sys.executable, "-c", peer])
    srv.settimeout(60)
    conn, _ = srv.accept()
    t0 = time.perf_counter()
    if upload:
        n = 0
        while n < nbytes:
            b = conn.recv(1 << 16)
            if not b:
                break
            n += len(b)
        dt = time.perf_counter() - t0
        conn.sendall(b"k")
    else:
        conn.sendall(b"x" * nbytes)
        conn.recv(1)
        dt = time.perf_counter() - t0
    conn.close()
    srv.close()
    assert p.wait(timeout=60) == 0
    return nbytes * 8 / dt / 1e6


@pytest.mark.alone  # a CPU share / rate measurement: nothing else beside it
@needs_root
def test_veth_transfer_is_capped_near_the_tbf_rate(tmp_path: Path) -> None:
    tb = Testbed(
        [HostSpec("n8", "small", 100.0, 512, 8.0), HostSpec("n40", "medium", 100.0, 512, 40.0)], workdir=tmp_path
    )
    try:
        tb.start(spark=False)
        for host, rate, nbytes in (("n8", 8.0, 3_000_000), ("n40", 40.0, 12_000_000)):
            for upload in (True, False):
                got = _transfer_mbits(tb, host, upload, nbytes)
                assert 0.6 * rate <= got <= 1.1 * rate, (host, upload, got)
    finally:
        assert tb.stop() == []
    assert _leftovers(tb.prefix) == []


PINNED = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    conf = json.loads(sys.argv[2])
    b = SparkSession.builder.master(sys.argv[1]).appName("pinned")
    for k, v in conf.items():
        b = b.config(k, v)
    s = b.getOrCreate()
    def where(_):
        import socket
        return open("/proc/self/cgroup").read()
    cg = s.sparkContext.parallelize(range(2), 2).map(where).collect()
    hosts = [e.split(":")[0] for e in s.sparkContext._jsc.sc().getExecutorMemoryStatus().keySet().toString()
             .strip("Set()").split(", ")]
    print("RESULT", json.dumps({"cgroups": cg, "hosts": hosts}))
    s.stop()
""")


@needs_root
def test_pinned_executor_runs_in_its_hosts_cgroup_and_namespace(tmp_path: Path) -> None:
    tb = Testbed(parse_hosts("small,large"), workdir=tmp_path, pythonpath=os.environ.get("PYTHONPATH", ""))
    try:
        tb.start()
        import json

        res = subprocess.run(
            [sys.executable, "-c", PINNED, tb.master_url, json.dumps(tb.app_conf("h0"))],
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
            env={**os.environ, "SPARK_LOCAL_IP": tb.driver_host},
        )
        assert res.returncode == 0, res.stderr[-3000:]
        out = json.loads(res.stdout.split("RESULT", 1)[1])
        assert tb.addr["h0"] in out["hosts"] and tb.addr["h1"] not in out["hosts"], out
        assert all(f"cpu:/{tb.prefix}/h0" in c and f"memory:/{tb.prefix}/h0" in c for c in out["cgroups"])
    finally:
        assert tb.stop() == []
    assert _leftovers(tb.prefix) == []


def _redis_missing() -> str:
    from adaptstream_bench.costmodel.testbed.corpus import check_redis

    try:
        check_redis()
    except EnvironmentProblem as exc:
        return str(exc)
    return ""


@needs_root
@pytest.mark.skipif(bool(_redis_missing()), reason=f"placed queries need Redis: {_redis_missing()}")
@pytest.mark.alone  # a real run on CPU-capped hosts must succeed: starved beside another worker (load 6.6) it did not
def test_corpus_job_records_a_real_trace_and_resumes(tmp_path: Path) -> None:
    """One linear query under its initial placement (source on the small host, sink on the large one)."""
    from adaptstream.costmodel.model import read_traces
    from adaptstream_bench.costmodel.testbed.corpus import query_for, run_corpus

    seed = next(s for s in range(100) if query_for(s, 0).query_type.startswith("linear"))
    out = tmp_path / "real.jsonl"
    # The small host at twice its usual CPU share (50 % of a core): at 25 % a source on it wrote no sink row in its
    # agent's warm-up or the trace in a CI replica (load 4-5.5 from the testbed's own processes). It is still the
    # weakest host, so the initial placement still puts the source there; what this test checks is the job, not the
    # small host's limit. Run and warm-up as the documented Exp. 2 command's (35 s, the first 12 s not judged: a first
    # micro-batch takes 10-30 s on capped hosts, docs/testbed.md), and the job's default agent warm-up.
    hosts = parse_hosts("small:cpu=50,large")
    run_corpus(out, n=2, seed=seed, hosts=hosts, duration_s=35, warmup_s=12, budget_s=1200, only=[1])
    (t,) = list(read_traces(out))
    assert t.trace_id == f"tb-{seed}-00001" and t.meta["placement_kind"] == "initial"
    assert t.labels is not None and t.labels.origin == "real"
    assert t.labels.success, t.meta
    assert t.labels.throughput > 0 and t.labels.e2e_latency_ms >= t.labels.proc_latency_ms > 0
    assert {p["host"] for p in t.meta["pieces"]} == {"h0", "h1"}
    assert t.meta["load1_before"] >= 0 and "cpu_throttled_s" in t.meta
    assert run_corpus(out, n=2, seed=seed, hosts=hosts, only=[1]) == 0  # resumable: done ids are skipped
