"""Report of ``adaptstream bench lmstream-capacity`` (issue #56 item 4): per (query, rate) cell the repeats of each
policy, and the two targets, each verdict computed here from the recorded runs.

Targets, fixed before any run was recorded:

* **share**: at every cell, lmstream's share of batches within the bound (MaxLat <= slide) is at least asap's minus
  2 points. Met when lmstream's median and its worst repeat both clear asap's median and best repeat minus 2
  points; missed when its median and its best repeat both fall below asap's median and worst repeat minus 2
  points; undecided in between (the repeats overlap), or when a cell lacks repeats.
* **executor time**: at every cell where both policies' medians hold >= 95 % of their batches within the bound,
  lmstream's executor CPU time per input row (Spark's task metrics) is at most 0.7x asap's. Met when lmstream's
  slowest repeat is within 0.7x asap's fastest; missed when its fastest is above 0.7x asap's slowest; else
  undecided.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from adaptstream_bench.meta import describe, rerender, verdict_table, write_report_files

NAME = "lmstream_capacity"
MARGIN = 0.02  # share points lmstream may fall below asap
HOLD = 0.95  # share within the bound at which a cell counts as held for the executor-time target
CPU_RATIO = 0.70  # lmstream's executor CPU per row / asap's


def cells(runs: list[dict]) -> dict[tuple[str, int], dict[str, list[dict]]]:
    """(query, rate) -> policy -> its runs, in the order they ran."""
    out: dict[tuple[str, int], dict[str, list[dict]]] = {}
    for r in runs:
        out.setdefault((r["workload"], int(r["rate"])), {}).setdefault(r["policy"], []).append(r)
    return out


def _vals(rs: list[dict], key: str) -> list[float]:
    return [float(r[key]) for r in rs if r.get(key) is not None and r[key] == r[key]]  # NaN != NaN


def _med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def share_verdict(lm: list[float], asap: list[float]) -> bool | None:
    if not lm or not asap:
        return None
    ml, ma = statistics.median(lm), statistics.median(asap)
    if ml >= ma - MARGIN and min(lm) >= max(asap) - MARGIN:
        return True
    if ml < ma - MARGIN and max(lm) < min(asap) - MARGIN:
        return False
    return None


def cpu_verdict(lm: list[float], asap: list[float]) -> bool | None:
    if not lm or not asap:
        return None
    if max(lm) <= CPU_RATIO * min(asap):
        return True
    if min(lm) > CPU_RATIO * max(asap):
        return False
    return None


def _missing(pols: dict[str, list[dict]], repeats: int) -> list[str]:
    return [f"{p}: {repeats - len(pols.get(p, []))} of {repeats}" for p in ("lmstream", "asap")
            if len(pols.get(p, [])) < repeats]  # fmt: skip


def _range(xs: list[float], fmt: str) -> str:
    if not xs:
        return "n/a"
    med = format(statistics.median(xs), fmt)
    lo, hi = format(min(xs), fmt), format(max(xs), fmt)
    return med if lo == hi else f"{med} ({lo}-{hi})"


def targets(data: dict) -> list[dict]:
    """One share target and (where both held) one executor-time target per cell."""
    repeats = int(data["meta"]["repeats"])
    out: list[dict[str, Any]] = []
    for (w, rate), pols in sorted(cells(data["runs"]).items()):
        lm, asap = pols.get("lmstream", []), pols.get("asap", [])
        missing = _missing(pols, repeats)
        note = f"; repeats missing ({', '.join(missing)}): undecided" if missing else ""
        sl, sa = _vals(lm, "within"), _vals(asap, "within")
        verdict = None if missing else share_verdict(sl, sa)
        out.append(
            {
                "target": f"{w} at {rate:,} rows/s: lmstream within the bound at least as often as asap - 2 points",
                "rule": "share of batches with MaxLat <= slide; met/missed/undecided as in the report's rule",
                "measured": f"lmstream {_range(sl, '.1%')} vs asap {_range(sa, '.1%')}{note}",
                "met": verdict,
            }
        )
        if _med(sl) is None or _med(sa) is None or min(_med(sl) or 0, _med(sa) or 0) < HOLD:
            continue
        cl, ca = _vals(lm, "cpu_us_per_row"), _vals(asap, "cpu_us_per_row")
        out.append(
            {
                "target": f"{w} at {rate:,} rows/s (both held): lmstream's executor CPU per row <= "
                f"{CPU_RATIO:g}x asap's",
                "rule": "executor CPU time (Spark task metrics) per input row; met/missed/undecided as in the rule",
                "measured": f"lmstream {_range(cl, '.2f')} us vs asap {_range(ca, '.2f')} us{note}",
                "met": None if missing else cpu_verdict(cl, ca),
            }
        )
    return out


def markdown(data: dict) -> str:
    """The report's Markdown, from a document whose ``targets`` are computed (:func:`write_report`)."""
    m = data["meta"]
    lines = [
        "# LMStream near and past capacity (issue #56 item 4)",
        "",
        describe(m),
        "",
        f"Set-up: {m['sizing']}",
        "",
        "Rule: " + (__doc__ or "").split("Targets, fixed before any run was recorded:", 1)[1].strip(),
        "",
        "## Targets",
        "",
        *verdict_table(data["targets"]),
    ]
    lines += [
        "",
        "## Cells (median of the repeats, min-max in brackets)",
        "",
        "| query | rate rows/s | policy | runs | within bound | mean MaxLat s | p99 latency s | executor CPU "
        "us/row | executor run time us/row | Eq. 4 throughput rows/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (w, rate), pols in sorted(cells(data["runs"]).items()):
        for p, rs in pols.items():
            lines.append(
                f"| {w} | {rate:,} | {p} | {len(rs)} | {_range(_vals(rs, 'within'), '.1%')} | "
                f"{_range(_vals(rs, 'avg_max_latency'), '.2f')} | {_range(_vals(rs, 'p99_latency'), '.2f')} | "
                f"{_range(_vals(rs, 'cpu_us_per_row'), '.2f')} | {_range(_vals(rs, 'run_us_per_row'), '.2f')} | "
                f"{_range(_vals(rs, 'thput'), ',.0f')} |"
            )
    if data.get("skipped"):
        lines += ["", "Not run (budget): " + "; ".join(data["skipped"])]
    lines += ["", f"![within the bound and executor CPU per row]({NAME}.png)", ""]
    return "\n".join(lines)


def _plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = cells(data["runs"])
    queries = sorted({w for w, _ in by})
    if not queries:
        return
    fig, axes = plt.subplots(2, len(queries), figsize=(4.5 * len(queries), 6), squeeze=False)
    for j, w in enumerate(queries):
        rates = sorted(r for q, r in by if q == w)
        for k, p in enumerate(sorted({p for (q, _), ps in by.items() if q == w for p in ps})):
            for i, key in enumerate(("within", "cpu_us_per_row")):
                ys = [_vals(by[(w, r)].get(p, []), key) for r in rates]
                xs = [r for r, y in zip(rates, ys, strict=True) if y]
                ys = [y for y in ys if y]
                med = [statistics.median(y) for y in ys]
                err = [
                    [m - min(y) for m, y in zip(med, ys, strict=True)],
                    [max(y) - m for m, y in zip(med, ys, strict=True)],
                ]
                axes[i][j].errorbar(xs, med, yerr=err, marker="o", capsize=3, color=f"C{k}", label=p)
        axes[0][j].set_title(w, fontsize=9)
        axes[0][j].set_ylabel("share of batches within the bound")
        axes[1][j].set_ylabel("executor CPU us per input row")
        axes[1][j].set_xlabel("rows/s")
        axes[0][j].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(data: dict, target: Path) -> Path:
    return write_report_files(data, target, NAME, targets, markdown, _plot)


if __name__ == "__main__":  # pragma: no cover
    rerender(NAME, write_report)
