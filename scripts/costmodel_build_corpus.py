"""Build the full simulated corpus: `nice -n 10 python scripts/costmodel_build_corpus.py [N] [OUT] [MASTER]`.

Defaults: 40,000 traces, seed 0, data/costmodel_corpus, local[2]. Resumable: re-run after an interruption.
"""

from __future__ import annotations

import sys
import time

from adaptstream_bench.costmodel.simcorpus import build_corpus

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40_000
    out = sys.argv[2] if len(sys.argv) > 2 else "data/costmodel_corpus"
    master = sys.argv[3] if len(sys.argv) > 3 else None
    t0 = time.time()

    def show(s: dict, done: int, total: int) -> None:
        print(
            f"[{time.time() - t0:7.1f}s] part {s['part']:4d} ({s['n']} traces, {s['seconds']} s) {done}/{total}",
            flush=True,
        )

    m = build_corpus(out, n, seed=0, master=master, progress=show)
    print({k: v for k, v in m.items() if k != "parts"})
    print(f"wall {time.time() - t0:.1f} s")
