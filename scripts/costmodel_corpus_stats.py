"""Statistics of a corpus directory (completed partitions): `python scripts/costmodel_corpus_stats.py DIR`.

Prints Markdown: size, class balance overall and per query type, label percentiles (all SIMULATED).
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from adaptstream.costmodel.corpus import iter_corpus, split_of


def main(corpus_dir: str) -> None:
    rows = []
    for t in iter_corpus(corpus_dir):
        lab = t.labels
        rows.append(
            (
                t.query.query_type,
                bool(lab.backpressure),
                bool(lab.success),
                t.meta["sim_failure_reason"],
                lab.throughput,
                lab.e2e_latency_ms,
                lab.proc_latency_ms,
                split_of(t.trace_id),
            )
        )
    n = len(rows)
    print(f"- traces: {n}; splits {dict(sorted(Counter(r[7] for r in rows).items()))}")
    print(
        f"- backpressure: {np.mean([r[1] for r in rows]):.1%}; "
        f"failed: {np.mean([not r[2] for r in rows]):.1%} "
        f"(oom {sum(r[3] == 'oom' for r in rows)}, no output {sum(r[3] == 'no_output' for r in rows)})"
    )
    print("\n| query type | n | share | backpressure | failed |\n|---|---|---|---|---|")
    for qt, c in sorted(Counter(r[0] for r in rows).items()):
        sub = [r for r in rows if r[0] == qt]
        print(
            f"| {qt} | {c} | {c / n:.1%} | {np.mean([r[1] for r in sub]):.1%} | "
            f"{np.mean([not r[2] for r in sub]):.1%} |"
        )
    ok = [r for r in rows if r[2]]
    print("\n| label (successful runs) | min | 5% | 50% | 95% | max |\n|---|---|---|---|---|---|")
    for i, name in ((4, "T (tuples/s)"), (5, "Le (ms)"), (6, "Lp (ms)")):
        v = np.array([r[i] for r in ok], dtype=float)
        q = np.percentile(v, [0, 5, 50, 95, 100])
        print(f"| {name} | " + " | ".join(f"{x:.3g}" for x in q) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/costmodel_corpus")
