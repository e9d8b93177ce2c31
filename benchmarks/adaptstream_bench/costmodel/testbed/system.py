"""Linux plumbing of the REAL testbed: cgroup v1 (cpu, memory), network namespaces, veth pairs, tc tbf.

Everything created is recorded at once in a JSON ledger (`ledger.json` in the testbed directory) before it is
used, so `teardown(ledger)` removes exactly what this testbed made (processes by PID, then cgroups, namespaces,
the bridge and the address), also from another process after a crash. Names carry a unique prefix.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adaptstream.errors import EnvironmentProblem

CGROUP_ROOT = Path(os.environ.get("ADAPTSTREAM_CGROUP_ROOT", "/sys/fs/cgroup"))
CONTROLLERS = ("cpu", "memory")
CFS_PERIOD_US = 100_000


def check_support() -> None:
    """Raise EnvironmentProblem (one clear line) unless root, cgroup v1 cpu+memory, `ip` and `tc` are there."""
    if os.geteuid() != 0:
        msg = "the testbed needs root (cgroups, network namespaces, tc); run it as root"
        raise EnvironmentProblem(msg)
    for ctl in CONTROLLERS:
        d = CGROUP_ROOT / ctl
        if not (d / "cgroup.procs").exists():
            msg = f"cgroup v1 controller {ctl!r} is not mounted at {d}; the testbed needs cgroup v1 cpu and memory"
            raise EnvironmentProblem(msg)
        if not os.access(d, os.W_OK):
            msg = f"cgroup directory {d} is not writable"
            raise EnvironmentProblem(msg)
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            msg = f"`{tool}` (iproute2) is missing; install iproute2"
            raise EnvironmentProblem(msg)


def run(cmd: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if check and res.returncode != 0:
        msg = f"`{' '.join(cmd)}` failed: {res.stderr.strip()[:300]}"
        raise EnvironmentProblem(msg)
    return res


class Ledger:
    """What a testbed created, persisted after every addition."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"pids": [], "cgroups": [], "netns": [], "links": [], "addrs": [], "info": {}}
        if path.exists():
            self.data.update(json.loads(path.read_text()))

    def add(self, kind: str, value: Any) -> None:
        self.data[kind].append(value)
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)


# -- cgroups ---------------------------------------------------------------------------------------------------
def make_cgroup(ledger: Ledger, rel: str, cpu_pct: float | None, ram_mb: int | None) -> str:
    """Create `<controller>/<rel>` for cpu and memory and set the cfs quota (% of one core) and memory limit."""
    for ctl in CONTROLLERS:
        d = CGROUP_ROOT / ctl / rel
        d.mkdir(parents=True, exist_ok=True)
        ledger.add("cgroups", str(d))
    cpu = CGROUP_ROOT / "cpu" / rel
    (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
    quota = -1 if cpu_pct is None else max(1000, int(CFS_PERIOD_US * cpu_pct / 100))
    (cpu / "cpu.cfs_quota_us").write_text(str(quota))
    if ram_mb is not None:
        mem = CGROUP_ROOT / "memory" / rel
        (mem / "memory.limit_in_bytes").write_text(str(int(ram_mb) * 1024 * 1024))
    return rel


def cgroup_enter_prefix(rel: str) -> str:
    """Shell code that moves the running shell (and so what it execs) into the cgroup `rel`."""
    return "".join(f"echo $$ > {CGROUP_ROOT / ctl / rel / 'cgroup.procs'}; " for ctl in CONTROLLERS)


def cgroup_pids(path: str) -> list[int]:
    p = Path(path) / "cgroup.procs"
    try:
        return [int(x) for x in p.read_text().split()]
    except (OSError, ValueError):
        return []


def cgroup_stat(rel: str) -> dict[str, int]:
    """cpu throttling and peak memory of a cgroup (proof that the limits acted)."""
    out: dict[str, int] = {}
    try:
        for line in (CGROUP_ROOT / "cpu" / rel / "cpu.stat").read_text().splitlines():
            k, v = line.split()
            out[f"cpu_{k}"] = int(v)
        mem = CGROUP_ROOT / "memory" / rel
        out["mem_max_usage_bytes"] = int((mem / "memory.max_usage_in_bytes").read_text())
        out["mem_failcnt"] = int((mem / "memory.failcnt").read_text())
    except (OSError, ValueError):
        pass
    return out


# -- network ---------------------------------------------------------------------------------------------------
def free_subnet(seed: int) -> str:
    """A 10.x.y.0/24 not used by any address or route on this machine (`10.x.y` returned)."""
    used = run(["ip", "-4", "route", "show", "table", "all"], check=False).stdout
    used += run(["ip", "-4", "addr"], check=False).stdout
    for k in range(256):
        a, b = 200 + (seed + k) % 50, (seed * 7 + k) % 256
        net = f"10.{a}.{b}"
        if f"{net}." not in used:
            return net
    msg = "no free 10.x.y.0/24 subnet for the testbed bridge"
    raise EnvironmentProblem(msg)


def make_bridge(ledger: Ledger, name: str, addr: str) -> None:
    run(["ip", "link", "add", name, "type", "bridge"])
    ledger.add("links", name)
    run(["ip", "addr", "add", f"{addr}/24", "dev", name])
    run(["ip", "link", "set", name, "up"])


def tbf(dev: str, mbits: float, netns: str | None = None) -> None:
    """Token bucket on `dev`'s egress: `mbits` Mbit/s, burst >= one timer tick of data, 100 ms queue."""
    rate_bytes = mbits * 1e6 / 8
    burst = max(16 * 1024, int(rate_bytes / 100))
    pre = ["ip", "netns", "exec", netns] if netns else []
    run(
        [
            *pre,
            "tc",
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            f"{mbits}mbit",
            "burst",
            str(burst),
            "latency",
            "100ms",
        ]
    )


def make_netns(
    ledger: Ledger, ns: str, host_if: str, ns_if: str, bridge: str, addr: str, gw: str, mbits: float | None
) -> None:
    """Namespace `ns` with `addr`/24 on a veth whose peer is a port of `bridge`; default route via `gw`."""
    run(["ip", "netns", "add", ns])
    ledger.add("netns", ns)
    run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if])
    ledger.add("links", host_if)
    run(["ip", "link", "set", ns_if, "netns", ns])
    run(["ip", "link", "set", host_if, "master", bridge])
    run(["ip", "link", "set", host_if, "up"])
    run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", ns_if])
    run(["ip", "-n", ns, "link", "set", ns_if, "up"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "-n", ns, "route", "add", "default", "via", gw])
    if mbits is not None:
        tbf(ns_if, mbits, netns=ns)  # what the host sends
        tbf(host_if, mbits)  # what the host receives


