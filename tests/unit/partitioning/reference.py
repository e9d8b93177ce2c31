"""Plain-Python reference implementations of the holistic decide() rules (exact cardinality), written
straight from the paper's pseudo-code, to check the numba kernel against."""

from __future__ import annotations

import numpy as np

from adaptstream.partitioning._kernels import block_of


def reference_assign(mode: str, keys: np.ndarray, num_blocks: int, choices: int, p: float = 0.5) -> np.ndarray:
    cands = np.stack([block_of(keys, j + 1, num_blocks) for j in range(choices)], axis=1)
    loads = [0] * num_blocks
    sets: list[set[int]] = [set() for _ in range(num_blocks)]
    out = []
    for i, k in enumerate(keys.tolist()):
        cs = cands[i].tolist()
        chosen = None
        if mode in ("am", "cam"):
            for c in cs:
                if k in sets[c]:
                    chosen = c
                    break
        if chosen is None:
            if mode in ("pk", "cam"):
                scores = [loads[c] for c in cs]
            elif mode in ("cm", "am"):
                scores = [len(sets[c]) for c in cs]
            else:
                lmin, lmax = min(loads), max(loads)
                card = [len(s) for s in sets]
                cmin, cmax = min(card), max(card)
                scores = []
                for c in cs:
                    ln = (loads[c] - lmin) / (lmax - lmin) if lmax > lmin else 0.0
                    cn = (card[c] - cmin) / (cmax - cmin) if cmax > cmin else 0.0
                    scores.append(p * ln + (1 - p) * cn)
            chosen = cs[int(np.argmin(scores))]  # first minimum, as the kernel's strict "<"
            if mode != "pk":
                sets[chosen].add(k)
        loads[chosen] += 1
        out.append(chosen)
    return np.array(out, dtype=np.int32)
