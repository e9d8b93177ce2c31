"""Host categories of the REAL testbed: Costream Table I ranges scaled to this 2-core machine.

Table I (and our generator, `generate.py`) spans cpu 50-800 % of a core, 1-32 GB RAM, 25-10000 Mbit/s. One
machine with 2 cores and a JVM per worker cannot host that: cpu is scaled by 1/4 (a quota of 12.5-200 % of
one core of this machine), bandwidth by 1/25 (1-400 Mbit/s, tc tbf on the worker's veth, both directions), and
RAM is a hard cgroup limit chosen from what a Spark worker + one executor + Python workers need to start
(about 0.9 GB), not scaled. Latency is not shaped: netem is missing from this kernel; `latency_ms` in the
traces is the measured TCP round trip over the veth (a fraction of a millisecond).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from adaptstream.errors import ConfigError


@dataclass(frozen=True)
class HostSpec:
    """One testbed host: a Spark worker confined to a cgroup (cpu, memory) and a network namespace (bandwidth)."""

    name: str
    category: str
    cpu_pct: float  # cfs quota as % of one core of THIS machine
    ram_mb: int  # memory.limit_in_bytes of the whole host (worker JVM, executor JVM, Python workers)
    bandwidth_mbits: float  # tbf rate on the host's link, each direction

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Table I category bins (generate.py) -> this machine. small: Table I 50-300 % cpu, 25-400 Mbit/s;
# medium 200-500 %, 200-1600 Mbit/s; large 400-800 %, 1600-10000 Mbit/s (scaled 1/4 and 1/25, one point each).
CATEGORIES: dict[str, dict[str, float]] = {
    "small": {"cpu_pct": 25.0, "ram_mb": 1280, "bandwidth_mbits": 4.0},
    "medium": {"cpu_pct": 60.0, "ram_mb": 1792, "bandwidth_mbits": 32.0},
    "large": {"cpu_pct": 150.0, "ram_mb": 2560, "bandwidth_mbits": 200.0},
}


def host_tag(specs: list[HostSpec]) -> str:
    """Short id tag of a host set: category initials ("mmm"), plus a hash when a setting was overridden."""
    tag = "".join(h.category[0] for h in specs)
    keys = ("cpu_pct", "ram_mb", "bandwidth_mbits")
    if any(tuple(getattr(h, k) for k in keys) != tuple(CATEGORIES[h.category][k] for k in keys) for h in specs):
        tag += "~" + hashlib.sha1(repr([h.to_dict() for h in specs]).encode()).hexdigest()[:6]
    return tag


def parse_hosts(spec: str) -> list[HostSpec]:
    """`"small,medium,large"` or `"small:cpu=30:bw=8,large"` -> HostSpecs named h0, h1, ... in that order."""
    out: list[HostSpec] = []
    for i, item in enumerate(x for x in spec.split(",") if x.strip()):
        cat, *overrides = item.strip().split(":")
        if cat not in CATEGORIES:
            msg = f"host {item!r}: category must be one of {', '.join(CATEGORIES)}"
            raise ConfigError(msg)
        vals = dict(CATEGORIES[cat])
        keys = {"cpu": "cpu_pct", "ram": "ram_mb", "bw": "bandwidth_mbits"}
        for ov in overrides:
            k, _, v = ov.partition("=")
            if k not in keys:
                msg = f"host {item!r}: unknown setting {k!r}; use cpu=, ram=, bw="
                raise ConfigError(msg)
            try:
                vals[keys[k]] = float(v)
            except ValueError:
                msg = f"host {item!r}: {k}={v!r} is not a number"
                raise ConfigError(msg) from None
            if vals[keys[k]] <= 0:
                msg = f"host {item!r}: {k} must be > 0"
                raise ConfigError(msg)
        out.append(HostSpec(f"h{i}", cat, vals["cpu_pct"], int(vals["ram_mb"]), vals["bandwidth_mbits"]))
    if not out:
        msg = "no hosts given (e.g. --hosts small,medium,large)"
        raise ConfigError(msg)
    return out