# -- processes ---------------------------------------------------------------------------------------------------
def spawn(
    ledger: Ledger,
    argv: Sequence[str],
    log: Path,
    env: dict[str, str],
    netns: str | None = None,
    cgroup: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start argv (in `netns`, inside `cgroup`) in its own session; PID recorded before anything else."""
    cmd = list(argv)
    # the cgroup first: `ip netns exec` remounts /sys in a new mount namespace, hiding /sys/fs/cgroup
    if netns is not None:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    if cgroup is not None:
        cmd = ["sh", "-c", cgroup_enter_prefix(cgroup) + 'exec "$@"', "sh", *cmd]
    with log.open("ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    ledger.add("pids", proc.pid)
    return proc


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie of ours counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _signal(pid: int, sig: int) -> None:
    """Signal the session `pid` leads (what it forked) and `pid` itself; gone is fine."""
    for fn in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            fn(pid, sig)


def stop_pids(pids: Sequence[int], grace_s: float = 8.0) -> None:
    """SIGTERM each PID we started (and its session), wait up to grace_s, then SIGKILL what is left."""
    live = [p for p in pids if _alive(p)]
    for p in live:
        _signal(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while live and time.monotonic() < deadline:
        time.sleep(0.1)
        live = [p for p in live if _alive(p)]
    for p in live:
        _signal(p, signal.SIGKILL)


def teardown(ledger: Ledger) -> list[str]:
    """Remove everything in the ledger, newest first; return the problems (empty when all is gone)."""
    problems: list[str] = []
    stop_pids(ledger.data["pids"])
    # executors and Python workers forked by our workers live in our cgroups: those PIDs are ours too
    for d in ledger.data["cgroups"]:
        stop_pids(cgroup_pids(d), grace_s=3.0)
    for d in reversed(ledger.data["cgroups"]):
        for _ in range(50):
            try:
                if Path(d).exists():
                    os.rmdir(d)
                break
            except OSError:
                stop_pids(cgroup_pids(d), grace_s=1.0)
                time.sleep(0.1)
        else:
            problems.append(f"cgroup {d} could not be removed")
    for d in {str(Path(x).parent) for x in ledger.data["cgroups"]}:
        if Path(d).exists() and Path(d).name.startswith(ledger.data["info"].get("prefix", "\0")):
            try:
                os.rmdir(d)
            except OSError as exc:
                problems.append(f"cgroup {d}: {exc}")
    for ns in reversed(ledger.data["netns"]):
        if run(["ip", "netns", "del", ns], check=False).returncode and ns in run(["ip", "netns"]).stdout:
            problems.append(f"netns {ns} could not be removed")
    for link in reversed(ledger.data["links"]):
        if _link_exists(link) and run(["ip", "link", "del", link], check=False).returncode and not _link_gone(link):
            problems.append(f"link {link} could not be removed")
    return problems


def _link_exists(link: str) -> bool:
    return run(["ip", "link", "show", link], check=False).returncode == 0


def _link_gone(link: str, timeout_s: float = 10.0) -> bool:
    """Whether the link disappears within timeout_s: a veth end goes with its peer's namespace, which the kernel
    removes asynchronously, so ``ip link del`` can fail on a link that is already on its way out."""
    deadline = time.monotonic() + timeout_s
    while _link_exists(link):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
