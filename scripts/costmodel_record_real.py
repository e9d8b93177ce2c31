"""Record the real Structured Streaming traces: `python scripts/costmodel_record_real.py [N] [OUT]`.

Defaults: 20 queries, seed 0, 24 s per query (6 s warm-up), tests/fixtures/costmodel/real_traces.jsonl.
"""

from __future__ import annotations

import sys
import time

from adaptstream_bench.costmodel.realtraces import record_real

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    out = sys.argv[2] if len(sys.argv) > 2 else "tests/fixtures/costmodel/real_traces.jsonl"
    t0 = time.time()
    written = record_real(out, n=n, seed=0, duration_s=24.0, warmup_s=6.0)
    print(f"wrote {written} real traces to {out} in {time.time() - t0:.1f} s")
