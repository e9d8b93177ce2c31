"""How much a REAL testbed label varies between two runs of the same trace (`adaptstream costmodel repeatability`).

`costmodel testbed-corpus --repeat` runs corpus trace `tb-<seed>-<i>` again as `tbr-<seed>-<i>`: the same
generated query, host set and placement, at another time. The q-error between the two runs' labels is the part
of a label that the trace's features (query, hosts, placement) cannot explain, whatever the model.

Floor for a model (assumption, written here so the number can be checked): if a label is ``f(x) * e`` with the
log noise ``ln e`` independent, symmetric and the same for both runs, the log ratio of two runs has sqrt(2) times
the spread of one run's noise, so a perfect predictor of ``f(x)`` has median q-error ``exp(ln(q_rep) / sqrt(2))``
where ``q_rep`` is the median q-error between the two runs.

Success is judged twice: by the run itself (`S`) and by the rule `eval-real` scores (`S (rerun)`): a failed run
that succeeded when run again for longer counts as a success. The corpus run's longer run is `tbl-<seed>-<i>`, the
repeat's its own `tbrl-<seed>-<i>` (`testbed-corpus --repeat --rerun-failed`); a pair with a failed run that has
no longer run is left out of `S (rerun)`, counted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adaptstream.costmodel.model import Trace, read_traces
from adaptstream.costmodel.qerror import balanced_accuracy, q_errors
from adaptstream.errors import CostModelError
from adaptstream_bench.costmodel.testbed.bprules import LATEST, RULES, recorded_rule, verdict
from adaptstream_bench.meta import dirty_note, load_range, load_text

REG = {"T": "throughput", "Le": "e2e_latency_ms", "Lp": "proc_latency_ms"}
CLS = {"R_O": "backpressure", "S": "success"}


def pairs(traces: Sequence[Trace]) -> list[tuple[Trace, Trace]]:
    """(corpus run, repeat run) for every `tbr-*` trace whose `tb-*` original is there, in id order."""
    by_id = {t.trace_id: t for t in traces if t.labels is not None and t.labels.origin == "real"}
    out = []
    for tid in sorted(by_id):
        if tid.startswith("tbr-") and (orig := by_id.get("tb-" + tid[4:])) is not None:
            out.append((orig, by_id[tid]))
    return out


def longer_runs(traces: Sequence[Trace]) -> dict[str, Trace]:
    """The longer runs of failed runs, keyed by the id of the run they repeat (tbl- -> tb-, tbrl- -> tbr-)."""
    out = {}
    for t in traces:
        if t.labels is None or t.labels.origin != "real":
            continue
        for stem, of in (("tbrl-", "tbr-"), ("tbl-", "tb-")):
            if t.trace_id.startswith(stem):
                out[of + t.trace_id[len(stem) :]] = t
                break
    return out


def success_by_rerun(t: Trace, longer: dict[str, Trace]) -> bool | None:
    """Success by the `rerun` rule: the run's own, or for a failed run its longer run's; None without one."""
    if _label(t, "success"):
        return True
    again = longer.get(t.trace_id)
    return None if again is None else bool(_label(again, "success"))


def floor_for_model(q_rep: float) -> float:
    """Median q-error of a perfect predictor under the module docstring's noise assumption."""
    return math.exp(math.log(q_rep) / math.sqrt(2.0))


def _label(t: Trace, field: str) -> Any:
    return getattr(t.labels, field)


def _positive(t: Trace, field: str) -> bool:
    """A successful run with a positive value of ``field`` (a q-error needs two)."""
    v = _label(t, field)
    return bool(_label(t, "success")) and v is not None and v > 0


def repeatability(traces: Sequence[Trace]) -> dict[str, Any]:
    """Per-metric agreement of two runs of the same trace; raises when no pair is there."""
    ps = pairs(traces)
    if not ps:
        msg = (
            "no repeated traces (ids tbr-*) with their corpus original (tb-*); record them with "
            "`costmodel testbed-corpus --repeat`"
        )
        raise CostModelError(msg)
    longer = longer_runs(traces)
    res: dict[str, Any] = {"n_pairs": len(ps), "regression": {}, "classes": {}}
    for short, field in REG.items():
        kept = [(a, b) for a, b in ps if _positive(a, field) and _positive(b, field)]
        both = [(_label(a, field), _label(b, field)) for a, b in kept]
        if not both:
            res["regression"][short] = {"n": 0}
            continue
        q = q_errors([x for x, _ in both], [y for _, y in both])
        med = float(np.median(q))
        dl = [
            (float(a.meta["load1_before"]) - float(b.meta["load1_before"]), math.log(y / x))
            for (a, b), (x, y) in zip(kept, both, strict=True)
            if "load1_before" in a.meta and "load1_before" in b.meta
        ]
        res["regression"][short] = {
            "n": len(both),
            "q50": round(med, 3),
            "q95": round(float(np.percentile(q, 95)), 3),
            "model_floor_q50": round(floor_for_model(med), 3),
            "log_ratio_median": round(float(np.median(np.log([y / x for x, y in both]))), 3),
            "load_spearman": _spearman([d for d, _ in dl], [r for _, r in dl]),
        }
    for short, verdicts in _class_verdicts(ps, RULES, longer).items():
        res["classes"][short] = _agreement(verdicts)
    if "S (rerun)" in res["classes"]:
        res["classes"]["S (rerun)"]["left_out"] = len(ps) - res["classes"]["S (rerun)"]["n"]
    res["classes_by_type"] = {
        qt: {k: _agreement(v) for k, v in _class_verdicts(sub, (LATEST,), longer).items()}
        for qt in sorted({a.query.query_type for a, _ in ps})
        for sub in [[(a, b) for a, b in ps if a.query.query_type == qt]]
    }
    res["load1_first"] = load_range([a for a, _ in ps])
    res["load1_repeat"] = load_range([b for _, b in ps])
    res["rows"] = [_row(a, b) for a, b in ps]
    return res


