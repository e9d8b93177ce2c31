"""Expected output rate of every operator of a query, from its features alone (no placement, no hardware).

Why: the learned DB cost models of the Costream authors' group feed the optimiser's cardinality estimates to the
model as node features (zero-shot cost models); a small real corpus (about a hundred traces) cannot teach a GNN
to multiply rates, selectivities and window lengths through a join, so it gets the product as a feature. The
formulas follow the testbed's realisation of a Table II query (costmodel/testbed/placement.py): filters pass
``selectivity`` of their input, a join is an interval join of +-window on a key with 1/selectivity values, an
aggregation groups by ``round(selectivity * rows per window)`` keys and emits each group present once per slide.
Count windows and group counts are sized from the testbed's nominal rates (``nominal_rates``), as the testbed
sizes them when it runs the query; the rows flowing are the expected ones.
"""

from __future__ import annotations

import math
from typing import Any

EPS = 1e-9


def _f(op: Any, name: str, default: float) -> float:
    try:
        v = float(op.features.get(name, default))
    except (TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def _window_s(op: Any, rate_in: float) -> tuple[float, float]:
    """(size, slide) in seconds; count windows are converted at the nominal input rate, clamped as the testbed
    clamps them."""
    from adaptstream.costmodel.testbed.placement import WINDOW_S

    size, slide = _f(op, "window_size", 1.0), _f(op, "window_slide", 0.0) or _f(op, "window_size", 1.0)
    if op.features.get("window_policy") == "count":
        size = min(max(size / max(rate_in, EPS), WINDOW_S[0]), WINDOW_S[1])
        slide = min(max(slide / max(rate_in, EPS), WINDOW_S[0] / 2), size)
    return max(size, EPS), max(slide, EPS)


def expected_rates(query: Any) -> dict[str, float]:
    """Rows per second out of every operator (expected values; >= 0)."""
    from adaptstream.costmodel.testbed.placement import MAX_RATE, nominal_rates

    src = {op.id: min(MAX_RATE, _f(op, "event_rate", 0.0)) for op in query.operators if op.kind == "source"}
    nominal = nominal_rates(query, src)
    out: dict[str, float] = {}
    for op in query.topological_order():
        ups = query.upstream(op.id)
        ins = [out[u] for u in ups]
        nom_in = sum(nominal[u] for u in ups) / max(len(ups), 1)
        if op.kind == "source":
            r = src[op.id]
        elif op.kind == "filter":
            r = ins[0] * min(max(_f(op, "selectivity", 1.0), 0.0), 1.0)
        elif op.kind == "window_join":
            w, _ = _window_s(op, nom_in)
            r = ins[0] * (ins[1] if len(ins) > 1 else ins[0]) * 2.0 * w * max(_f(op, "selectivity", 0.0), 0.0)
        elif op.kind == "window_agg":
            w, slide = _window_s(op, nom_in)
            sel = _f(op, "selectivity", 0.0)
            groups = 1.0 if op.features.get("group_by_type") == "none" else max(1.0, round(sel * nom_in * w))
            n = ins[0] * w
            r = groups * (1.0 - math.exp(-n / groups)) / slide
        else:
            r = ins[0] if ins else 0.0
        out[op.id] = max(r, 0.0)
    return out
