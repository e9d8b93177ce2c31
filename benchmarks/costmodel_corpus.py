"""Simulated-testbed speed and label balance: `python benchmarks/costmodel_corpus.py [N]`.

Generates N traces in this process (no Spark), times the simulator, and reports the label mix per query type
at the default cost_scale and at cost_scale=1 (the measured Python costs alone). Writes
docs/results/costmodel_corpus.md. All labels are SIMULATED.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from adaptstream_bench.costmodel.simcorpus import trace_for
from adaptstream_bench.costmodel.simulator import SimConfig

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "costmodel_corpus.md"


def run(n: int, cfg: SimConfig) -> tuple[list, float]:
    sim = cfg.build()
    trace_for(99, 0, sim)  # JIT warm-up (numba cache)
    t0 = time.perf_counter()
    traces = [trace_for(0, i, sim) for i in range(n)]
    return traces, time.perf_counter() - t0


def table(traces: list) -> list[str]:
    rows = [
        "| query type | n | backpressure | failed (oom / no output) | median T (1/s) | median Le (ms) |",
        "|---|---|---|---|---|---|",
    ]
    groups: dict[str, list] = {}
    for t in traces:
        groups.setdefault(t.query.query_type.replace("+agg", ""), []).append(t)
    groups["all"] = traces
    for name, ts in groups.items():
        bp = np.mean([t.labels.backpressure for t in ts])
        fail = np.mean([not t.labels.success for t in ts])
        reasons = Counter(t.meta["sim_failure_reason"] for t in ts)
        ok = [t for t in ts if t.labels.success]
        med_t = np.median([t.labels.throughput for t in ok]) if ok else float("nan")
        med_le = np.median([t.labels.e2e_latency_ms for t in ok]) if ok else float("nan")
        rows.append(
            f"| {name} | {len(ts)} | {bp:.1%} | {fail:.1%} ({reasons['oom']} / {reasons['no_output']}) "
            f"| {med_t:.3g} | {med_le:.3g} |"
        )
    return rows


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    load0 = os.getloadavg()[0]
    default, secs = run(n, SimConfig())
    raw, secs1 = run(n, SimConfig(cost_scale=1.0))
    spread = {
        k: np.percentile([getattr(t.labels, k) for t in default if t.labels.success], [5, 50, 95])
        for k in ("throughput", "e2e_latency_ms", "proc_latency_ms")
    }
    lines = [
        "# Simulated edge-cloud testbed: speed and label balance (SIMULATED labels)",
        "",
        f"Measured by `python benchmarks/costmodel_corpus.py {n}` in one process on this 2-core machine "
        f"(1-minute load average {load0:.1f} at the start: other work shared the CPU). Traces 0..{n - 1} of "
        "corpus seed 0, i.e. the first traces of the corpus.",
        "",
        f"- speed: {n / secs:.1f} traces/s at the default config ({secs / n * 1000:.1f} ms per 60 s "
        "simulated "
        f"run, incl. query/hardware/placement sampling); {n / secs1:.1f} traces/s at cost_scale=1",
        "- 5/50/95th percentiles over successful runs: "
        + "; ".join(f"{k} {v[0]:.3g} / {v[1]:.3g} / {v[2]:.3g}" for k, v in spread.items()),
        "",
        f"## Default config (cost_scale={SimConfig().cost_scale})",
        "",
        *table(default),
        "",
        "## cost_scale=1 (measured Python per-tuple costs only)",
        "",
        *table(raw),
        "",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