def _class_verdicts(
    ps: Sequence[tuple[Trace, Trace]], rules: Sequence[str] = RULES, longer: dict[str, Trace] | None = None
) -> dict[str, list[tuple[bool, bool]]]:
    """(first, repeat) verdicts per class; backpressure once per rule, over the pairs where both runs have it;
    success by the run and, where longer runs were recorded, by the `rerun` rule."""
    out: dict[str, list[tuple[bool, bool]]] = {}
    for rule in rules:
        both = [(verdict(a, rule), verdict(b, rule)) for a, b in ps]
        out[f"R_O ({rule})"] = [(x, y) for x, y in both if x is not None and y is not None]
    out["S"] = [(bool(_label(a, "success")), bool(_label(b, "success"))) for a, b in ps]
    if longer:
        judged = [(success_by_rerun(a, longer), success_by_rerun(b, longer)) for a, b in ps]
        out["S (rerun)"] = [(x, y) for x, y in judged if x is not None and y is not None]
    return out


def _agreement(v: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
    """Share of pairs with the same label, and the balanced accuracy one run's label reaches as a predictor of
    the other's (mean of both directions): what run-to-run noise leaves to any model of the trace's features."""
    d: dict[str, Any] = {
        "n": len(v),
        "positives_first": sum(x for x, _ in v),
        "positives_repeat": sum(y for _, y in v),
    }
    if not v:
        return d
    d["agreement"] = round(sum(x == y for x, y in v) / len(v), 3)
    firsts, repeats = [x for x, _ in v], [y for _, y in v]
    if len(set(firsts)) == 2 and len(set(repeats)) == 2:
        d["balanced_agreement"] = round(
            (balanced_accuracy(repeats, firsts) + balanced_accuracy(firsts, repeats)) / 2, 3
        )
    return d


def _spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Rank correlation (ties get their mean rank); None below 5 points or when one side is constant."""
    if len(x) < 5:
        return None

    def ranks(v: Sequence[float]) -> np.ndarray:
        a = np.asarray(v, dtype=float)
        order = a.argsort(kind="stable")
        r = np.empty(len(a))
        r[order] = np.arange(len(a), dtype=float)
        for u in np.unique(a):
            r[a == u] = r[a == u].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return round(float(np.corrcoef(rx, ry)[0, 1]), 3)


def _row(a: Trace, b: Trace) -> dict[str, Any]:
    r: dict[str, Any] = {"id": a.trace_id, "type": a.query.query_type, "kind": a.meta.get("placement_kind")}
    for short, field in {**REG, **CLS}.items():
        r[short] = [_label(a, field), _label(b, field)]
    r["bp_rule"] = [recorded_rule(a.meta), recorded_rule(b.meta)]
    r["load1_before"] = [a.meta.get("load1_before"), b.meta.get("load1_before")]
    return r


def load(path: str | Path) -> dict[str, Any]:
    return repeatability(list(read_traces(path)))


def _f(v: Any, nd: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "y" if v else "n"
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def markdown(res: dict[str, Any], command: str, meta: dict[str, Any]) -> str:
    lines = [
        "# Costream on the REAL testbed: how much a label varies between two runs of the same trace",
        "",
        f"Recorded: `{command}` at git `{meta.get('git', '?')}`{dirty_note(meta)}, "
        f"{meta.get('when', '?')}. {res['n_pairs']} corpus "
        "traces run a second time (`costmodel testbed-corpus --repeat`: same generated query, host set and "
        f"placement). Load average before the first runs {load_text(res['load1_first'])}, before the repeats "
        f"{load_text(res['load1_repeat'])}.",
        "",
        "Rule for the floor column: if a label is f(x) times independent log-symmetric noise, a perfect model's "
        "median q-error is exp(ln(q_rep) / sqrt(2)), q_rep the median q-error between the two runs "
        "(bench/costmodel_repeat.py).",
        "",
        "Load column: Spearman rank correlation between (load before the first run - load before the repeat) and "
        "ln(repeat label / first label); a label that rises with the machine's load gives a negative value.",
        "",
        "| label | pairs (both succeeded) | run-to-run Q50 | run-to-run Q95 | median ln(repeat/first) | floor for a "
        "model's Q50 | load correlation |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, d in res["regression"].items():
        lines.append(
            f"| {k} | {d['n']} | {_f(d.get('q50'))} | {_f(d.get('q95'))} | {_f(d.get('log_ratio_median'))} | "
            f"{_f(d.get('model_floor_q50'))} | {_f(d.get('load_spearman'))} |"
        )
    lines += [
        "",
        "Classes: backpressure once per rule (docs/testbed.md), over the pairs where both runs have that verdict "
        "(testbed/bprules.py: a run gets a newer rule's verdict where it recorded what that rule needs, "
        "lag-or-stuck from a lag-growth run's batch records; the oldest runs have end-backlog only). "
        "Balanced agreement: the balanced accuracy (mean per-class recall) that one run's label reaches as a "
        "predictor of the other run's, mean of both directions; '-' where a class is missing. `S (rerun)`: "
        "success as `eval-real` judges it, a failed run counting as a success when a longer run of it "
        "(`testbed-corpus --rerun-failed`, the repeat's with `--repeat`) succeeded" + _left_out(res) + ".",
        "",
        "| class | pairs | same label in both runs | balanced agreement | positives (first / repeat) |",
        "|---|---|---|---|---|",
    ]
    for k, d in res["classes"].items():
        lines.append(f"| {k} | {_agreement_cells(d)} |")
    lines += _by_type(res)
    lines += [
        "",
        "## Every pair (first run / repeat)",
        "",
        "| trace | type | placement | T | Le ms | Lp ms | R_O | S | load before | R_O rule |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        keys = ("T", "Le", "Lp", "R_O", "S", "load1_before", "bp_rule")
        cells = [" / ".join(_f(v, 1) for v in r[k]) for k in keys]
        lines.append(f"| {r['id']} | {r['type']} | {r['kind']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _left_out(res: dict[str, Any]) -> str:
    """`S (rerun)` is comparable with eval-real's success labels only when no pair was left out: say how many."""
    d = res["classes"].get("S (rerun)")
    if not d:
        return ""
    n = d.get("left_out", 0)
    return f"; {n} pairs with a failed run that has no longer run left out" if n else ""


def _agreement_cells(d: dict[str, Any]) -> str:
    """pairs | same label | balanced agreement | positives: one class's cells, '-' where a share is missing."""
    same = f"{d['agreement']:.0%}" if "agreement" in d else "-"
    bal = f"{d['balanced_agreement']:.0%}" if "balanced_agreement" in d else "-"
    return f"{d['n']} | {same} | {bal} | {d['positives_first']} / {d['positives_repeat']}"


def _by_type(res: dict[str, Any]) -> list[str]:
    """Class agreement per query type: where the failures are (absent in reports before 2026-11-27)."""
    per = res.get("classes_by_type") or {}
    if not per:
        return []
    lines = [
        "",
        f"Per query type (backpressure by the newest rule, `{LATEST}`):",
        "",
        "| query type | class | pairs | same label in both runs | balanced agreement | positives (first / repeat) |",
        "|---|---|---|---|---|---|",
    ]
    for qt, classes in per.items():
        for k, d in classes.items():
            lines.append(f"| {qt} | {'R_O' if k.startswith('R_O') else k} | {_agreement_cells(d)} |")
    return lines


def plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    for ax, short in zip(axes, REG, strict=True):
        xy = [r[short] for r in res["rows"] if r["S"] == [True, True] and None not in r[short]]
        xy = [(x, y) for x, y in xy if x > 0 and y > 0]
        if xy:
            xs, ys = zip(*xy, strict=True)
            ax.scatter(xs, ys, s=14)
            lo, hi = min(*xs, *ys), max(*xs, *ys)
            ax.plot([lo, hi], [lo, hi], color="grey", lw=1)
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel(f"{short}, first run")
        ax.set_ylabel(f"{short}, repeat")
        ax.set_title(f"{short}: run-to-run Q50 {_f(res['regression'][short].get('q50'))}")
    fig.suptitle("Same trace run twice on the REAL testbed")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(res: dict[str, Any], out: Path, command: str, meta: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    # It judges nothing (it measures the floor other reports' targets are read against): an empty target list.
    doc = {**res, "targets": [], "meta": meta}
    (out / "costmodel_repeat.json").write_text(json.dumps(doc, indent=1) + "\n")
    plot(res, out / "costmodel_repeat.png")
    md = out / "costmodel_repeat.md"
    md.write_text(markdown(res, command, meta))
    return md
