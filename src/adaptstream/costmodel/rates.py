"""Expected output rate of every operator of a query, from its features alone (no placement, no hardware).

Why: the learned DB cost models of the Costream authors' group feed the optimiser's cardinality estimates to the
model as node features (zero-shot cost models); a small real corpus (about a hundred traces) cannot teach a GNN
to multiply rates, selectivities and window lengths through a join, so it gets the product as a feature. The
formulas follow the testbed's realisation of a Table II query (the harness's costmodel/testbed/placement.py):
filters pass ``selectivity`` of their input, a join is an interval join of +-window on a key with 1/selectivity
values, an aggregation emits each group present in a window once per slide, with selectivity x rows per window groups
present (Def. 8; the testbed records that selectivity for what runs, `placement.agg_selectivity`, and the
simulator draws groups the same way). Count windows are sized from the testbed's nominal rates
(``nominal_rates``), as the testbed sizes them when it runs the query; the rows flowing are the expected ones.
"""

from __future__ import annotations

import math
from typing import Any

EPS = 1e-9
#: bumped whenever a formula here changes: part of the feature signature, so cached models of other estimates
#: are not reused. 2 (2026-11-29): an aggregation's groups are selectivity x rows per window (Def. 8), in place
#: of round(selectivity x nominal rows) groups filled at random
VERSION = 2


#: how the real testbed sizes a query (harness: adaptstream_bench.costmodel.testbed.placement realises it)
MAX_RATE = 2000.0  # rows/s per source: a 2-core machine with Python edges
WINDOW_S = (0.25, 16.0)


def nominal_rates(query: Any, rate_of: dict[str, float]) -> dict[str, float]:
    """Expected output rate per operator (selectivities applied; joins and aggs approximate)."""
    out: dict[str, float] = {}
    for op in query.topological_order():
        ins = [out[u] for u in query.upstream(op.id)]
        if op.kind == "source":
            out[op.id] = rate_of[op.id]
        elif op.kind == "filter":
            out[op.id] = ins[0] * float(op.feature("selectivity", 1.0))
        elif op.kind == "window_join":
            w = float(op.feature("window_size", 1.0))
            out[op.id] = float(op.feature("selectivity", 0.01)) * ins[0] * ins[1] * w
        elif op.kind == "window_agg":
            out[op.id] = max(1.0, float(op.feature("selectivity", 0.0)) * ins[0])
        else:
            out[op.id] = ins[0] if ins else 0.0
    return out


def _f(op: Any, name: str, default: float) -> float:
    try:
        v = float(op.features.get(name, default))
    except (TypeError, ValueError):
        return default
    return v if math.isfinite(v) else default


def _window_s(op: Any, rate_in: float) -> tuple[float, float]:
    """(size, slide) in seconds; count windows are converted at the nominal input rate, clamped as the testbed
    clamps them."""
    size, slide = _f(op, "window_size", 1.0), _f(op, "window_slide", 0.0) or _f(op, "window_size", 1.0)
    if op.features.get("window_policy") == "count":
        size = min(max(size / max(rate_in, EPS), WINDOW_S[0]), WINDOW_S[1])
        slide = min(max(slide / max(rate_in, EPS), WINDOW_S[0] / 2), size)
    return max(size, EPS), max(slide, EPS)


def _source_rates(query: Any) -> tuple[dict[str, float], dict[str, float]]:
    """(source rates as the testbed caps them, the testbed's nominal rate of every operator)."""
    src = {op.id: min(MAX_RATE, _f(op, "event_rate", 0.0)) for op in query.operators if op.kind == "source"}
    return src, nominal_rates(query, src)


def expected_rates(query: Any) -> dict[str, float]:
    """Rows per second out of every operator (expected values; >= 0)."""
    src, nominal = _source_rates(query)
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
            n = ins[0] * w  # rows in a window
            some = 1.0 - math.exp(-n)  # a window holding a row has a group
            sel = max(_f(op, "selectivity", 0.0), 0.0)
            groups = some if op.features.get("group_by_type") == "none" else max(some, sel * n)
            r = groups / slide
        else:
            r = ins[0] if ins else 0.0
        out[op.id] = max(r, 0.0)
    return out


def host_loads(query: Any, placement: dict[str, str], rates: dict[str, float]) -> dict[str, dict[str, float]]:
    """Per host, from the expected rates: rows/s into its operators (`rows_in_est`; a source counts its own
    events), rows/s out of them (`rows_out_est`) and rows held in their windows (`state_rows_est`).

    Why: on the real testbed a run fails or crawls when one host gets more rows than its CPU share can take (a
    3-way join with its aggregation on a small host is most of the failed runs); Costream's host nodes carry the
    hardware only, and a GNN trained on a few hundred real traces does not learn to add rates over the operators
    placed on a host, so the sums are given as host features (like `rate_out_est`, a cardinality estimate).
    """
    _, nominal = _source_rates(query)
    out: dict[str, dict[str, float]] = {}
    for op in query.operators:
        acc = out.setdefault(str(placement[op.id]), {"rows_in_est": 0.0, "rows_out_est": 0.0, "state_rows_est": 0.0})
        ups = query.upstream(op.id)
        rows_in = sum(rates[u] for u in ups) if ups else rates[op.id]
        acc["rows_in_est"] += rows_in
        acc["rows_out_est"] += rates[op.id]
        if op.kind in ("window_join", "window_agg"):
            size, _ = _window_s(op, sum(nominal[u] for u in ups) / max(len(ups), 1))
            acc["state_rows_est"] += rows_in * size
    return out
