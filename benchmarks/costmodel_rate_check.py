"""How far the expected sink rate (the GNN's `rate_out_est` feature and throughput prior) is from the measured
throughput of every successful REAL corpus trace, per query type and by how many rows the run wrote.

    python benchmarks/costmodel_rate_check.py --traces docs/results/costmodel_real_traces.jsonl [--json OUT]

Why: the throughput q-error of one query type stood far above the others; an estimate that is already off
before any learning points at the features (what the trace says ran), a run with few rows at the label (a
count of a handful of rows). Prints a table; with --json also writes it. No training, seconds to run.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from adaptstream.costmodel import rates
from adaptstream_bench.costmodel_real_eval import load_real

ROW_BINS = ((0, 5), (5, 20), (20, 10**12))


def check(path: Path) -> dict:
    corpus, _, _ = load_real(path)
    by_type: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for t in corpus:
        if t.labels is None or not t.labels.success or not t.labels.throughput > 0:
            continue
        est = rates.expected_rates(t.query)[t.query.sink().id]
        by_type[t.query.query_type].append((t.labels.throughput, est, int(t.meta.get("sink_rows_after_warmup", -1))))
    # VERSION came with version 2: the script also runs against an older checkout (PYTHONPATH) for a before figure
    out: dict = {"rates_version": getattr(rates, "VERSION", 1), "types": {}}
    everything = [r for rows in by_type.values() for r in rows]
    for name, rows in [*sorted(by_type.items()), ("all", everything)]:
        y, e, n = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
        q = np.maximum(y / np.maximum(e, 1e-12), e / y)
        bins = {f"{lo}-{hi if hi < 10**12 else 'up'}": (n >= lo) & (n < hi) for lo, hi in ROW_BINS}
        out["types"][name] = {
            "n": len(rows),
            "q50": float(np.median(q)),
            "measured_over_estimate_median": float(np.median(y / np.maximum(e, 1e-12))),
            "runs_by_rows": {k: int(m.sum()) for k, m in bins.items()},
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if not a.traces.is_file():
        ap.error(f"no traces file at {a.traces}")
    res = check(a.traces)
    print(f"expected sink rate vs measured T (rates.VERSION {res['rates_version']}), successful corpus traces")
    print(f"{'type':16s} {'n':>4s} {'q50':>6s} {'T/est':>6s}  runs by sink rows after warm-up")
    for name, r in res["types"].items():
        rows = ", ".join(f"{k}: {v}" for k, v in r["runs_by_rows"].items())
        print(f"{name:16s} {r['n']:4d} {r['q50']:6.2f} {r['measured_over_estimate_median']:6.2f}  {rows}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
